//go:build linux

package hostile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// iperf3Port is where the labs of this file run the iperf3 server.
const iperf3Port = 5201

// iperf3Lab is a lab with the iperf3 server on (DHCP off: not this file's
// concern), extra added to its iperf3 section (lines of "key: value"), and
// a 64 KiB file "probe" in the root for TFTP boards.
func iperf3Lab(t *testing.T, extra ...string) *lab {
	t.Helper()
	nstest.RequireTool(t, "iperf3", "curl")
	yaml := "dhcp:\n  mode: off\n" + yamlSection("iperf3", append([]string{"enabled: true", `listen: ":` + strconv.Itoa(iperf3Port) + `"`}, extra...)...)
	return newLab(t, nstest.Options{}, yaml, func(root string) {
		nstest.RandomFile(t, filepath.Join(root, "probe"), 64<<10, 27)
	})
}

// iperf3Addr is the server's iperf3 port.
func (l *lab) iperf3Addr() netip.AddrPort { return netip.AddrPortFrom(l.P.ServerIP, iperf3Port) }

// extraAddrs gives the client side n more addresses of the pair's subnet
// (floods come from them, so the board's own address keeps its per-client
// caps), skipping those an earlier call gave: floods run side by side in
// the soak.
func extraAddrs(t *testing.T, l *lab, n int) []netip.Addr {
	t.Helper()
	extraMu.Lock()
	defer extraMu.Unlock()
	held := nstest.Run(t, l.P.Client, "ip", "-o", "addr", "show", "dev", l.P.ClientIf)
	var as []netip.Addr
	for _, a := range l.P.Unanswered(n + 64) {
		if len(as) < n && !strings.Contains(held, " "+a.String()+"/") {
			as = append(as, a)
		}
	}
	if len(as) < n {
		t.Fatalf("only %d free addresses in %s", len(as), l.P.Prefix)
	}
	for _, a := range as {
		addAddr(t, l, a)
	}
	return as
}

// extraMu makes extraAddrs' look and add one step.
var extraMu sync.Mutex

// boardIperf3 is a real board's iperf3 test of 1 MiB from the pair's
// client address; extra adds client flags.
func boardIperf3(l *lab, extra ...string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		args := append([]string{"-c", l.P.ServerIP.String(), "-p", strconv.Itoa(iperf3Port), "-n", "1M"}, extra...)
		if out, err := runIperf3(ctx, l.P.Client, args...); err != nil {
			return fmt.Errorf("%v: %s", err, nstest.Tail(out, 3))
		}
		return nil
	}
}

