//go:build linux

package hostile

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

// iperf3Port is where the labs of this file run the iperf3 server.
const iperf3Port = 5201

// iperf3Lab is a lab with the iperf3 server on (DHCP off: not this file's
// concern), extra added to its iperf3 section (lines of "key: value"), and
// a 64 KiB file "probe" in the root for TFTP boards.
func iperf3Lab(t *testing.T, extra ...string) *lab {
	t.Helper()
	nstest.RequireTool(t, "iperf3", "curl")
	yaml := "dhcp:\n  mode: off\niperf3:\n  enabled: true\n  listen: \":" + strconv.Itoa(iperf3Port) + "\"\n"
	for _, e := range extra {
		yaml += "  " + e + "\n"
	}
	return newLab(t, nstest.Options{}, yaml, func(root string) {
		nstest.RandomFile(t, filepath.Join(root, "probe"), 64<<10, 27)
	})
}

// iperf3Addr is the server's iperf3 port.
func (l *lab) iperf3Addr() netip.AddrPort { return netip.AddrPortFrom(l.P.ServerIP, iperf3Port) }

// extraAddrs gives the client side n more addresses of the pair's subnet
// (floods come from them, so the board's own address keeps its per-client
// caps).
func extraAddrs(t *testing.T, l *lab, n int) []netip.Addr {
	t.Helper()
	as := l.P.Unanswered(n)
	if len(as) < n {
		t.Fatalf("only %d free addresses in %s", len(as), l.P.Prefix)
	}
	for _, a := range as {
		nstest.Run(t, l.P.Client, "ip", "addr", "add", a.String()+"/"+strconv.Itoa(l.P.Prefix.Bits()), "dev", l.P.ClientIf)
	}
	return as
}

// boardIperf3 is a real board's iperf3 test of 1 MiB from the pair's
// client address; extra adds client flags.
func boardIperf3(l *lab, extra ...string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		args := append([]string{"iperf3", "-c", l.P.ServerIP.String(), "-p", strconv.Itoa(iperf3Port), "-n", "1M"}, extra...)
		out, err := nstest.Command(ctx, l.P.Client, args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, nstest.Tail(string(out), 3))
		}
		return nil
	}
}

// boardTFTP is a real board's TFTP fetch of the lab's probe file.
func boardTFTP(l *lab) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		out, err := nstest.Command(ctx, l.P.Client, "curl", "-sS", "-o", "/dev/null",
			"tftp://"+l.P.ServerIP.String()+"/probe").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, nstest.Tail(string(out), 3))
		}
		return nil
	}
}

// limitFDs lowers the serving process's descriptor limit to n, so a
// flood bounded to a few thousand connections reaches it as 20k did the
// default 20000 in the issue.
func limitFDs(t *testing.T, l *lab, n uint64) {
	t.Helper()
	if err := unix.Prlimit(l.S.PID(), unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
}

// cpuTime is the serving process's user and system CPU so far.
func cpuTime(t *testing.T, l *lab) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", l.S.PID()))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces): state is 3,
	// utime 14, stime 15 (proc(5)), in clock ticks (100 per second).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// siege runs fl for d while boards are served, each within 1 s once the
// flood has run warm; it fails t when the process holds more than max
// (RSS, fds) or maxG goroutines at any poll, and returns the peaks.
func siege(t *testing.T, l *lab, fl flood, d, warm time.Duration, max nstest.Usage, maxG int, boards map[string]func(context.Context) error) (nstest.Usage, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); fl(ctx, t, l) }()
	var peak nstest.Usage
	go func() { defer wg.Done(); peak = l.S.Within(ctx, t, max) }()
	peakG := 0
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if g, err := l.S.Goroutines(); err == nil && g > peakG {
				peakG = g
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	select {
	case <-time.After(warm):
	case <-ctx.Done():
	}
	for what, fn := range boards {
		within(t, what, time.Second, fn)
	}
	wg.Wait()
	if maxG > 0 && peakG > maxG {
		t.Errorf("serve ran %d goroutines during the flood, bound %d", peakG, maxG)
	}
	t.Logf("peaks during the flood: RSS %d MiB, %d fds, %d threads, %d goroutines", peak.RSS>>20, peak.FDs, peak.Threads, peakG)
	return peak, peakG
}

// floodIperf3Silent (issue 27 row 4) connects to the iperf3 port from four
// addresses of the client side, 3000 connections in all, and never sends
// a cookie; it holds what it opened until ctx ends.
func floodIperf3Silent(ctx context.Context, t *testing.T, l *lab) {
	addrs := extraAddrs(t, l, 4)
	const total = 3000
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = nstest.Do(l.P.Client, func() error {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: a.AsSlice()}, Timeout: 500 * time.Millisecond}
				for i := 0; i < total/len(addrs) && ctx.Err() == nil; i++ {
					c, err := d.DialContext(ctx, "tcp", l.iperf3Addr().String())
					if err != nil {
						continue
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
				return nil
			})
		}()
	}
	wg.Wait()
	<-ctx.Done()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("silent flood: %d connections opened", len(conns))
	for _, c := range conns {
		c.Close()
	}
}

// TestIperf3SilentConnections (row 4): 3000 connections from four
// addresses that never send iperf3's cookie, against a process limited to
// 1024 descriptors. Each holds a handshake slot (8 per address, 64 in all,
// 3 s), so the process stays far from its limit and a board's iperf3 test
// and TFTP fetch are served within 1 s.
func TestIperf3SilentConnections(t *testing.T) {
	l := iperf3Lab(t)
	limitFDs(t, l, 1024)
	siege(t, l, floodIperf3Silent, 5*time.Second, 2*time.Second, nstest.Usage{FDs: 200, RSS: 96 << 20}, 200,
		map[string]func(context.Context) error{"a board's iperf3 -n 1M": boardIperf3(l), "a board's TFTP fetch": boardTFTP(l)})
	if !strings.Contains(l.S.Out.String(), "too many connections before their cookie") {
		t.Errorf("no refusal of connections over the handshake budget logged")
	}
}
