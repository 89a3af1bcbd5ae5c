//go:build linux

package hostile

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// board is one real board's request, named for the log: served when fn
// returns nil within the 1 s the acceptance gives it.
type board struct {
	name string
	fn   func(ctx context.Context) error
}

// boardRounds runs every board in order (each within 1 s), then again
// every `every` after a round ends, until ctx ends; every 0 is one round.
// The first round runs even when ctx has ended: a siege always checks its
// boards at least once.
func boardRounds(ctx context.Context, t *testing.T, boards []board, every time.Duration) {
	t.Helper()
	for {
		for _, b := range boards {
			within(t, b.name, time.Second, b.fn)
		}
		if every == 0 || !pause(ctx, every) {
			return
		}
	}
}

// pause waits d, and reports false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// siegeOpts is one siege: a flood, the boards served meanwhile, and the
// bounds on what serve may hold. Zero bounds are not checked.
type siegeOpts struct {
	Flood flood
	// For is how long the flood may run; the siege ends then, or earlier
	// with UntilFlood (when the flood returns, its count spent) or
	// StopAfterBoards (once the boards are done: floods that hold their
	// connections until told).
	For             time.Duration
	UntilFlood      bool
	StopAfterBoards bool
	// Control runs the boards once before the flood and stops the test
	// unless they are served: on a quiet network they must be, or the
	// flood proves nothing.
	Control bool
	// The boards' first round starts Warm into the flood, once Ready (when
	// set) returned nil: Ready waits for the flood to be in place and may
	// measure it; its error fails the test and skips the boards. Every
	// repeats the round (0: once).
	Warm   time.Duration
	Ready  func() error
	Boards []board
	Every  time.Duration
	// Bound is the peak RSS, fds and threads polled every 100 ms;
	// MaxGoroutines the peak of go_goroutines polled as often (only when
	// it or MaxGrowth is set), MaxGrowth that peak over the count before
	// the flood, MaxGoroutinesAfter the count once the siege ended.
	Bound              nstest.Usage
	MaxGoroutines      int
	MaxGrowth          int
	MaxGoroutinesAfter int
	// MaxCPU is the CPU serve may use (user and system), in cores
	// averaged over For.
	MaxCPU float64
}

// sieged is what a siege saw of serve.
type sieged struct {
	Peak             nstest.Usage
	Goroutines       int // the most polled during the flood
	GoroutinesBefore int
	GoroutinesAfter  int
	CPU              time.Duration
	Took             time.Duration
}

