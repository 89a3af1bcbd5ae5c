//go:build linux

package peers

import (
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
)

// UBootLab is a U-Boot board under QEMU (TCG; internal/testkit/uboot) fetching one
// file by lock-step TFTP from pxeperf and its peers. Debian's U-Boot builds
// have no tftpdstp, so every server listens on port 69 of an address of its
// own on the server's veth, and U-Boot fetches with `tftpboot ADDR IP:FILE`.
// The board sets its own address (no DHCP: the row measures TFTP only).
// Each round boots the board afresh and ends QEMU after its fetches: idle
// at its prompt, U-Boot polls the serial port and TCG spins a host core,
// which would weigh on the other rows of the run.
type UBootLab struct {
	Pair    *nstest.Pair
	Board   uboot.Board
	Servers map[string]*TFTPServer
	File    string
	Size    int64
	Blksize int
	tap     string
	ip      string // the board's address
	crc     uint32
	checked map[string]bool // servers whose load U-Boot's crc32 checked
}

// warmFile is fetched once from every server after each boot, before the
// timed fetches, so the first timed one does not pay for QEMU translating
// U-Boot's network code.
const warmFile = "warm.bin"

// ubootHosts is the last byte of each server's address on the U-Boot LAN
// (the board is .100, the client namespace's bridge .2).
var ubootHosts = map[string]byte{"pxeperf": 1, "atftpd": 11, "in.tftpd": 12}

// NewUBootLab makes a guest LAN for board (a name of uboot.Boards) and
// starts servers (of "pxeperf", "atftpd", "in.tftpd") serving a random
// file of mb MiB; Round boots the board.
func NewUBootLab(t testing.TB, bin, board string, servers []string, mb, blksize int) *UBootLab {
	t.Helper()
	b, ok := uboot.BoardNamed(board)
	if !ok {
		t.Fatalf("peers: no U-Boot board %q (want one of arm64, arm, x86_64, riscv64)", board)
	}
	b.Require(t)
	p, br, tap := nstest.GuestLAN(t)
	host := func(n byte) string {
		a := p.Prefix.Addr().As4()
		a[3] = n
		return netip.AddrFrom4(a).String()
	}
	// The bridge's address lets StartTFTPAt's probe (atftp) reach the servers.
	nstest.Run(t, p.Client, "ip", "addr", "add", host(2)+"/24", "dev", br)
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // in.tftpd drops to nobody
		t.Fatal(err)
	}
	l := &UBootLab{Pair: p, Board: b, Servers: map[string]*TFTPServer{}, File: "img.bin",
		Size: int64(mb) << 20, Blksize: blksize, tap: tap, ip: host(100), checked: map[string]bool{}}
	nstest.RandomFile(t, filepath.Join(root, warmFile), 1<<20, 8)
	path := filepath.Join(root, l.File)
	nstest.RandomFile(t, path, mb<<20, 7)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l.crc = crc32.ChecksumIEEE(data)
	for _, name := range servers {
		n, ok := ubootHosts[name]
		if !ok {
			t.Fatalf("peers: no U-Boot row server %q (want pxeperf, atftpd or in.tftpd)", name)
		}
		ip := host(n)
		if ip != p.ServerIP.String() {
			nstest.Run(t, p.Server, "ip", "addr", "add", ip+"/24", "dev", p.ServerIf)
		}
		l.Servers[name] = StartTFTPAt(t, p, ip, name, bin, root, "69", "")
	}
	return l
}

// UBootRun is one tftpboot's figures. Mbps is on the wire: the file's bits
// over the time from the board's RRQ to its ACK of the last block, as a
// capture on the server's veth stamped them (nstest.Wire), so the console
// and the board's NIC start and stop, the same for every server, do not
// pull the ratios towards 1. UBootMbps is the rate U-Boot itself printed
// (uboot.Fetch.RateMbps), WallMbps the command's wall time (typed to the
// next prompt, as a user sees it).
type UBootRun struct {
	TFTPRun
	UBootMbps, WallMbps float64
	Wire                nstest.WireSpan
}

// UBootPass is one pass of a Round: the tftpwindowsize U-Boot asks for
// (1: lock-step; U-Boot's virtio-net hangs from 32 on) and the servers it
// fetches the file from, in that order.
type UBootPass struct {
	Windowsize int
	Servers    []string
}

// Round boots the board, sets its address and tftpblocksize, fetches
// warmFile from every server of every pass, then for each pass sets
// tftpwindowsize and fetches the file once from each of its servers, each
// under a capture, and ends QEMU. It returns each pass's runs by server.
// The first fetch from each server is checked by U-Boot's own crc32
// (outside the timing).
func (l *UBootLab) Round(t testing.TB, passes ...UBootPass) []map[string]UBootRun {
	t.Helper()
	var srvLog func() string
	if s := l.Servers["pxeperf"]; s != nil {
		srvLog = s.Proc.Out.String
	}
	c := uboot.Boot(t, l.Board, "U-Boot "+l.Board.Name, l.Pair.Client, l.tap, srvLog)
	defer c.Stop()
	c.StopAutoboot(90 * time.Second)
	c.Env(l.Board, "setenv autoload no", "setenv ipaddr "+l.ip, "setenv netmask 255.255.255.0",
		fmt.Sprintf("setenv tftpblocksize %d", l.Blksize), "setenv tftpwindowsize 1")
	warm := map[string]bool{}
	for _, p := range passes {
		for _, name := range p.Servers {
			if !warm[name] {
				c.TFTPBoot(l.Servers[name].IP+":"+warmFile, 1<<20, time.Minute)
				warm[name] = true
			}
		}
	}
	var all []map[string]UBootRun
	for _, p := range passes {
		c.Run(fmt.Sprintf("setenv tftpwindowsize %d", max(p.Windowsize, 1)), 10*time.Second)
		all = append(all, l.pass(t, c, p.Servers))
	}
	return all
}

// pass fetches the file once from each server in names, as Round says.
func (l *UBootLab) pass(t testing.TB, c *uboot.Console, names []string) map[string]UBootRun {
	t.Helper()
	board := netip.MustParseAddr(l.ip)
	runs := map[string]UBootRun{}
	for _, name := range names {
		s := l.Servers[name]
		w := nstest.StartWire(t, l.Pair.Server, l.Pair.ServerIf)
		cpu0 := s.CPU(t)
		f := c.TFTPBoot(s.IP+":"+l.File, l.Size, 10*time.Minute)
		cpu := s.CPU(t) - cpu0
		if err := w.Stop(); err != nil {
			t.Fatalf("%s: capture of the board's fetch: %v", name, err)
		}
		span, err := w.TFTPOne(board, netip.AddrPortFrom(netip.MustParseAddr(s.IP), 69), l.File)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if span.Bytes < l.Size {
			t.Fatalf("%s: the capture saw %d bytes of DATA, the file has %d", name, span.Bytes, l.Size)
		}
		runs[name] = UBootRun{TFTPRun: TFTPRun{Mbps: span.Mbps(l.Size), CPUPerGiB: cpu / (float64(l.Size) / (1 << 30))},
			UBootMbps: f.RateMbps, WallMbps: float64(l.Size) * 8 / f.Wall.Seconds() / 1e6, Wire: span}
		if !l.checked[name] {
			c.CheckCRC32(l.crc, fmt.Sprintf("tftpboot from %s at blksize %d", name, l.Blksize))
			l.checked[name] = true
		}
	}
	return runs
}