// boardTFTP is a real board's TFTP fetch of the lab's probe file.
func boardTFTP(l *lab) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := l.curl(ctx, "-sS", "-o", "/dev/null", "tftp://"+l.P.ServerIP.String()+"/probe")
		return err
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
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: a.AsSlice()}, Timeout: 500 * time.Millisecond}
			for i := 0; i < total/len(addrs) && ctx.Err() == nil; i++ {
				c, err := l.dialFrom(ctx, d, l.iperf3Addr().String())
				if err != nil {
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
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
	siege(t, l, siegeOpts{Flood: floodIperf3Silent, For: 5 * time.Second, Warm: 2 * time.Second,
		Boards: []board{{"a board's iperf3 -n 1M", boardIperf3(l)}, {"a board's TFTP fetch", boardTFTP(l)}},
		Bound:  nstest.Usage{FDs: 200, RSS: 96 << 20}, MaxGoroutines: 200})
	if !strings.Contains(l.S.Out.String(), "too many connections before their cookie") {
		t.Errorf("no refusal of connections over the handshake budget logged")
	}
	n, err := l.S.Metric("pxeperf_refusals_total", `proto="iperf3"`, `reason="too many connections before their cookie"`)
	if err != nil || n <= 0 {
		t.Errorf("pxeperf_refusals_total of the handshake budget: %v, %v; want the refusals counted", n, err)
	}
	t.Logf("connections reset over the handshake budget: %v", n)
}

// rawIperf3 is a hand-made iperf3 client: it speaks the control protocol
// (cookie, parameters, streams) as 3.12 does, then reads nothing.
type rawIperf3 struct {
	conns []net.Conn // control first
}

// errIperf3Refused is a test the server refused (ACCESS_DENIED or
// SERVER_ERROR); the message has the i_errno.
type errIperf3Refused struct{ msg string }

func (e errIperf3Refused) Error() string { return e.msg }

// startRawIperf3 sets up one test from address from (in ns) with the
// parameter JSON params and nstreams streams (UDP when params say "udp",
// else TCP with a 4 KiB receive buffer), and returns once the server sent
// TEST_RUNNING.
func startRawIperf3(ctx context.Context, ns string, from netip.Addr, srv netip.AddrPort, params string, nstreams int) (*rawIperf3, error) {
	r := &rawIperf3{}
	err := nstest.Do(ns, func() error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}, Timeout: 2 * time.Second, Control: smallRcvBuf}
		var ck [37]byte
		const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
		seed := uint64(time.Now().UnixNano())
		for i := range 36 {
			seed = seed*6364136223846793005 + 1442695040888963407
			ck[i] = alphabet[seed>>59]
		}
		dial := func() (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", srv.String())
			if err != nil {
				return nil, err
			}
			r.conns = append(r.conns, c)
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			_, err = c.Write(ck[:])
			return c, err
		}
		ctl, err := dial()
		if err != nil {
			return err
		}
		state := func(want int8) error {
			var b [9]byte
			if _, err := io.ReadFull(ctl, b[:1]); err != nil {
				return err
			}
			switch int8(b[0]) {
			case want:
				return nil
			case -2:
				_, _ = io.ReadFull(ctl, b[1:9])
				return errIperf3Refused{fmt.Sprintf("server error: i_errno %d, errno %d", binary.BigEndian.Uint32(b[1:]), binary.BigEndian.Uint32(b[5:]))}
			case -1:
				return errIperf3Refused{"access denied"}
			}
			return fmt.Errorf("state %d, want %d", int8(b[0]), want)
		}
		if err := state(9); err != nil { // PARAM_EXCHANGE
			return err
		}
		msg := binary.BigEndian.AppendUint32(nil, uint32(len(params)))
		if _, err := ctl.Write(append(msg, params...)); err != nil {
			return err
		}
		if err := state(10); err != nil { // CREATE_STREAMS
			return err
		}
		for range nstreams {
			if strings.Contains(params, `"udp"`) {
				if err := r.dialUDP(ctx, from, srv); err != nil {
					return err
				}
			} else if _, err := dial(); err != nil {
				return err
			}
		}
		if err := state(1); err != nil { // TEST_START
			return err
		}
		if err := state(2); err != nil { // TEST_RUNNING
			return err
		}
		for _, c := range r.conns {
			_ = c.SetDeadline(time.Time{})
		}
		return nil
	})
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// dialUDP opens a UDP stream as iperf3 does: a 4-byte hello to the
// server's port, answered from the stream's own socket.
func (r *rawIperf3) dialUDP(ctx context.Context, from netip.Addr, srv netip.AddrPort) error {
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: from.AsSlice()}}
	c, err := d.DialContext(ctx, "udp", srv.String())
	if err != nil {
		return err
	}
	r.conns = append(r.conns, c)
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write(binary.LittleEndian.AppendUint32(nil, 0x36373839)); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, 4))
	return err
}

func (r *rawIperf3) Close() {
	for _, c := range r.conns {
		c.Close()
	}
}

// floodIperf3Unread (issue 27 row 5) runs, from two addresses of the
// client side, four -R -P 16 TCP tests each whose streams it never reads:
// from one with -l 16M (over iperf3's own 1 MiB: refused now), from the
// other with -l 1M; it holds them until ctx ends.
func floodIperf3Unread(ctx context.Context, t *testing.T, l *lab) {
	addrs := extraAddrs(t, l, 2)
	var tests []*rawIperf3
	refused := 0
	for i, a := range addrs {
		blk := []int{16 << 20, 1 << 20}[i]
		for range 4 {
			params := fmt.Sprintf(`{"tcp":true,"omit":0,"time":10,"parallel":16,"reverse":true,"len":%d,"pacing_timer":1000,"client_version":"3.12"}`, blk)
			r, err := startRawIperf3(ctx, l.P.Client, a, l.iperf3Addr(), params, 16)
			var ref errIperf3Refused
			switch {
			case errors.As(err, &ref):
				refused++
			case err != nil:
				t.Errorf("unread flood: -l %d test not set up: %v", blk, err)
			default:
				tests = append(tests, r)
			}
		}
	}
	t.Logf("unread flood: %d tests running, %d refused", len(tests), refused)
	<-ctx.Done()
	for _, r := range tests {
		r.Close()
	}
}

