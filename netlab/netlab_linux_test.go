//go:build linux

package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/safchain/ethtool"

	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
	"github.com/pxeperf/pxeperf/netstate"
)

// newTB builds a testbed closed at the end of the test. One that asks for
// netem by name skips where the kernel has none (this project's CI kernel:
// the delay line serves there, and e2e's TestNetemInGuest runs those tests
// under Debian's kernel).
func newTB(t testing.TB, opt Options) *Testbed {
	t.Helper()
	testenv.RequireRoot(t)
	tb, err := New(opt)
	if errors.Is(err, errNoNetem) && opt.DelayVia == DelayNetem {
		t.Skipf("%v: the delay line serves this kernel; e2e TestNetemInGuest runs this test under Debian's kernel", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tb
}

func exists(name string) bool {
	_, err := os.Lstat(filepath.Join(netnsDir, name))
	return err == nil
}

func requireGone(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if exists(n) {
			t.Errorf("namespace %s still under %s", n, netnsDir)
		}
	}
}

func TestNewClose(t *testing.T) {
	reg := NewRegistry()
	tb := newTB(t, Options{Registry: reg})
	names := []string{tb.ServerNS, tb.ClientNS}
	for _, n := range names {
		if !exists(n) {
			t.Fatalf("namespace %s not under %s", n, netnsDir)
		}
		if _, ok := parseName(n); !ok {
			t.Errorf("name %s is not one ReapLeftovers recognises", n)
		}
	}
	if reg.Len() != 1 {
		t.Errorf("registry holds %d testbeds, want 1", reg.Len())
	}
	// No TCP metrics are kept, so no point seeds the next one's connections.
	for _, side := range []Side{Server, Client} {
		out, err := tb.Command(context.Background(), side, "cat", "/proc/sys/net/ipv4/tcp_no_metrics_save").Output()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			t.Errorf("side %v: tcp_no_metrics_save %q (%v), want 1", side, out, err)
		}
	}
	st, err := tb.State()
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range []SideState{st.Server, st.Client} {
		if ss.MTU != DefaultMTU || ss.Rate != (Rate{}) {
			t.Errorf("%s: MTU %d rate %+v, want %d and unlimited", ss.Iface, ss.MTU, ss.Rate, DefaultMTU)
		}
	}
	// The link carries traffic between the two addresses.
	if _, err := tcpThroughput(tb, Client, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, names...)
	if reg.Len() != 0 {
		t.Errorf("registry holds %d testbeds after Close, want 0", reg.Len())
	}
	if err := tb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := tb.Run(Server, func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	if _, err := tb.SetRate(Server, 1e8); !errors.Is(err, ErrClosed) {
		t.Errorf("SetRate after Close: %v, want ErrClosed", err)
	}
}

// A panic inside Run reaches the caller, with the thread back in its own
// namespace, and the deferred Close still removes everything.
func TestPanicLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	var names []string
	got := func() (v any) {
		defer func() { v = recover() }()
		tb, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		names = []string{tb.ServerNS, tb.ClientNS}
		_ = tb.Run(Client, func() error { panic("boom") })
		return nil
	}()
	if got != "boom" {
		t.Fatalf("recovered %v, want the panic from Run", got)
	}
	requireGone(t, names...)
}

func TestRegistryCloseAll(t *testing.T) {
	testenv.RequireRoot(t)
	reg := NewRegistry()
	var names []string
	for range 2 {
		tb, err := New(Options{Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tb.Close() })
		names = append(names, tb.ServerNS, tb.ClientNS)
	}
	if err := reg.CloseAll(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, names...)
	if reg.Len() != 0 {
		t.Errorf("registry holds %d after CloseAll", reg.Len())
	}
}

