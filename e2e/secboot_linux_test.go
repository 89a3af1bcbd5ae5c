//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// Secure Boot: OVMF with Secure Boot on and Microsoft's keys enrolled
// PXE-boots Debian's signed chain (shim -> GRUB's network image -> the
// signed kernel) from a root that holds only the kernel and an initramfs:
// shim and GRUB come from the host's packages (images.SignedLoaders) and
// grub/grub.cfg is generated from the host entry. The negative run hands
// out Debian's unsigned ipxe.efi on the same path, which the firmware
// must refuse.
const (
	sbCode   = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	sbVars   = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
	sbShim   = "/usr/lib/shim/shimx64.efi.signed"
	sbGRUB   = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
	sbOn     = "pxeperf-init: secure boot on"
	sbOff    = "pxeperf-init: secure boot off"
	sbHost   = "e2e-secboot"
	efiGUID  = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	sbDenied = "Access Denied"
)

// secbootInit prints the kernel's view of Secure Boot (its boot message and
// the SecureBoot variable's value byte after the 4 attribute bytes) and
// powers off. No isa-debug-exit: a locked-down kernel refuses /dev/port,
// so the console says the result and QEMU exits on the power-off.
const secbootInit = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t efivarfs efivarfs /sys/firmware/efi/efivars 2>/dev/null
dmesg | grep -i 'secure boot' | sed 's/^/pxeperf-init: dmesg: /'
v=$(od -An -tu1 -j4 -N1 /sys/firmware/efi/efivars/SecureBoot-` + efiGUID + ` 2>/dev/null | tr -d ' ')
echo "pxeperf-init: SecureBoot variable: ${v:-unreadable}"
if dmesg | grep -q 'Secure boot enabled' || [ "$v" = 1 ]; then echo "` + sbOn + `"; else echo "` + sbOff + `"; fi
poweroff -f
`

// sbRequire skips with -short, without root or QEMU, and unless OVMF's
// Secure Boot build, shim and GRUB are installed, naming the package.
func sbRequire(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("Secure Boot OVMF guests take a minute or two under TCG; skipped with -short")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "qemu-system-x86_64")
	for f, pkg := range map[string]string{sbCode: "ovmf", sbVars: "ovmf", sbShim: "shim-signed", sbGRUB: "grub-efi-amd64-signed"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("needs %s: apt-get install %s", f, pkg)
		}
	}
}

// sbGuest runs OVMF with Secure Boot on (q35 with SMM, secure pflash) until
// it powers off, a StopAt string shows or ctx ends.
func sbGuest(t *testing.T, ctx context.Context, ns, tap string, stopAt []string) nstest.QEMURun {
	t.Helper()
	vars := filepath.Join(t.TempDir(), "OVMF_VARS.fd")
	copyFile(t, sbVars, vars)
	q := nstest.X86Guest{NS: ns, Tap: tap, Memory: "1024", Args: []string{
		"-machine", "q35,smm=on",
		"-global", "driver=cfi.pflash01,property=secure,value=on",
		"-global", "ICH9-LPC.disable_s3=1",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + sbCode,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n",
		"-device", "virtio-net-pci,netdev=n0,romfile=,mac=" + guestMAC,
	}}.QEMU()
	q.StopAt = stopAt
	q.Marks = []string{sbOn, sbOff}
	return q.Run(ctx)
}

func TestSecureBootShimGRUBLinux(t *testing.T) {
	sbRequire(t)
	_, kernel, _, busybox := debianKernel(t)
	initrd := initramfs(t, busybox, secbootInit, nil, nil)

	p, _, tap := nstest.GuestLAN(t)
	hosts := fmt.Sprintf(`  - mac: %s
    name: %s
    kernel: /vmlinuz
    initrd: /initrd.cpio.gz
    cmdline: console=ttyS0 panic=-1