// TestIperf3UnreadStreams (row 5): eight -R -P 16 tests whose streams are
// never read (four asking -l 16M, four -l 1M, from two addresses). Every
// sending stream writes from one shared read-only 1 MiB buffer and -l is
// capped at iperf3's own 1 MiB, so RSS does not grow with streams x -l,
// and a board's iperf3 test is served within 1 s.
func TestIperf3UnreadStreams(t *testing.T) {
	l := iperf3Lab(t)
	siege(t, l, siegeOpts{Flood: floodIperf3Unread, For: 6 * time.Second, Warm: 3 * time.Second,
		Boards: []board{{"a board's iperf3 -n 1M -R", boardIperf3(l, "-R")}},
		Bound:  nstest.Usage{FDs: 300, RSS: 64 << 20}, MaxGoroutines: 400})
}

// runIperf3 runs the real iperf3 client in ns until it exits or ctx ends,
// and returns its output.
func runIperf3(ctx context.Context, ns string, args ...string) (string, error) {
	out, err := nstest.Command(ctx, ns, "iperf3", args...).CombinedOutput()
	return string(out), err
}

// floodIperf3TinyUDP (issue 27 row 6) runs the real iperf3 client with
// tiny datagrams from three addresses of the client side, again as soon
// as one ends (20 runs each at most): the server sending (-u -R -l 64 -b
// 600M -P 16, and with -l 128, the smallest datagram allowed), and the
// board sending without a rate (-u -b 0 -l 64).
func floodIperf3TinyUDP(ctx context.Context, t *testing.T, l *lab) {
	addrs := extraAddrs(t, l, 3)
	srv := l.P.ServerIP.String()
	port := strconv.Itoa(iperf3Port)
	runs := [][]string{
		{"-c", srv, "-p", port, "-B", addrs[0].String(), "-u", "-R", "-l", "64", "-b", "600M", "-P", "16", "-t", "4"},
		{"-c", srv, "-p", port, "-B", addrs[1].String(), "-u", "-b", "0", "-l", "64", "-t", "4"},
		{"-c", srv, "-p", port, "-B", addrs[2].String(), "-u", "-R", "-l", "128", "-b", "600M", "-P", "16", "-t", "4"},
	}
	var wg sync.WaitGroup
	for _, args := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last string
			n := 0
			for ; n < 20 && ctx.Err() == nil; n++ {
				last, _ = runIperf3(ctx, l.P.Client, args...)
				select { // a refused run ends at once: do not spin
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
			t.Logf("tiny UDP flood iperf3 %s: %d runs, last said: %s", strings.Join(args[4:], " "), n, nstest.Tail(last, 1))
		}()
	}
	wg.Wait()
}

// cpuSiegeOpts is the siege of a UDP flood of row 6: 5 s while a
// board's TFTP fetch and iperf3 test are served within 1 s, serve spending
// at most a quarter of a core (user and system) over it and holding at
// most 200 fds, 96 MiB and 300 goroutines.
func cpuSiegeOpts(l *lab, fl flood) siegeOpts {
	return siegeOpts{Flood: fl, For: 5 * time.Second, Warm: 2 * time.Second,
		Boards: []board{{"a board's TFTP fetch", boardTFTP(l)}, {"a board's iperf3 -n 1M", boardIperf3(l)}},
		Bound:  nstest.Usage{FDs: 200, RSS: 96 << 20}, MaxGoroutines: 300, MaxCPU: 0.25}
}

