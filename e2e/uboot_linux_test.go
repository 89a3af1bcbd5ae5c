//go:build linux

package e2e

import (
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

// Debian's U-Boot builds for QEMU (u-boot-qemu 2023.01) against
// `pxeperf serve --dhcp full` under TCG. Each board boots twice: once to run
// dhcp, three tftpboot transfers (blksize x windowsize) checked by U-Boot's
// own crc32, then `pxe get` + `pxe boot` of the pxelinux.cfg file pxeperf
// generates for the host entry; once more for the distro boot path
// (`run bootcmd_dhcp`), which sources the boot.scr.uimg pxeperf generates.
// The kernel both paths boot is crafted per architecture
// (uboot_kernel_linux_test.go) and ends QEMU with ubootKernelStatus.

// ubootImageSize is the image each board fetches three times. 16 MiB keeps
// the four boards within a few minutes under TCG; PXEPERF_BENCH=1 raises it to
// 64 MiB for steadier figures.
const (
	ubootImageSize      = 16 << 20
	ubootBenchImageSize = 64 << 20
)

func ubootImageBytes() int64 {
	if os.Getenv("PXEPERF_BENCH") == "1" {
		return ubootBenchImageSize
	}
	return ubootImageSize
}

// ubootBoard is one U-Boot build and the QEMU machine it runs on.
type ubootBoard struct {
	name     string // arm64, arm, x86_64, riscv64
	qemu     string // QEMU binary
	qemuPkg  string // Debian package with that binary
	firmware string // U-Boot image, from u-boot-qemu
	mac      string
	// machine is the QEMU machine, CPU and firmware arguments.
	machine []string
	// nic is the QEMU network device. U-Boot 2023.01 reads the MAC of a
	// virtio-net-pci device as 52:52:52:52:52:52 (so DHCP carries the wrong
	// chaddr and no host entry matches); e1000 and virtio-mmio read it
	// right.
	nic    string
	ethact string // U-Boot's name for that device
	// exitArgs let the crafted kernel end QEMU with a status.
	exitArgs []string
	arch93   int    // option 93 the build sends, -1 for none
	vendor   string // option 60 it sends (CONFIG_BOOTP_VCI_STRING)
	kernel   func() []byte
	cmdline  string
	// env is set after the prompt, for variables a build lacks.
	env []string
}

var ubootBoards = []ubootBoard{
	{
		name: "arm64", qemu: "qemu-system-aarch64", qemuPkg: "qemu-system-arm",
		firmware: "/usr/lib/u-boot/qemu_arm64/u-boot.bin", mac: "52:54:00:e2:b0:01",
		machine: []string{"-M", "virt", "-cpu", "cortex-a57"},
		nic:     "e1000", ethact: "e1000#0",
		exitArgs: []string{"-semihosting-config", "enable=on,target=native"},
		arch93:   22, vendor: "U-Boot.armv8", kernel: arm64Kernel, cmdline: "console=ttyAMA0",
	},
	{
		name: "arm", qemu: "qemu-system-arm", qemuPkg: "qemu-system-arm",
		firmware: "/usr/lib/u-boot/qemu_arm/u-boot.bin", mac: "52:54:00:e2:b0:02",
		machine: []string{"-M", "virt", "-cpu", "cortex-a15"},
		nic:     "e1000", ethact: "e1000#0",
		exitArgs: []string{"-semihosting-config", "enable=on,target=native"},
		arch93:   21, vendor: "U-Boot.armv7", kernel: armKernel, cmdline: "console=ttyAMA0",
	},
	{
		name: "x86_64", qemu: "qemu-system-x86_64", qemuPkg: "qemu-system-x86",
		firmware: "/usr/lib/u-boot/qemu-x86_64/u-boot.rom", mac: "52:54:00:e2:b0:03",
		machine: []string{"-M", "pc"},
		nic:     "e1000", ethact: "e1000#0",
		exitArgs: []string{"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"},
		arch93:   -1, vendor: "U-Boot", kernel: x86Kernel, cmdline: "console=ttyS0",
		// The x86 build has no pxefile_addr_r, which `pxe get` needs; above
		// scriptaddr (0x7000000), clear of loadaddr + 64 MiB.
		env: []string{"setenv pxefile_addr_r 0x7800000"},
	},
	{
		name: "riscv64", qemu: "qemu-system-riscv64", qemuPkg: "qemu-system-misc",
		firmware: "/usr/lib/u-boot/qemu-riscv64/u-boot.bin", mac: "52:54:00:e2:b0:04",
		machine: []string{"-M", "virt"},
		// The riscv64 build has no e1000 driver; virtio-mmio gets the MAC right.
		nic: "virtio-net-device", ethact: "virtio-net#0",
		arch93: -1, vendor: "U-Boot", kernel: riscv64Kernel, cmdline: "console=ttyS0",
	},
}

// ubootFigure is one transfer for the figures table.
type ubootFigure struct {
	arch                string
	blksize, windowsize int
	bytes               int64
	wall                time.Duration // tftpboot command, prompt to prompt
	server              time.Duration // pxeperf's fetch duration
	serverMbps          float64
	resends, timeouts   string // pxeperf's retransmitted DATA packets and timeouts
	ubootRate           string // U-Boot's own rate line, "" if none
}

// ubootTransfers are the blksize x windowsize points each board fetches.
// U-Boot's virtio-net hangs at windowsize >= 32, so 16 is the top.
var ubootTransfers = []struct{ blksize, windowsize int }{{512, 1}, {1468, 1}, {1468, 16}}

func TestUBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("U-Boot guests under TCG take a minute each; skipped with -short")
	}
	nstest.RequireRoot(t)
	var (
		mu      sync.Mutex
		figures []ubootFigure
		notes   []string
	)
	start := time.Now()
	for _, b := range ubootBoards {
		t.Run(b.name, func(t *testing.T) {
			t0 := time.Now()
			figs, note := ubootBoot(t, b)
			mu.Lock()
			defer mu.Unlock()
			figures = append(figures, figs...)
			notes = append(notes, fmt.Sprintf("%-8s %s; took %s", b.name, note, time.Since(t0).Round(time.Second)))
		})
	}
	t.Logf("U-Boot boards (image %d MiB), total %s:\n%s\n%s", ubootImageBytes()>>20,
		time.Since(start).Round(time.Second), strings.Join(notes, "\n"), ubootTable(figures))
}