func TestReapLeftovers(t *testing.T) {
	testenv.RequireRoot(t)
	// A pid that existed and is gone: a testbed "left by a crash".
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	crashed, err := newTestbed(Options{}, dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { crashed.Close() })
	// A process still running in it, as an iperf3 would be.
	sleeper := crashed.Command(context.Background(), Server, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleeper.Wait() }()
	live := newTB(t, Options{})

	removed, err := ReapLeftovers(nil)
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, n := range removed {
		if n == crashed.ServerNS || n == crashed.ClientNS || n == live.ServerNS || n == live.ClientNS {
			ours = append(ours, n)
		}
	}
	if diff := cmp.Diff([]string{crashed.ClientNS, crashed.ServerNS}, ours); diff != "" {
		t.Errorf("swept (-want +got):\n%s", diff)
	}
	requireGone(t, crashed.ServerNS, crashed.ClientNS)
	if !exists(live.ServerNS) || !exists(live.ClientNS) {
		t.Errorf("ReapLeftovers removed the live testbed %s", live.ServerNS)
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Errorf("the process in the swept namespace exited cleanly, want killed")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the process in the swept namespace is still running")
	}
}

func TestMTU(t *testing.T) {
	tb := newTB(t, Options{})
	for _, mtu := range []int{9000, 1500, 576} {
		if err := tb.SetMTU(mtu); err != nil {
			t.Fatal(err)
		}
		st, err := tb.State()
		if err != nil {
			t.Fatal(err)
		}
		if st.Server.MTU != mtu || st.Client.MTU != mtu {
			t.Errorf("MTU %d/%d read back, want %d", st.Server.MTU, st.Client.MTU, mtu)
		}
		if _, err := tcpThroughput(tb, Client, 100*time.Millisecond); err != nil {
			t.Fatalf("MTU %d: %v", mtu, err)
		}
	}
	if err := tb.SetMTU(67); err == nil {
		t.Errorf("SetMTU(67) succeeded")
	}
	tb9k := newTB(t, Options{MTU: 9000})
	st, err := tb9k.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.Server.MTU != 9000 || st.Client.MTU != 9000 {
		t.Errorf("Options.MTU 9000: read back %d/%d", st.Server.MTU, st.Client.MTU)
	}
}

