//go:build linux

package netlab

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// pingRTT pings the server from the client and returns the minimum and
// average RTT ping reports.
func pingRTT(t *testing.T, tb *Testbed) (minRTT, avg time.Duration) {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping is not installed")
	}
	out, err := tb.Command(context.Background(), Client, "ping", "-n", "-q", "-c", "20", "-i", "0.01", tb.ServerIP.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`= ([0-9.]+)/([0-9.]+)/`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no rtt line in ping's output:\n%s", out)
	}
	ms := func(b []byte) time.Duration {
		v, _ := strconv.ParseFloat(string(b), 64)
		return time.Duration(v * float64(time.Millisecond))
	}
	t.Logf("%s", out)
	return ms(m[1]), ms(m[2])
}

// TestDelayLine: ping sees the round trip grow by twice the one-way delay
// set, and the line forwards ARP and ICMP both ways.
func TestDelayLine(t *testing.T) {
	tb := newTB(t, Options{DelayLine: true, DelayVia: DelayOwnLine})
	if via := tb.DelayVia(); via != DelayOwnLine {
		t.Fatalf("DelayVia %q, want %q", via, DelayOwnLine)
	}
	base, _ := pingRTT(t, tb)
	for _, d := range []time.Duration{500 * time.Microsecond, 5 * time.Millisecond} {
		if err := tb.SetDelay(d); err != nil {
			t.Fatal(err)
		}
		minRTT, avg := pingRTT(t, tb)
		// The minimum, not the average: a loaded host delays some pings
		// (the line's thread is real-time, ping is not).
		if minRTT < 2*d || minRTT > 2*d+base+time.Millisecond {
			t.Errorf("delay %v: ping min %v (avg %v), want %v .. %v", d, minRTT, avg, 2*d, 2*d+base+time.Millisecond)
		}
	}
	st := tb.DelayStats()
	if st.Frames[Server] == 0 || st.Frames[Client] == 0 {
		t.Errorf("stats %+v: want frames both ways", st)
	}
	if err := tb.SetDelay(-1); err == nil {
		t.Error("SetDelay(-1): no error")
	}
	plain := newTB(t, Options{})
	if err := plain.SetDelay(time.Millisecond); err == nil {
		t.Error("SetDelay without a delay line: no error")
	}
}

// TestDelayLineCeiling measures what TCP gets through the delay line with
// no rate limit (iperf3, 3 s each way), so a sweep at 1 Gbit/s knows the
// line is not its bottleneck:
//
//	PXEPERF_BENCH=1 go test -run DelayLineCeiling -v ./netlab
func TestDelayLineCeiling(t *testing.T) {
	// bench/peers.Require's gate, read here: bench/peers imports netlab,
	// so netlab's own tests cannot import it (knobs: bench/peers/doc.go).
	if os.Getenv("PXEPERF_BENCH") != "1" {
		t.Skip("set PXEPERF_BENCH=1 to measure the delay line's ceiling (iperf3)")
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed")
	}
	tb := newTB(t, Options{DelayLine: true})
	for _, d := range []time.Duration{0, 100 * time.Microsecond} {
		if err := tb.SetDelay(d); err != nil {
			t.Fatal(err)
		}
		for _, reverse := range []bool{false, true} {
			srv := tb.Command(context.Background(), Server, "iperf3", "-s", "-1")
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			args := []string{"-c", tb.ServerIP.String(), "-t", "3", "-f", "m"}
			if reverse {
				args = append(args, "-R")
			}
			out, err := tb.Command(context.Background(), Client, "iperf3", args...).CombinedOutput()
			_ = srv.Wait()
			if err != nil {
				t.Fatalf("iperf3: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`([0-9.]+) Mbits/sec.*receiver`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("no receiver line:\n%s", out)
			}
			t.Logf("delay %v reverse=%v: %s Mbit/s; line %+v", d, reverse, m[1], tb.DelayStats())
		}
	}
}