// ubootTable is arch x blksize x windowsize -> Mbit/s as pxeperf measured it.
func ubootTable(figs []ubootFigure) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "arch\tblksize\twindowsize\tbytes\tpxeperf Mbit/s\tpxeperf time\tresends\ttimeouts\ttftpboot time\tU-Boot rate\t")
	for _, f := range figs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n", f.arch, f.blksize, f.windowsize, f.bytes,
			f.serverMbps, f.server.Round(time.Millisecond), f.resends, f.timeouts, f.wall.Round(time.Millisecond), f.ubootRate)
	}
	_ = w.Flush()
	return b.String()
}

// ubootBoot runs both boots of one board and returns its transfers and a
// one-line note for the summary.
func ubootBoot(t *testing.T, b ubootBoard) ([]ubootFigure, string) {
	if _, err := exec.LookPath(b.qemu); err != nil {
		t.Skipf("needs %s: apt-get install %s", b.qemu, b.qemuPkg)
	}
	if _, err := os.Stat(b.firmware); err != nil {
		t.Skipf("needs %s: apt-get install u-boot-qemu", b.firmware)
	}
	bin := nstest.Binary(t)
	p, _, tap := guestLAN(t)

	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	size := ubootImageBytes()
	img := fmt.Sprintf("img%dm", size>>20)
	nstest.Run(t, "", bin, "images", "generate", img, "--size", fmt.Sprint(size), "--root", root)
	data, err := os.ReadFile(filepath.Join(root, img))
	if err != nil || int64(len(data)) != size {
		t.Fatalf("images generate: %v, %d bytes", err, len(data))
	}
	wantCRC := crc32.ChecksumIEEE(data)
	kernel := "kernel-" + b.name + ".img"
	if err := os.WriteFile(filepath.Join(root, kernel), b.kernel(), 0o644); err != nil {
		t.Fatal(err)
	}
	host := "uboot-" + b.name

	// One host entry; pxelinux.cfg/01-MAC and boot.scr.uimg are pxeperf's.
	cfg := fmt.Sprintf(`root: %s
data: %s
log_level: debug
dhcp:
  %s
http:
  listen: %s:8080
tftp:
  listen: %s:69
hosts:
  - mac: %s
    name: %s
    kernel: %s
    cmdline: %q
`, root, filepath.Join(dir, "data"), fullDHCP(p), p.ServerIP, p.ServerIP, b.mac, host, kernel, b.cmdline)
	cfgPath := filepath.Join(dir, "pxeperf.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, bin, p, cfgPath)
	sniff := sniffDHCP(t, p.Client, tap)

	args := append([]string{"-accel", "tcg", "-m", "512", "-no-reboot",
		"-display", "none", "-serial", "stdio", "-monitor", "none",
		"-bios", b.firmware,
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
		"-device", b.nic + ",netdev=n0,mac=" + b.mac}, b.machine...)
	args = append(args, b.exitArgs...)

	// Boot 1: dhcp, tftpboot x3 with crc32, pxe get, pxe boot.
	c := startUBoot(t, b.name+" boot 1", p.Client, srv.Out.String, b.qemu, args...)
	c.stopAutoboot(90 * time.Second)
	ubootEnv(c, b, "setenv autoload no")
	out := c.run("dhcp", 60*time.Second)
	if !strings.Contains(out, "DHCP client bound to address") {
		c.fatalf("dhcp did not bind:\n%s", out)
	}
	t.Logf("%s DHCP request: %s", b.name, sniff)
	if vendor, arch, ok := sniff.last(); ok && (arch != b.arch93 || vendor != b.vendor) {
		t.Errorf("%s sent %s, want option 60 %q and option 93 %d (-1: none)", b.name, sniff, b.vendor, b.arch93)
	}
	if got := strings.TrimSpace(c.run("printenv serverip", 10*time.Second)); got != "serverip="+p.ServerIP.String() {
		c.fatalf("after dhcp, %q; want serverip=%s: pxeperf's reply had no siaddr for this client (%s)", got, p.ServerIP, sniff)
	}

	var figs []ubootFigure
	for _, tr := range ubootTransfers {
		c.run(fmt.Sprintf("setenv tftpblocksize %d; setenv tftpwindowsize %d", tr.blksize, tr.windowsize), 10*time.Second)
		t0 := time.Now()
		tout := c.run("tftpboot ${loadaddr} "+img, 5*time.Minute)
		wall := time.Since(t0)
		m := regexp.MustCompile(`Bytes transferred = (\d+)`).FindStringSubmatch(tout)
		if m == nil || m[1] != fmt.Sprint(size) {
			c.fatalf("tftpboot %s at blksize %d windowsize %d: want %d bytes transferred:\n%s", img, tr.blksize, tr.windowsize, size, tail(tout, 10))
		}
		out := c.run("crc32 ${loadaddr} ${filesize}", 2*time.Minute)
		m = regexp.MustCompile(`==> ([0-9a-f]{8})`).FindStringSubmatch(out)
		if m == nil || m[1] != fmt.Sprintf("%08x", wantCRC) {
			c.fatalf("U-Boot's crc32 after blksize %d windowsize %d: %q, want %08x", tr.blksize, tr.windowsize, strings.TrimSpace(out), wantCRC)
		}
		f := ubootFigure{arch: b.name, blksize: tr.blksize, windowsize: tr.windowsize, bytes: size, wall: wall}
		if m := regexp.MustCompile(`\t ([0-9.]+ [KMG]?i?B/s)`).FindStringSubmatch(tout); m != nil {
			f.ubootRate = m[1]
		}
		fe := waitFetch(t, srv, img, func(fe map[string]string) bool {
			return fe["blksize"] == fmt.Sprint(tr.blksize) && fe["windowsize"] == fmt.Sprint(tr.windowsize)
		})
		if fe == nil {
			c.fatalf("pxeperf logged no fetch of %s at blksize %d windowsize %d", img, tr.blksize, tr.windowsize)
		}
		f.serverMbps, _ = strconv.ParseFloat(fe["mbps"], 64)
		f.server, _ = time.ParseDuration(fe["duration"])
		f.resends, f.timeouts = fe["retransmits"], fe["timeouts"]
		t.Logf("%s: %s blksize %d windowsize %d: %d bytes, crc32 %08x ok; pxeperf %.2f Mbit/s in %s, tftpboot %s, U-Boot says %s",
			b.name, img, tr.blksize, tr.windowsize, size, wantCRC, f.serverMbps, f.server, wall.Round(time.Millisecond), f.ubootRate)
		figs = append(figs, f)
	}

	if peers := ubootPeerRounds(t, c, p, root, img, size); peers != "" {
		t.Logf("%s: %s", b.name, peers)
		// tftpboot IP:FILE left the server address at the peer's.
		c.run("setenv serverip "+p.ServerIP.String(), 10*time.Second)
	}
	out = c.run("pxe get", 2*time.Minute)
	// cmd/pxe.c names ${bootfile} in "Config file '...' found", not the
	// file it loaded; the name is on the "Retrieving file:" line before it.
	if !regexp.MustCompile(`(?s)Retrieving file: ` + regexp.QuoteMeta(ubootPXEConfig(b.mac)) + `\n.*Config file '.*' found`).MatchString(out) {
		c.fatalf("pxe get did not load pxeperf's %s:\n%s", ubootPXEConfig(b.mac), out)
	}
	from := c.send("pxe boot")
	c.waitFor(from, 2*time.Minute, `"Starting kernel"`, func(s string) bool { return strings.Contains(s, "Starting kernel") })
	if st := c.waitExit(time.Minute); st != ubootKernelStatus {
		c.fatalf("pxe boot: QEMU exit status %d, want %d (the crafted kernel did not run)", st, ubootKernelStatus)
	}
	t.Logf("%s: pxe boot started %s and it ended QEMU with status %d", b.name, kernel, ubootKernelStatus)

	// Boot 2: the distro boot path, bootcmd_dhcp sourcing boot.scr.uimg.
	c2 := startUBoot(t, b.name+" boot 2", p.Client, srv.Out.String, b.qemu, args...)
	c2.stopAutoboot(90 * time.Second)
	// No autoload=no here: bootcmd_dhcp's `dhcp ADDR FILE` loads nothing with it.
	ubootEnv(c2, b)
	distro := "run bootcmd_dhcp"
	if out := c2.run("printenv bootcmd_dhcp", 10*time.Second); !strings.HasPrefix(strings.TrimSpace(out), "bootcmd_dhcp=") {
		t.Logf("%s: this build has no bootcmd_dhcp; running its equivalent", b.name)
		distro = "dhcp ${scriptaddr} boot.scr.uimg; source ${scriptaddr}"
	}
	from = c2.send(distro)
	echo := c2.waitFor(from, 2*time.Minute, `the script's "pxeperf:" line`, func(s string) bool {
		return regexp.MustCompile(`(?m)^pxeperf: .*` + regexp.QuoteMeta(host)).MatchString(s)
	})
	c2.waitFor(from, 2*time.Minute, `"Starting kernel"`, func(s string) bool { return strings.Contains(s, "Starting kernel") })
	if st := c2.waitExit(time.Minute); st != ubootKernelStatus {
		c2.fatalf("%s: QEMU exit status %d, want %d (the crafted kernel did not run)", distro, st, ubootKernelStatus)
	}
	t.Logf("%s: %s: %s", b.name, distro, regexp.MustCompile(`(?m)^pxeperf: .*$`).FindString(echo))

	ubootCheckFetches(t, srv.Out.String(), b, host, kernel)
	return figs, sniff.String()
}

// ubootEnv makes a fresh U-Boot's environment deterministic: one interface,
// no retries on other ports, no serverip left from anywhere, plus what the
// build lacks.
func ubootEnv(c *ubootConsole, b ubootBoard, extra ...string) {
	c.t.Helper()
	cmds := append([]string{"setenv ethact " + b.ethact, "setenv ethrotate no", "setenv netretry no", "setenv serverip"}, b.env...)
	for _, cmd := range append(cmds, extra...) {
		if out := c.run(cmd, 10*time.Second); strings.TrimSpace(out) != "" {
			c.fatalf("%s: %s", cmd, out)
		}
	}
}

// logKV matches one key=value pair of slog's text format.
var logKV = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

// logRecords returns the log lines with msg=msg as key -> value maps.
func logRecords(log, msg string) []map[string]string {
	var recs []map[string]string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "msg="+msg+" ") {
			continue
		}
		r := map[string]string{}
		for _, m := range logKV.FindAllStringSubmatch(l, -1) {
			v := m[2]
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
			r[m[1]] = v
		}
		recs = append(recs, r)
	}
	return recs
}

