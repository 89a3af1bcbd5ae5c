//go:build linux

// Package e2e boots real firmware against the real pxeperf binary: QEMU
// guests (SeaBIOS with Debian's iPXE ROM, OVMF UEFI PXE, OVMF UEFI HTTP boot)
// on a bridge and tap in one network namespace, `pxeperf serve --dhcp full`
// in another. Each guest proves success itself: its iPXE script fetches a
// 64 MiB image and then chains a few bytes that write to QEMU's isa-debug-exit
// port, so QEMU's exit status says whether the fetch worked. AAVMF guests
// (aavmf_linux_test.go) boot an AArch64 EFI app that exits through Arm
// semihosting; the Linux guest (linux_linux_test.go) boots Debian's kernel
// and reports from user space through the same isa-debug-exit port.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

const (
	guestMAC  = "52:54:00:e2:e2:01"
	imageSize = 64 << 20
)

type firmware struct {
	name     string
	nbp      string // how the firmware fetches iPXE: a regexp on pxeperf's fetch log; "" when iPXE is the ROM
	archCode int    // option 93 pxeperf must see in the first DHCP exchange
	memory   string // guest RAM
	args     func(dir string) []string
}

var (
	seabios = firmware{name: "seabios-ipxe", archCode: 0, memory: "256", args: func(string) []string {
		// e1000's default option ROM is Debian's ipxe-qemu efi-e1000.rom (iPXE).
		return []string{"-device", "e1000,netdev=n0,mac=" + guestMAC}
	}}
	ovmfPXE = firmware{name: "ovmf-pxe", nbp: `msg=fetch proto=tftp .*file=/?ipxe.efi bytes=[1-9][0-9]* .*outcome=ok`, archCode: 7, memory: "512", args: func(dir string) []string {
		return append(ovmfArgs(dir), "-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}}
	ovmfHTTP = firmware{name: "ovmf-http", nbp: `msg=fetch proto=http .*file=/?ipxe.efi bytes=[1-9][0-9]* .*outcome=ok`, archCode: 16, memory: "512", args: func(dir string) []string {
		return append(ovmfArgs(dir),
			"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}}
)

const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS.fd"
)

func ovmfArgs(dir string) []string {
	vars := filepath.Join(dir, "OVMF_VARS.fd")
	b, err := os.ReadFile(ovmfVars)
	if err == nil {
		err = os.WriteFile(vars, b, 0o644)
	}
	if err != nil {
		panic(err)
	}
	return []string{
		"-drive", "if=pflash,format=raw,readonly=on,file=" + ovmfCode,
		"-drive", "if=pflash,format=raw,file=" + vars,
		// OVMF's own virtio-net driver; no option ROM.
		"-device", "virtio-net-pci,netdev=n0,romfile=,mac=" + guestMAC,
	}
}

func TestSeaBIOSiPXE(t *testing.T)      { bootGuest(t, seabios, "full") }
func TestOVMFPXE(t *testing.T)          { bootGuest(t, ovmfPXE, "full") }
func TestOVMFHTTPBoot(t *testing.T)     { bootGuest(t, ovmfHTTP, "full") }
func TestSeaBIOSiPXEProxy(t *testing.T) { bootGuest(t, seabios, "proxy") }
func TestOVMFPXEProxy(t *testing.T)     { bootGuest(t, ovmfPXE, "proxy") }

// bootGuest boots one firmware against pxeperf. In "full" mode pxeperf is
// the only DHCP server; in "proxy" mode dnsmasq, in a namespace of its own on
// the same bridge, hands out addresses (and no boot options) and pxeperf
// answers as proxyDHCP.
func bootGuest(t *testing.T, fw firmware, mode string) {
	if testing.Short() {
		t.Skip("QEMU guests take a minute each; skipped with -short")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "qemu-system-x86_64")
	if fw.name != "seabios-ipxe" {
		if _, err := os.Stat(ovmfCode); err != nil {
			t.Skipf("needs OVMF (%s): apt-get install ovmf", ovmfCode)
		}
		if _, err := os.Stat("/usr/lib/ipxe/ipxe.efi"); err != nil {
			t.Skip("needs Debian's ipxe package for ipxe.efi: apt-get install ipxe")
		}
	}
	bin := nstest.Binary(t)
	p, br, tap := nstest.GuestLAN(t)

	dhcpCfg := fullDHCP(p)
	if mode == "proxy" {
		nstest.RequireTool(t, "dnsmasq")
		dhcpCfg = "mode: proxy"
		startDnsmasq(t, p, br, t.TempDir())
	}
	hosts := fmt.Sprintf(`  - mac: %s
    name: e2e-guest
    labels: {firmware: %s}
    script: |
%s`, guestMAC, fw.name, indent(guestScript, "      "))
	srv := serveGuestLAN(t, p, dhcpCfg, hosts, func(root string) {
		writeExitImages(t, root)
		// The 64 MiB image comes from pxeperf's own generator.
		nstest.Run(t, "", bin, "images", "generate", "img64", "--size", "64MiB", "--root", root)
		if st, err := os.Stat(filepath.Join(root, "img64")); err != nil || st.Size() != imageSize {
			t.Fatalf("images generate: %v, size %v", err, st)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sendRouterAdverts(t, ctx, p.Server, p.ServerIf)

	status, console, took, err := nstest.X86Guest{NS: p.Client, Tap: tap, Memory: fw.memory, Args: fw.args(t.TempDir())}.Run(ctx)
	t.Logf("%s (%s DHCP): QEMU exit status %d after %s", fw.name, mode, status, took.Round(time.Second))
	if status != qemuStatus(guestOK) {
		t.Fatalf("%s: guest did not report success (QEMU status %d, want %d; %d = fetch failed; err %v)\nguest console (tail):\n%s\npxeperf log (tail):\n%s",
			fw.name, status, qemuStatus(guestOK), qemuStatus(guestFail), err, nstest.Tail(console, 40), nstest.Tail(srv.Out.String(), 40))
	}
	if !strings.Contains(console, "PXEPERF-IMGFETCH-OK") {
		t.Errorf("guest console lacks the imgfetch marker:\n%s", nstest.Tail(console, 30))
	}
	// The server saw the same: the right architecture, and the whole image.
	log := srv.Out.String()
	checkLease(t, log, guestMAC, fw.archCode)
	logBootLines(t, log)
	if fw.nbp != "" && !regexp.MustCompile(fw.nbp).MatchString(log) {
		t.Errorf("pxeperf log has no fetch of iPXE matching %q", fw.nbp)
	}
	if !regexp.MustCompile(fmt.Sprintf(`msg=fetch proto=http .*file=/?img64 bytes=%d .*outcome=ok .*client_mac=%s`, imageSize, guestMAC)).MatchString(log) {
		t.Errorf("pxeperf log has no complete HTTP fetch of img64 put on the guest's MAC:\n%s", nstest.Tail(log, 30))
	}
}

// fullDHCP is the body of the dhcp: section (indented for two spaces) that
// makes pxeperf the only DHCP server on the guest LAN.
func fullDHCP(p *nstest.Pair) string {
	prefix := strings.TrimSuffix(p.ServerIP.String(), ".1")
	return fmt.Sprintf("mode: full\n  pool: %s.100-%s.150\n  netmask: 255.255.255.0\n  router: %s\n  lease_time: 1h", prefix, prefix, p.ServerIP)
}

// serveGuestLAN starts `pxeperf serve` on p's server side (Pair.Serve) for
// a guest LAN: a debug log, dhcp as the body of the dhcp: section (fullDHCP's
// form), HTTP on :8080 and TFTP on :69 of the server's address, and hosts as
// the list under hosts:. before, when not nil, fills the root first.
func serveGuestLAN(t *testing.T, p *nstest.Pair, dhcp, hosts string, before func(root string)) *nstest.Served {
	t.Helper()
	yaml := fmt.Sprintf("log_level: debug\ndhcp:\n  %s\nhttp:\n  listen: %s:8080\ntftp:\n  listen: %s:69\nhosts:\n%s",
		dhcp, p.ServerIP, p.ServerIP, hosts)
	return p.Serve(t, yaml, before)
}

// logBootLines logs pxeperf's lease and fetch lines: what the guest asked
// for, in the test's own log.
func logBootLines(t *testing.T, log string) {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "msg=fetch") || strings.Contains(l, "msg=lease") {
			t.Log(l)
		}
	}
}

// checkLease fails t unless pxeperf's log has a lease for mac whose DHCP
// request carried option 93 arch.
func checkLease(t *testing.T, log, mac string, arch int) {
	t.Helper()
	if !regexp.MustCompile(fmt.Sprintf(`msg=lease .*client_mac=%s .*arch=%d `, mac, arch)).MatchString(log) {
		t.Errorf("pxeperf log has no lease for %s with arch %d:\n%s", mac, arch, nstest.Tail(log, 30))
	}
}

// startDnsmasq puts the lab's "existing DHCP server" in a namespace of its
// own, joined to the guest's bridge: addresses from .50-.90 and no boot
// options, so everything about booting comes from pxeperf's proxyDHCP.
func startDnsmasq(t *testing.T, p *nstest.Pair, br, dir string) {
	t.Helper()
	prefix := strings.TrimSuffix(p.ServerIP.String(), ".1")
	ns, in, out := p.Client+"d", p.ClientIf+"d", p.ClientIf+"e"
	t.Cleanup(func() {
		nstest.KillNetnsProcs(ns)
		_, _ = nstest.Output("", 10*time.Second, "ip", "netns", "del", ns)
	})
	nstest.Run(t, "", "ip", "netns", "add", ns)
	nstest.Run(t, "", "ip", "link", "add", in, "netns", ns, "type", "veth", "peer", "name", out, "netns", p.Client)
	nstest.Run(t, p.Client, "ip", "link", "set", out, "master", br)
	nstest.Run(t, p.Client, "ip", "link", "set", out, "up")
	nstest.Run(t, ns, "ip", "addr", "add", prefix+".3/24", "dev", in)
	nstest.Run(t, ns, "ip", "link", "set", in, "up")
	nstest.Start(t, ns, "dnsmasq", "-d", "-C", "/dev/null", "--port=0", "--interface="+in, "--bind-interfaces",
		"--dhcp-range="+prefix+".50,"+prefix+".90,1h", "--dhcp-leasefile="+filepath.Join(dir, "dnsmasq.leases"),
		"--no-ping", "--log-dhcp")
}

func indent(s, pre string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(pre + l + "\n")
	}
	return b.String()
}