`, guestMAC, sbHost)
	srv := serveGuestLAN(t, p, fullDHCP(p)+"\n  boot_files:\n    efi-x64: shimx64.efi", hosts, func(root string) {
		copyFile(t, kernel, filepath.Join(root, "vmlinuz"))
		if err := os.WriteFile(filepath.Join(root, "initrd.cpio.gz"), initrd, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := sbGuest(t, ctx, p.Client, tap, []string{"Kernel panic", sbDenied, "Shell>", "grub>"})
	log := srv.Out.String()
	t.Logf("QEMU exit status %d after %s (stopped at %q)", run.Status, run.Took.Round(time.Second), run.Stopped)
	logBootLines(t, log)
	for _, l := range strings.Split(run.Console, "\n") {
		if strings.HasPrefix(l, "pxeperf-init:") {
			t.Log("guest: " + l)
		}
	}
	if !strings.Contains(run.Console, sbOn) || !strings.Contains(run.Console, "Secure boot enabled") {
		t.Fatalf("the guest did not report Secure Boot on (QEMU status %d, err %v)\nguest console (tail):\n%s\npxeperf log (tail):\n%s",
			run.Status, run.Err, nstest.Tail(run.Console, 50), nstest.Tail(log, 40))
	}
	for _, f := range []string{"shimx64.efi", "grubx64.efi", "grub/grub.cfg", "vmlinuz", "initrd.cpio.gz"} {
		re := fmt.Sprintf(`msg=fetch proto=tftp .*file=/?%s bytes=[1-9][0-9]* .*outcome=ok`, regexp.QuoteMeta(f))
		if !regexp.MustCompile(re).MatchString(log) {
			t.Errorf("pxeperf log has no complete TFTP fetch of %s", f)
		}
	}
	checkSBProbes(t, srv)
}

// checkSBProbes reads the store through the real binary: shim's and GRUB's
// lookups of files they go on without are probes, none an error.
func checkSBProbes(t *testing.T, srv *nstest.Served) {
	t.Helper()
	probes := []string{"revocations_sku.efi", "revocations_sbat.efi", "shim_certificate_0.efi", "grub/x86_64-efi/command.lst"}
	var got map[string]string
	nstest.WaitFor(15*time.Second, func() bool {
		got = map[string]string{}
		for _, kind := range []string{"probe", "error"} {
			for _, r := range kindRecords(t, srv, kind) {
				got[strings.TrimPrefix(r.File, "/")] = kind
			}
		}
		return got[probes[len(probes)-1]] != ""
	})
	for _, f := range probes {
		if got[f] != "probe" {
			t.Errorf("record of %s is of kind %q, want probe (all probes and errors: %v)", f, got[f], got)
		}
	}
}

// kindRecords are the fetches of one kind in srv's store.
func kindRecords(t *testing.T, srv *nstest.Served, kind string) []nstest.Record {
	out, err := exec.Command(nstest.Binary(t), "report", "--data", srv.Data, "--table", "fetches", "--format", "json", "--kind", kind).Output()
	if err != nil {
		t.Logf("pxeperf report --kind %s: %v", kind, err)
		return nil
	}
	var tbl struct {
		Rows []nstest.Record `json:"rows"`
	}
	if err := json.Unmarshal(out, &tbl); err != nil {
		t.Fatalf("pxeperf report --format json: %v\n%s", err, out)
	}
	return tbl.Rows
}

func TestSecureBootRefusesUnsignedIPXE(t *testing.T) {
	sbRequire(t)
	if _, err := os.Stat("/usr/lib/ipxe/ipxe.efi"); err != nil {
		t.Skip("needs Debian's ipxe package for ipxe.efi: apt-get install ipxe")
	}
	p, _, tap := nstest.GuestLAN(t)
	srv := serveGuestLAN(t, p, fullDHCP(p)+"\n  boot_files:\n    efi-x64: ipxe.efi", "  []", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := sbGuest(t, ctx, p.Client, tap, []string{sbDenied, "iPXE initialising", "Shell>", "BdsDxe: loading Boot0001"})
	log := srv.Out.String()
	t.Logf("QEMU exit status %d after %s (stopped at %q)", run.Status, run.Took.Round(time.Second), run.Stopped)
	if !regexp.MustCompile(`msg=fetch proto=tftp .*file=/?ipxe.efi bytes=[1-9][0-9]* .*outcome=ok`).MatchString(log) {
		t.Fatalf("the firmware never fetched ipxe.efi, so nothing was refused\nguest console (tail):\n%s\npxeperf log (tail):\n%s",
			nstest.Tail(run.Console, 40), nstest.Tail(log, 30))
	}
	if strings.Contains(run.Console, "iPXE") && !strings.Contains(run.Console, sbDenied) {
		t.Fatalf("unsigned iPXE ran under Secure Boot:\n%s", nstest.Tail(run.Console, 40))
	}
	if !strings.Contains(run.Console, sbDenied) {
		t.Errorf("console does not show the firmware's %q for ipxe.efi:\n%s", sbDenied, nstest.Tail(run.Console, 40))
	}
}