// TestIperf3TinyUDP (row 6): iperf3 UDP tests of 64-byte datagrams, the
// server sending 16 x 600 Mbit/s and the board sending without a rate.
// A UDP test asks at least min_udp_len (128) bytes a datagram and at most
// max_pps (100000) datagrams/s, all of them max_pps_total (200000), so
// these are refused: the server spends at most a quarter of a core over
// the flood, and a board's TFTP fetch and iperf3 test are served within
// 1 s.
func TestIperf3TinyUDP(t *testing.T) {
	l := iperf3Lab(t)
	siege(t, l, cpuSiegeOpts(l, floodIperf3TinyUDP))
}

// endlessRun is one client run (iperf3, iperf 2) and how it ended.
type endlessRun struct {
	args []string
	took time.Duration
	out  string
	err  error
}

// iperf3Runs runs the real iperf3 client once per args, all at once, from
// address from of the client side, and returns how each ended.
func iperf3Runs(ctx context.Context, l *lab, from netip.Addr, args ...[]string) []*endlessRun {
	return clientRuns(ctx, l, "iperf3", []string{"-c", l.P.ServerIP.String(), "-p", strconv.Itoa(iperf3Port), "-B", from.String()}, args...)
}

// clientRuns runs client (iperf3, iperf) from the client side once per
// args, each after base, all at once, and returns how each ended.
func clientRuns(ctx context.Context, l *lab, client string, base []string, args ...[]string) []*endlessRun {
	var wg sync.WaitGroup
	runs := make([]*endlessRun, len(args))
	for i, a := range args {
		r := &endlessRun{args: a}
		runs[i] = r
		wg.Go(func() {
			start := time.Now()
			out, err := nstest.Command(ctx, l.P.Client, client, append(slices.Clone(base), a...)...).CombinedOutput()
			r.took, r.out, r.err = time.Since(start), string(out), err
		})
	}
	wg.Wait()
	return runs
}

// endlessArgs are tests that do not end by time: -n 100G with the server
// sending, -k 1G with the board sending, at 100 Mbit/s (hours of either;
// the cap, not the CPU, is what they test).
var endlessArgs = [][]string{{"-n", "100G", "-R", "-b", "100M"}, {"-k", "1G", "-b", "100M"}}

// floodIperf3Endless (issue 27 row 18) runs, from one address of the
// client side, tests that do not end by time (endlessArgs), again as they
// end (5 rounds at most). The server stops them at iperf3.max_duration.
func floodIperf3Endless(ctx context.Context, t *testing.T, l *lab) {
	from := extraAddrs(t, l, 1)[0]
	for n := 0; n < 5 && ctx.Err() == nil; n++ {
		for _, r := range iperf3Runs(ctx, l, from, endlessArgs...) {
			t.Logf("endless flood iperf3 %s: %v, %s", strings.Join(r.args, " "), r.took.Round(100*time.Millisecond), nstest.Tail(r.out, 1))
		}
	}
}