// siege runs o.Flood against l while o.Boards are served and what serve
// holds is watched, fails t on each bound exceeded, and returns what it
// saw. It is the one runner of this package's tests; the soak runs the
// floods themselves side by side.
func siege(t *testing.T, l *lab, o siegeOpts) sieged {
	t.Helper()
	if o.Control {
		boardRounds(context.Background(), t, o.Boards, 0)
		if t.Failed() {
			t.Fatal("the boards are not served within 1 s even without a flood: the control failed")
		}
	}
	var r sieged
	g0, err := l.S.Goroutines()
	if err != nil && o.MaxGrowth > 0 {
		t.Fatalf("goroutines before the flood: %v", err)
	}
	r.GoroutinesBefore = g0
	cpu0 := cpuTime(t, l)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.For)
	defer cancel()
	flooded := make(chan struct{})
	go func() { defer close(flooded); o.Flood(ctx, t, l) }()
	watched := make(chan nstest.Usage, 1)
	go func() { watched <- l.S.Within(ctx, t, o.Bound) }()
	// The poll renders /metrics 10 times a second, CPU the flood's own
	// floods compete for: only a siege that bounds the peak pays for it.
	polled := make(chan int, 1)
	if o.MaxGoroutines > 0 || o.MaxGrowth > 0 {
		go func() { polled <- peakGoroutines(ctx, l) }()
	} else {
		polled <- -1
	}

	pause(ctx, o.Warm)
	ready := true
	if o.Ready != nil {
		if err := o.Ready(); err != nil {
			t.Errorf("the flood was not in place for the boards: %v", err)
			ready = false
		}
	}
	if ready {
		boardRounds(ctx, t, o.Boards, o.Every)
	}
	switch {
	case o.StopAfterBoards:
		cancel()
	case o.UntilFlood:
		<-flooded
		cancel()
	}
	<-ctx.Done()
	<-flooded
	r.Peak, r.Goroutines = <-watched, <-polled
	r.Took = time.Since(start)
	r.CPU = cpuTime(t, l) - cpu0
	gAfter, errAfter := l.S.Goroutines()
	r.GoroutinesAfter = gAfter

	most := "not polled"
	if r.Goroutines >= 0 {
		most = strconv.Itoa(r.Goroutines)
	}
	t.Logf("serve during the flood (%v): peak RSS %d MiB, %d fds, %d threads; goroutines %d before, %s at most, %d after; CPU %v (%.0f%% of a core over %v)",
		r.Took.Round(100*time.Millisecond), r.Peak.RSS>>20, r.Peak.FDs, r.Peak.Threads, g0, most, gAfter, r.CPU,
		r.CPU.Seconds()/o.For.Seconds()*100, o.For)
	if o.MaxGoroutines > 0 && r.Goroutines > o.MaxGoroutines {
		t.Errorf("serve ran %d goroutines during the flood, bound %d", r.Goroutines, o.MaxGoroutines)
	}
	if o.MaxGrowth > 0 && r.Goroutines > g0+o.MaxGrowth {
		t.Errorf("goroutines %d -> %d during the flood, want at most %d", g0, r.Goroutines, g0+o.MaxGrowth)
	}
	if o.MaxGoroutinesAfter > 0 && (errAfter != nil || gAfter > o.MaxGoroutinesAfter) {
		t.Errorf("%d goroutines after the flood (%v), want at most %d", gAfter, errAfter, o.MaxGoroutinesAfter)
	}
	if bound := time.Duration(o.MaxCPU * float64(o.For)); o.MaxCPU > 0 && r.CPU > bound {
		t.Errorf("serve used %v of CPU over the %v flood, bound %.2f of a core (%v)", r.CPU, o.For, o.MaxCPU, bound)
	}
	return r
}

// peakGoroutines polls go_goroutines every 100 ms until ctx ends and
// returns the most seen (a poll the admin listener cannot answer is
// skipped: the boards, not this poll, say whether serve answers).
func peakGoroutines(ctx context.Context, l *lab) int {
	most := 0
	for {
		if g, err := l.S.Goroutines(); err == nil {
			most = max(most, g)
		}
		if !pause(ctx, 100*time.Millisecond) {
			return most
		}
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

// floods runs fls side by side as one flood, until each has returned.
func floods(fls ...flood) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		done := make(chan struct{}, len(fls))
		for _, fl := range fls {
			go func() { defer func() { done <- struct{}{} }(); fl(ctx, t, l) }()
		}
		for range fls {
			<-done
		}
	}
}

// metric is one /metrics sum, 0 when absent; an admin listener that
// cannot answer fails t.
func metric(t *testing.T, l *lab, name string, match ...string) float64 {
	t.Helper()
	v, err := l.S.Metric(name, match...)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return max(v, 0)
}

// curl runs curl with args from the client namespace within ctx and
// returns its output; its error wraps curl's (exit codes: *exec.ExitError)
// and quotes the output's tail.
func (l *lab) curl(ctx context.Context, args ...string) (string, error) {
	out, err := nstest.Command(ctx, l.P.Client, "curl", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("curl %s: %w: %s", args[len(args)-1], err, nstest.Tail(string(out), 3))
	}
	return string(out), nil
}

// dialFrom dials TCP addr from the client namespace with d (its LocalAddr,
// when set, one of the client side's addresses).
func (l *lab) dialFrom(ctx context.Context, d net.Dialer, addr string) (c net.Conn, err error) {
	err = nstest.Do(l.P.Client, func() error {
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// smallRcvBuf is a dialer's Control giving the socket a 4 KiB receive
// buffer: a client that reads slowly or never makes the server queue what
// it sends on its side.
func smallRcvBuf(_, _ string, rc syscall.RawConn) error {
	return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
}

// addAddr puts a on the client side's interface, with the pair's prefix
// length: a source that answers ARP.
func addAddr(t *testing.T, l *lab, a netip.Addr) {
	t.Helper()
	nstest.Run(t, l.P.Client, "ip", "addr", "add", netip.PrefixFrom(a, l.P.Prefix.Bits()).String(), "dev", l.P.ClientIf)
}