func TestOffloads(t *testing.T) {
	tb := newTB(t, Options{})
	// offs picks the offload fields of a state for comparison.
	type offs struct{ Rx, Tx, TSO, GSO, GRO string }
	pick := func(s netstate.State) offs { return offs{s.RxCsum, s.TxCsum, s.TSO, s.GSO, s.GRO} }
	// Steps run in order on the client end; each reads back the active state.
	steps := []struct {
		name       string
		ask        Offloads
		want       offs
		notApplied []string
	}{
		{"rx off", Offloads{RxCsum: Off()}, offs{"off", "on", "on", "on", "off"}, nil},
		{"tx off drops tso", Offloads{TxCsum: Off()}, offs{"off", "off", "off", "on", "off"}, nil},
		{"tso on needs tx", Offloads{TSO: On()}, offs{"off", "off", "off", "on", "off"}, []string{"tso asked on, active off"}},
		{"tx on brings tso back", Offloads{TxCsum: On()}, offs{"off", "on", "on", "on", "off"}, nil},
		{"gro on gso off", Offloads{GRO: On(), GSO: Off()}, offs{"off", "on", "on", "off", "on"}, nil},
		{"all off", AllOffloads(false), offs{"off", "off", "off", "off", "off"}, nil},
		{"all on", AllOffloads(true), offs{"on", "on", "on", "on", "on"}, nil},
	}
	for _, step := range steps {
		st, err := tb.SetOffloads(Client, step.ask)
		var na *NotAppliedError
		var got []string
		if errors.As(err, &na) {
			got = na.Features
		} else if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if diff := cmp.Diff(step.notApplied, got); diff != "" {
			t.Errorf("%s: not applied (-want +got):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(step.want, pick(st)); diff != "" {
			t.Errorf("%s: active (-want +got):\n%s", step.name, diff)
		}
		// State reads the same, and the server end is untouched.
		all, err := tb.State()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(step.want, pick(all.Client.State)); diff != "" {
			t.Errorf("%s: State().Client (-want +got):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(offs{"on", "on", "on", "on", "off"}, pick(all.Server.State)); diff != "" {
			t.Errorf("%s: server end changed (-want +got):\n%s", step.name, diff)
		}
		// Traffic still flows in each state.
		if _, err := tcpThroughput(tb, Client, 100*time.Millisecond); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
}

// ethtool -k's long names are not kernel feature names: safchain's Change
// rejects them, which is why Offloads maps to the kernel's.
func TestEthtoolLongNamesRejected(t *testing.T) {
	tb := newTB(t, Options{})
	err := tb.Run(Client, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		for _, long := range []string{"tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"} {
			if err := e.Change(tb.ClientIf, map[string]bool{long: false}); err == nil {
				return fmt.Errorf("Change accepted %q", long)
			}
		}
		names, err := e.FeatureNames(tb.ClientIf)
		if err != nil {
			return err
		}
		for _, kernel := range []string{"rx-checksum", "tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-generic-segmentation", "rx-gro"} {
			if _, ok := names[kernel]; !ok {
				return fmt.Errorf("veth has no feature %q", kernel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A functional check of the tbf: 100mbit shapes a TCP stream to about
// 100 Mbit/s (goodput ~96) while the same link unlimited runs far faster.
// The band is generous; it fails only when the qdisc does not shape.
func TestRate100mbit(t *testing.T) {
	tb := newTB(t, Options{})
	unlimited, err := tcpThroughput(tb, Client, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tb.SetRate(Client, 100_000_000)
	if err != nil {
		t.Fatal(err)
	}
	burst, limit, _ := tbfSize(100_000_000, DefaultMTU)
	if r.BitsPerSec != 100_000_000 || r.Limit != limit || r.Burst < burst-64 || r.Burst > burst {
		t.Errorf("read back %+v, want 100000000 bit/s, burst ~%d, limit %d", r, burst, limit)
	}
	st, err := tb.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.Client.Rate != r || st.Server.Rate != (Rate{}) {
		t.Errorf("State: client %+v server %+v, want %+v and unlimited", st.Client.Rate, st.Server.Rate, r)
	}
	shaped, err := tcpThroughput(tb, Client, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The reverse direction is not shaped.
	reverse, err := tcpThroughput(tb, Server, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unlimited %.0f Mbit/s, tbf 100mbit %.1f Mbit/s, reverse %.0f Mbit/s", unlimited, shaped, reverse)
	if shaped < 70 || shaped > 105 {
		t.Errorf("TCP under tbf 100mbit: %.1f Mbit/s, want 70..105", shaped)
	}
	if unlimited < 1.5*shaped || reverse < 1.5*shaped {
		t.Errorf("unlimited %.0f and reverse %.0f Mbit/s not clearly above the shaped %.1f", unlimited, reverse, shaped)
	}
	if err := tb.ClearRate(Client); err != nil {
		t.Fatal(err)
	}
	st, err = tb.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.Client.Rate != (Rate{}) {
		t.Errorf("after ClearRate: %+v", st.Client.Rate)
	}
	if _, err := tb.SetRate(Client, 1000); err == nil {
		t.Errorf("SetRate(1000 bit/s) succeeded")
	}
}

func TestCommand(t *testing.T) {
	testenv.RequireTool(t, "sleep")
	tb := newTB(t, Options{NoClientAddr: true})
	if tb.ClientIP.IsValid() {
		t.Errorf("NoClientAddr: ClientIP %s", tb.ClientIP)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tb.Command(ctx, Server, "ip", "-br", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -br addr: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), tb.ServerIf) || !strings.Contains(string(out), tb.ServerIP.String()+"/24") {
		t.Errorf("server namespace shows:\n%s\nwant %s with %s/24", out, tb.ServerIf, tb.ServerIP)
	}
	out, err = tb.Command(ctx, Client, "ip", "-br", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -br addr: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), tb.ClientIf) || strings.Contains(string(out), "10.252.") {
		t.Errorf("client namespace shows:\n%s\nwant %s, unaddressed", out, tb.ClientIf)
	}
	// Close kills what is still running inside.
	sleeper := tb.Command(ctx, Client, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleeper.Wait() }()
	if !testenv.WaitFor(5*time.Second, func() bool { return len(netnsPids(*tb.inode[Client])) > 0 }) {
		t.Fatal("sleep did not enter the client namespace")
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Errorf("sleep exited cleanly, want killed by Close")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("sleep still running after Close")
	}
}

// tcpThroughput streams from side `from` to the other for d (plus at most
// 5 s of grace) with Go sockets opened inside the namespaces, and returns
// the goodput the receiver saw in Mbit/s.
func tcpThroughput(tb *Testbed, from Side, d time.Duration) (float64, error) {
	to := Server
	if from == Server {
		to = Client
	}
	var ln net.Listener
	if err := tb.Run(to, func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(tb.IP(to).String(), "0"))
		return err
	}); err != nil {
		return 0, err
	}
	defer ln.Close()
	type result struct {
		bytes   int64
		elapsed time.Duration
		err     error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(d + 5*time.Second))
		buf := make([]byte, 256<<10)
		n, err := c.Read(buf)
		start := time.Now()
		total := int64(n)
		for err == nil {
			n, err = c.Read(buf)
			total += int64(n)
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		got <- result{total, time.Since(start), err}
	}()
	var conn net.Conn
	if err := tb.Run(from, func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		return 0, err
	}
	buf := make([]byte, 128<<10)
	_ = conn.SetWriteDeadline(time.Now().Add(d))
	var werr error
	for werr == nil {
		_, werr = conn.Write(buf)
	}
	if !errors.Is(werr, os.ErrDeadlineExceeded) {
		conn.Close()
		return 0, fmt.Errorf("writing: %w", werr)
	}
	conn.Close()
	r := <-got
	if r.err != nil {
		return 0, fmt.Errorf("reading: %w", r.err)
	}
	if r.elapsed <= 0 || r.bytes == 0 {
		return 0, fmt.Errorf("received %d bytes in %v", r.bytes, r.elapsed)
	}
	return float64(r.bytes) * 8 / r.elapsed.Seconds() / 1e6, nil
}

// freshRunEnv marks TestNetnsDirShared's own run inside its mount namespace.
const freshRunEnv = "PXEPERF_NETLAB_FRESH_RUN"

// TestNetnsDirShared makes a testbed where /run/netns is new, as on a fresh
// machine (its own run of the test binary, in a mount namespace of its own
// with a tmpfs on /run), then has `ip netns add` make a namespace after it
// (as another package's test did in CI), and wants the testbed to close and
// leave nothing. Before shareNetnsDir, Close failed "removing
// /run/netns/...: device or resource busy": ip's recursive self-bind of the
// directory had taken a copy of the testbed's mounts.
func TestNetnsDirShared(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (util-linux, iproute2)", tool)
		}
	}
	if os.Getenv(freshRunEnv) != "1" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--",
			"sh", "-c", `mount -t tmpfs pxl-run /run && exec "$0" -test.run '^TestNetnsDirShared$' -test.v`, os.Args[0])
		cmd.Env = append(os.Environ(), freshRunEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNetnsDirShared") {
			t.Fatalf("the run in a fresh /run: %v\n%s", err, out)
		}
		return
	}
	if _, err := os.Stat(netnsDir); err == nil {
		t.Fatalf("%s exists in the fresh /run", netnsDir)
	}
	tb, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := fmt.Sprintf("pxl-ipadd-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", other).CombinedOutput(); err != nil {
		tb.Close()
		t.Fatalf("ip netns add %s: %v: %s", other, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", other).Run() })
	if err := tb.Close(); err != nil {
		t.Fatalf("Close after an ip netns add: %v", err)
	}
	requireGone(t, tb.ServerNS, tb.ClientNS)
	if !exists(other) {
		t.Errorf("ip's namespace %s is gone too", other)
	}
}
