//go:build linux

package e2e

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
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
	if peers.Enabled() {
		return ubootBenchImageSize
	}
	return ubootImageSize
}

// ubootKernels are the crafted kernels (uboot_kernel_linux_test.go), per
// board of uboot.Boards.
var ubootKernels = map[string]func() []byte{
	"arm64": arm64Kernel, "arm": armKernel, "x86_64": x86Kernel, "riscv64": riscv64Kernel,
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
	for _, b := range uboot.Boards() {
		t.Run(b.Name, func(t *testing.T) {
			t0 := time.Now()
			figs, note := ubootBoot(t, b)
			mu.Lock()
			defer mu.Unlock()
			figures = append(figures, figs...)
			notes = append(notes, fmt.Sprintf("%-8s %s; took %s", b.Name, note, time.Since(t0).Round(time.Second)))
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
func ubootBoot(t *testing.T, b uboot.Board) ([]ubootFigure, string) {
	b.Require(t)
	bin := nstest.Binary(t)
	p, _, tap := nstest.GuestLAN(t)
	size := ubootImageBytes()
	img := fmt.Sprintf("img%dm", size>>20)
	kernel := "kernel-" + b.Name + ".img"
	host := "uboot-" + b.Name
	var wantCRC uint32

	// One host entry; pxelinux.cfg/01-MAC and boot.scr.uimg are pxeperf's.
	hosts := fmt.Sprintf("  - mac: %s\n    name: %s\n    kernel: %s\n    cmdline: %q\n", b.MAC, host, kernel, b.Cmdline)
	srv := serveGuestLAN(t, p, fullDHCP(p), hosts, func(root string) {
		nstest.Run(t, "", bin, "images", "generate", img, "--size", fmt.Sprint(size), "--root", root)
		data, err := os.ReadFile(filepath.Join(root, img))
		if err != nil || int64(len(data)) != size {
			t.Fatalf("images generate: %v, %d bytes", err, len(data))
		}
		wantCRC = crc32.ChecksumIEEE(data)
		if err := os.WriteFile(filepath.Join(root, kernel), ubootKernels[b.Name](), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	sniff := sniffDHCP(t, p.Client, tap)

	// Boot 1: dhcp, tftpboot x3 with crc32, pxe get, pxe boot.
	c := uboot.Boot(t, b, b.Name+" boot 1", p.Client, tap, srv.Out.String)
	c.StopAutoboot(90 * time.Second)
	c.Env(b, "setenv autoload no")
	out := c.Run("dhcp", 60*time.Second)
	if !strings.Contains(out, "DHCP client bound to address") {
		c.Fatalf("dhcp did not bind:\n%s", out)
	}
	t.Logf("%s DHCP request: %s", b.Name, sniff)
	if vendor, arch, ok := sniff.last(); ok && (arch != b.Arch93 || vendor != b.Vendor) {
		t.Errorf("%s sent %s, want option 60 %q and option 93 %d (-1: none)", b.Name, sniff, b.Vendor, b.Arch93)
	}
	if got := strings.TrimSpace(c.Run("printenv serverip", 10*time.Second)); got != "serverip="+p.ServerIP.String() {
		c.Fatalf("after dhcp, %q; want serverip=%s: pxeperf's reply had no siaddr for this client (%s)", got, p.ServerIP, sniff)
	}

	figs := ubootTFTPBoots(t, c, srv, b, img, size, wantCRC)

	if peers := ubootPeerRounds(t, c, p, srv.Root, img, size); peers != "" {
		t.Logf("%s: %s", b.Name, peers)
		// tftpboot IP:FILE left the server address at the peer's.
		c.Run("setenv serverip "+p.ServerIP.String(), 10*time.Second)
	}
	out = c.Run("pxe get", 2*time.Minute)
	// cmd/pxe.c names ${bootfile} in "Config file '...' found", not the
	// file it loaded; the name is on the "Retrieving file:" line before it.
	if !regexp.MustCompile(`(?s)Retrieving file: ` + regexp.QuoteMeta(ubootPXEConfig(b.MAC)) + `\n.*Config file '.*' found`).MatchString(out) {
		c.Fatalf("pxe get did not load pxeperf's %s:\n%s", ubootPXEConfig(b.MAC), out)
	}
	from := c.Send("pxe boot")
	c.WaitFor(from, 2*time.Minute, `"Starting kernel"`, func(s string) bool { return strings.Contains(s, "Starting kernel") })
	if st := c.WaitExit(time.Minute); st != ubootKernelStatus {
		c.Fatalf("pxe boot: QEMU exit status %d, want %d (the crafted kernel did not run)", st, ubootKernelStatus)
	}
	t.Logf("%s: pxe boot started %s and it ended QEMU with status %d", b.Name, kernel, ubootKernelStatus)

	// Boot 2: the distro boot path, bootcmd_dhcp sourcing boot.scr.uimg.
	ubootDistroBoot(t, b, p, tap, srv, host)

	ubootCheckFetches(t, srv.Out.String(), b, host, kernel)
	return figs, sniff.String()
}

// ubootTFTPBoots fetches img at each of ubootTransfers' blksize x
// windowsize points with tftpboot, checks U-Boot's crc32 of it and returns
// each transfer's figures, pxeperf's from its fetch log line.
func ubootTFTPBoots(t *testing.T, c *uboot.Console, srv *nstest.Served, b uboot.Board, img string, size int64, wantCRC uint32) []ubootFigure {
	t.Helper()
	var figs []ubootFigure
	for _, tr := range ubootTransfers {
		c.Run(fmt.Sprintf("setenv tftpblocksize %d; setenv tftpwindowsize %d", tr.blksize, tr.windowsize), 10*time.Second)
		tf := c.TFTPBoot(img, size, 5*time.Minute)
		c.CheckCRC32(wantCRC, fmt.Sprintf("blksize %d windowsize %d", tr.blksize, tr.windowsize))
		f := ubootFigure{arch: b.Name, blksize: tr.blksize, windowsize: tr.windowsize, bytes: size, wall: tf.Wall, ubootRate: tf.Rate}
		fe := waitFetch(t, srv.Proc, img, func(fe map[string]string) bool {
			return fe["blksize"] == fmt.Sprint(tr.blksize) && fe["windowsize"] == fmt.Sprint(tr.windowsize)
		})
		if fe == nil {
			c.Fatalf("pxeperf logged no fetch of %s at blksize %d windowsize %d", img, tr.blksize, tr.windowsize)
		}
		f.serverMbps, _ = strconv.ParseFloat(fe["mbps"], 64)
		f.server, _ = time.ParseDuration(fe["duration"])
		f.resends, f.timeouts = fe["retransmits"], fe["timeouts"]
		t.Logf("%s: %s blksize %d windowsize %d: %d bytes, crc32 %08x ok; pxeperf %.2f Mbit/s in %s, tftpboot %s, U-Boot says %s",
			b.Name, img, tr.blksize, tr.windowsize, size, wantCRC, f.serverMbps, f.server, f.wall.Round(time.Millisecond), f.ubootRate)
		figs = append(figs, f)
	}
	return figs
}

// ubootDistroBoot boots the board again and runs the distro boot path
// (bootcmd_dhcp, or its equivalent where the build lacks it), which must
// source pxeperf's boot.scr.uimg for host and start the crafted kernel.
func ubootDistroBoot(t *testing.T, b uboot.Board, p *nstest.Pair, tap string, srv *nstest.Served, host string) {
	t.Helper()
	c2 := uboot.Boot(t, b, b.Name+" boot 2", p.Client, tap, srv.Out.String)
	c2.StopAutoboot(90 * time.Second)
	// No autoload=no here: bootcmd_dhcp's `dhcp ADDR FILE` loads nothing with it.
	c2.Env(b)
	distro := "run bootcmd_dhcp"
	if out := c2.Run("printenv bootcmd_dhcp", 10*time.Second); !strings.HasPrefix(strings.TrimSpace(out), "bootcmd_dhcp=") {
		t.Logf("%s: this build has no bootcmd_dhcp; running its equivalent", b.Name)
		distro = "dhcp ${scriptaddr} boot.scr.uimg; source ${scriptaddr}"
	}
	from := c2.Send(distro)
	echo := c2.WaitFor(from, 2*time.Minute, `the script's "pxeperf:" line`, func(s string) bool {
		return regexp.MustCompile(`(?m)^pxeperf: .*` + regexp.QuoteMeta(host)).MatchString(s)
	})
	c2.WaitFor(from, 2*time.Minute, `"Starting kernel"`, func(s string) bool { return strings.Contains(s, "Starting kernel") })
	if st := c2.WaitExit(time.Minute); st != ubootKernelStatus {
		c2.Fatalf("%s: QEMU exit status %d, want %d (the crafted kernel did not run)", distro, st, ubootKernelStatus)
	}
	t.Logf("%s: %s: %s", b.Name, distro, regexp.MustCompile(`(?m)^pxeperf: .*$`).FindString(echo))
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
func ubootCheckFetches(t *testing.T, log string, b uboot.Board, host, kernel string) {
	t.Helper()
	leases := logRecords(log, "lease")
	for _, l := range leases {
		if l["client_mac"] != b.MAC || l["host"] != host {
			t.Errorf("lease carries client_mac=%q host=%q, want %s %s", l["client_mac"], l["host"], b.MAC, host)
		}
	}
	if len(leases) == 0 {
		t.Errorf("pxeperf logged no lease for %s", b.MAC)
	} else {
		t.Logf("%s: pxeperf lease: arch=%s boot_file=%s", b.Name, leases[0]["arch"], leases[0]["boot_file"])
	}
	fetches := logRecords(log, "fetch")
	got := map[string]int{}
	kind := map[string]string{}
	for _, f := range fetches {
		if f["client_mac"] != b.MAC || f["host"] != host {
			t.Errorf("fetch of %s carries client_mac=%q host=%q, want %s %s", f["file"], f["client_mac"], f["host"], b.MAC, host)
		}
		if f["outcome"] == "ok" {
			name := strings.TrimPrefix(f["file"], "/")
			got[name]++
			kind[name] = f["kind"]
		}
	}
	for name, want := range map[string]string{
		ubootPXEConfig(b.MAC): "config", "boot.scr.uimg": "config",
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
	t.Logf("%s: pxeperf fetches (all with client_mac=%s host=%s): %s", b.Name, b.MAC, host, strings.Join(names, ", "))
}

// ubootPXEConfig is the first name U-Boot's `pxe get` asks for (without a
// pxeuuid): pxelinux.cfg/01-MAC with dashes.
func ubootPXEConfig(mac string) string {
	return "pxelinux.cfg/01-" + strings.ReplaceAll(mac, ":", "-")
}