// waitFetch waits (5 s at most: the server logs right after the last ACK)
// for a fetch of file that match accepts.
func waitFetch(t *testing.T, srv *nstest.Proc, file string, match func(map[string]string) bool) map[string]string {
	t.Helper()
	var found map[string]string
	nstest.WaitFor(5*time.Second, func() bool {
		for _, r := range logRecords(srv.Out.String(), "fetch") {
			if strings.TrimPrefix(r["file"], "/") == file && r["outcome"] == "ok" && match(r) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// ubootCheckFetches checks every fetch pxeperf logged for the guest: each
// carries its MAC and host name; the pxelinux config and the boot script
// were generated (kind=config), the kernel and image came from the root.
func ubootCheckFetches(t *testing.T, log string, b ubootBoard, host, kernel string) {
	t.Helper()
	leases := logRecords(log, "lease")
	for _, l := range leases {
		if l["client_mac"] != b.mac || l["host"] != host {
			t.Errorf("lease carries client_mac=%q host=%q, want %s %s", l["client_mac"], l["host"], b.mac, host)
		}
	}
	if len(leases) == 0 {
		t.Errorf("pxeperf logged no lease for %s", b.mac)
	} else {
		t.Logf("%s: pxeperf lease: arch=%s boot_file=%s", b.name, leases[0]["arch"], leases[0]["boot_file"])
	}
	fetches := logRecords(log, "fetch")
	got := map[string]int{}
	kind := map[string]string{}
	for _, f := range fetches {
		if f["client_mac"] != b.mac || f["host"] != host {
			t.Errorf("fetch of %s carries client_mac=%q host=%q, want %s %s", f["file"], f["client_mac"], f["host"], b.mac, host)
		}
		if f["outcome"] == "ok" {
			name := strings.TrimPrefix(f["file"], "/")
			got[name]++
			kind[name] = f["kind"]
		}
	}
	for name, want := range map[string]string{
		ubootPXEConfig(b.mac): "config", "boot.scr.uimg": "config",
		kernel: "", fmt.Sprintf("img%dm", ubootImageBytes()>>20): "",
	} {
		switch {
		case got[name] == 0:
			t.Errorf("pxeperf logged no complete fetch of %s", name)
		case kind[name] != want:
			t.Errorf("fetch of %s has kind=%q, want %q", name, kind[name], want)
		}
	}
	var names []string
	for n, k := range got {
		if kind[n] != "" {
			n += " (kind=" + kind[n] + ")"
		}
		names = append(names, fmt.Sprintf("%s x%d", n, k))
	}
	sort.Strings(names)
	t.Logf("%s: pxeperf fetches (all with client_mac=%s host=%s): %s", b.name, b.mac, host, strings.Join(names, ", "))
}

// ubootPXEConfig is the first name U-Boot's `pxe get` asks for (without a
// pxeuuid): pxelinux.cfg/01-MAC with dashes.
func ubootPXEConfig(mac string) string {
	return "pxelinux.cfg/01-" + strings.ReplaceAll(mac, ":", "-")
}