// TestIperf3EndlessTests (row 18): with max_duration 3s, tests ended by
// bytes (-n 100G -R) or blocks (-k 1G), at 100 Mbit/s, stop at 3 s: the board's client
// says the server terminated it, the server logs why; a -t 3 test beside
// them still ends ok, and a board's iperf3 -n 1M is served within 1 s while
// floodIperf3Endless runs from another address.
func TestIperf3EndlessTests(t *testing.T) {
	l := iperf3Lab(t, "max_duration: 3s")
	from := extraAddrs(t, l, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var runs []*endlessRun
	done := make(chan struct{})
	go func() {
		defer close(done)
		runs = iperf3Runs(ctx, l, from, append(endlessArgs, []string{"-t", "3"})...)
	}()
	siege(t, l, siegeOpts{Flood: floodIperf3Endless, For: 6 * time.Second, Warm: 1500 * time.Millisecond,
		Boards: []board{{"a board's iperf3 -n 1M", boardIperf3(l)}},
		Bound:  nstest.Usage{FDs: 200, RSS: 96 << 20}, MaxGoroutines: 300})
	<-done
	for _, r := range runs {
		what := "iperf3 " + strings.Join(r.args, " ")
		t.Logf("%s: %v, exit %v: %s", what, r.took.Round(100*time.Millisecond), r.err, nstest.Tail(r.out, 1))
		// 3 s of test, the set-up and the result exchange.
		if r.took > 5*time.Second {
			t.Errorf("%s ran %v, max_duration 3s", what, r.took.Round(100*time.Millisecond))
		}
		endless := r.args[0] != "-t"
		if endless && !strings.Contains(r.out, "the server has terminated") {
			t.Errorf("%s: the client was not told the server stopped it", what)
		}
		if !endless && r.err != nil {
			t.Errorf("%s within max_duration failed: %v", what, r.err)
		}
	}
	if n := strings.Count(l.S.Out.String(), "stopped at 3s (iperf3.max_duration)"); n < 2 {
		t.Errorf("the server logged %d -n/-k tests stopped at max_duration, want 2 or more", n)
	}
}

// TestIperf3Congestion (row 18): iperf3 -C asks for a TCP congestion
// control. serve has CAP_NET_ADMIN, with which any algorithm the kernel
// has can be set (and its module loaded); a board gets only those in
// net.ipv4.tcp_allowed_congestion_control, else iperf3's "unable to set
// TCP_CONGESTION".
func TestIperf3Congestion(t *testing.T) {
	read := func(name string) []string {
		b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
		if err != nil {
			t.Skipf("cannot read %s: %v", name, err)
		}
		return strings.Fields(string(b))
	}
	allowed := read("tcp_allowed_congestion_control")
	var other string
	for _, a := range read("tcp_available_congestion_control") {
		if !slices.Contains(allowed, a) {
			other = a
		}
	}
	if other == "" || len(allowed) == 0 {
		t.Skipf("every available congestion control is allowed (%v): nothing to refuse", allowed)
	}
	l := iperf3Lab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := boardIperf3(l, "-C", allowed[0])(ctx); err != nil {
		t.Errorf("iperf3 -C %s, allowed: %v", allowed[0], err)
	}
	out, err := runIperf3(ctx, l.P.Client, "-c", l.P.ServerIP.String(), "-p", strconv.Itoa(iperf3Port), "-n", "1M", "-C", other)
	t.Logf("iperf3 -C %s (allowed: %v): exit %v: %s", other, allowed, err, nstest.Tail(out, 1))
	if err == nil || !strings.Contains(out, "TCP_CONGESTION") {
		t.Errorf("iperf3 -C %s, not in net.ipv4.tcp_allowed_congestion_control, was not refused with iperf3's TCP_CONGESTION error", other)
	}
}

// floodIperf3LyingUDP (issue 27 row 6, a client that lies): a hand-made
// client asks for a UDP test of the default 1 Mbit/s (90 datagrams/s of
// 1448 bytes), then sends 16-byte datagrams on its stream as fast as it
// can until ctx ends.
func floodIperf3LyingUDP(ctx context.Context, t *testing.T, l *lab) {
	from := extraAddrs(t, l, 1)[0]
	params := `{"udp":true,"omit":0,"time":10,"parallel":1,"len":1448,"bandwidth":1048576,"pacing_timer":1000,"client_version":"3.12"}`
	r, err := startRawIperf3(ctx, l.P.Client, from, l.iperf3Addr(), params, 1)
	if err != nil {
		t.Errorf("lying UDP flood: test not set up: %v", err)
		return
	}
	defer r.Close()
	c := r.conns[1]
	var b [16]byte
	sent := 0
	for seq := uint32(1); ctx.Err() == nil; seq++ {
		now := time.Now()
		binary.BigEndian.PutUint32(b[0:], uint32(now.Unix()))
		binary.BigEndian.PutUint32(b[4:], uint32(now.Nanosecond()/1000))
		binary.BigEndian.PutUint32(b[8:], seq)
		if _, err := c.Write(b[:]); err == nil {
			sent++
		}
	}
	t.Logf("lying UDP flood: %d datagrams sent on a test of 90/s", sent)
}

// TestIperf3LyingUDP (row 6): a UDP test that asked 90 datagrams/s gets
// hundreds of thousands a second. Its stream reads at most twice what the
// test asked (at least 1000/s) and leaves the rest to the kernel's drops,
// so the server spends at most a quarter of a core on it, and a board's
// TFTP fetch and iperf3 test are served within 1 s.
func TestIperf3LyingUDP(t *testing.T) {
	l := iperf3Lab(t)
	siege(t, l, cpuSiegeOpts(l, floodIperf3LyingUDP))
}
