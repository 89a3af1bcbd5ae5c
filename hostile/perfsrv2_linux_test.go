//go:build linux

package hostile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

// iperf2LabWith is newIperf2Lab with extra lines ("key: value") in its
// iperf2 section.
func iperf2LabWith(t *testing.T, extra ...string) *lab {
	t.Helper()
	nstest.RequireTool(t, "iperf")
	yaml := "iperf2:\n  enabled: true\n"
	for _, e := range extra {
		yaml += "  " + e + "\n"
	}
	return newLab(t, nstest.Options{}, yaml, nil,
		"--dhcp", "off", "--tftp-addr", "off", "--http-addr", "off", "--iperf2-addr", fmt.Sprintf(":%d", iperf2Port))
}

// iperf2Timed is one run of the real iperf 2 client and how long it took.
type iperf2Timed struct {
	args []string
	took time.Duration
	out  string
	err  error
}

// iperf2Runs runs the real iperf 2 client once per args, all at once, from
// the pair's client side.
func iperf2Runs(ctx context.Context, l *lab, args ...[]string) []*iperf2Timed {
	var wg sync.WaitGroup
	runs := make([]*iperf2Timed, len(args))
	for i, a := range args {
		runs[i] = &iperf2Timed{args: a}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := runs[i]
			start := time.Now()
			out, err := nstest.Command(ctx, l.P.Client, "iperf", append([]string{"-c", l.P.ServerIP.String(), "-p", fmt.Sprint(iperf2Port)}, a...)...).CombinedOutput()
			r.took, r.out, r.err = time.Since(start), string(out), err
		}()
	}
	wg.Wait()
	return runs
}

// TestIperf2EndlessTests (issue 27 row 18, iperf 2): with max_duration
// 3s, the real client's TCP tests that end by bytes (-n 100G, the board
// sending at 100 Mbit/s, hours of it; and -R, the server sending) stop at
// 3 s, the server logs why; a -t 3 test beside them ends as it should.
// Before, the board's leg read until max_duration + the 10 s set-up
// timeout: 13 s.
func TestIperf2EndlessTests(t *testing.T) {
	l := iperf2LabWith(t, "max_duration: 3s")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runs := iperf2Runs(ctx, l, []string{"-n", "100G", "-b", "100M"}, []string{"-n", "100G", "-b", "100M", "-R"}, []string{"-t", "3", "-b", "100M"})
	for _, r := range runs {
		what := "iperf " + strings.Join(r.args, " ")
		t.Logf("%s: %v, exit %v: %s", what, r.took.Round(100*time.Millisecond), r.err, nstest.Tail(r.out, 1))
		// 3 s of test, the 5 s a -t test's end may be late not reached.
		if r.took > 4500*time.Millisecond {
			t.Errorf("%s ran %v, max_duration 3s", what, r.took.Round(100*time.Millisecond))
		}
	}
	if n := strings.Count(l.S.Out.String(), "-n test stopped at 3s (iperf2.max_duration)"); n < 2 {
		t.Errorf("the server logged %d -n tests stopped at max_duration, want 2", n)
	}
}

// TestPerfsrvAcceptFailures (issue 27, perfsrv's accept loop): with the
// process at its descriptor limit, the iperf3 listener's accept fails
// (EMFILE) and is retried every 50 ms. Each failure is counted
// (pxeperf_refusals_total, reason "accept failed") and logged once a
// minute with the count so far, not 20 times a second.
func TestPerfsrvAcceptFailures(t *testing.T) {
	l := iperf3Lab(t)
	u, err := l.S.Usage()
	if err != nil {
		t.Fatal(err)
	}
	// Room for a dozen connections past what serve holds idle: the silent
	// flood's 32 pending handshakes (8 from each of 4 addresses) cannot fit.
	var lim unix.Rlimit
	if err := unix.Prlimit(l.S.PID(), unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(u.FDs) + 12
	if err := unix.Prlimit(l.S.PID(), unix.RLIMIT_NOFILE, &low, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	floodIperf3Silent(ctx, t, l)
	if err := unix.Prlimit(l.S.PID(), unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the last retries' log lines
	lines := strings.Count(l.S.Out.String(), "iperf3: accept failed")
	n, err := l.S.Metric("pxeperf_refusals_total", `proto="iperf3"`, `reason="accept failed"`)
	t.Logf("accept failures: %v counted, %d log lines (baseline %d fds, limit %d)", n, lines, u.FDs, u.FDs+12)
	if err != nil || n < 10 {
		t.Errorf("pxeperf_refusals_total of failed accepts: %v, %v; want the failures (every 50 ms at the limit) counted", n, err)
	}
	if lines != 1 {
		t.Errorf("%d log lines of failed accepts within 5 s, want 1 (once a minute)", lines)
	}
}
