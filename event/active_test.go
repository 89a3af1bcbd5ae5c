package event

import (
	"math"
	"testing"
	"time"
)

// mbit is a progress's rate at now in Mbit/s.
func mbit(g *progress, now time.Duration) float64 { return g.rate(now) * 8 / 1e6 }

// feed adds a point every step from `from` to `to` (exclusive) at rate
// bytes/s, starting from bytes b, and returns the bytes reached.
func feed(g *progress, from, to, step time.Duration, rate float64, b int64) int64 {
	for at := from + step; at < to; at += step {
		b += int64(rate * step.Seconds())
		g.add(at, b)
	}
	return b
}

// TestRateSteady: a steady 4 Mbit/s board, as the HTTP sampler (every
// 100 ms) and TFTP (every ACKed window, here every 7 ms) report it, reads
// 4 Mbit/s at any moment past its first window, however the readers'
// times fall.
func TestRateSteady(t *testing.T) {
	for _, step := range []time.Duration{100 * time.Millisecond, 7 * time.Millisecond} {
		var g progress
		feed(&g, 0, 20*time.Second, step, 500e3, 0)
		for now := 3 * time.Second; now < 20*time.Second; now += 333 * time.Millisecond {
			if r := mbit(&g, now); math.Abs(r-4) > 0.2 {
				t.Errorf("step %v: %.2f Mbit/s at %v, want 4", step, r, now)
			}
		}
	}
}

// TestRateBursts: a board whose client reads 10 MB at once and then
// nothing for 20 s (curl 7.88's --limit-rate 500K) reads its bursts over
// the time they took, 4 Mbit/s, from its second burst on, not 0 between
// bursts and hundreds at each.
func TestRateBursts(t *testing.T) {
	var g progress
	const burst = 9_999_999
	var b int64
	for k := range 4 {
		at := time.Duration(k) * 20 * time.Second
		for i := 1; i <= 3; i++ { // each burst over 0.3 s
			b += burst / 3
			g.add(at+time.Duration(i)*100*time.Millisecond, b)
		}
	}
	for now := 20*time.Second + 400*time.Millisecond; now < 80*time.Second; now += time.Second {
		if r := mbit(&g, now); math.Abs(r-4) > 0.2 {
			t.Errorf("%.2f Mbit/s at %v, want 4", r, now)
		}
	}
}

// TestRateStall: once a steady board goes silent for longer than the span
// its rate was measured over, the rate falls with the silence; before any
// progress it is 0; a young transfer reads its bytes over its age.
func TestRateStall(t *testing.T) {
	var g progress
	if r := g.rate(time.Second); r != 0 {
		t.Errorf("no progress: %v bytes/s", r)
	}
	feed(&g, 0, 10*time.Second, 100*time.Millisecond, 500e3, 0)
	last := 9900 * time.Millisecond
	steady := mbit(&g, last)
	for _, c := range []struct {
		gap  time.Duration
		want float64 // share of the steady rate
	}{{time.Second, 1}, {RateWindow, 1}, {2 * RateWindow, 0.5}, {10 * RateWindow, 0.1}} {
		if r := mbit(&g, last+c.gap); math.Abs(r/steady-c.want) > 0.05 {
			t.Errorf("silent %v: %.2f Mbit/s, want %.2f of %.2f", c.gap, r, c.want, steady)
		}
	}
	var y progress
	y.add(time.Second, 125e3) // 1 Mbit in the first second
	if r := mbit(&y, time.Second); math.Abs(r-1) > 0.01 {
		t.Errorf("young transfer: %.2f Mbit/s, want 1", r)
	}
}

// TestTransferLive: Add and Set keep the points the rate is read from, a
// Set never goes back, and Snapshot carries the rate.
func TestTransferLive(t *testing.T) {
	a := NewActive()
	tr := a.Begin(&Fetch{Proto: "http", File: "f"})
	tr.Set(1000)
	tr.Set(500) // never back
	tr.Add(0)
	tr.Add(24)
	s := a.Snapshot()
	if len(s) != 1 || s[0].Bytes != 1024 || s[0].Mbps <= 0 {
		t.Fatalf("snapshot %+v", s)
	}
	tr.mu.Lock()
	n, newest := tr.pts.n, tr.pts.p[tr.pts.head].bytes
	tr.mu.Unlock()
	if n != 1 || newest != 1024 { // within one pointEvery slot: one point, the latest
		t.Errorf("%d points, newest %d bytes; want 1 of 1024", n, newest)
	}
	tr.End()
	var nilT *Transfer
	nilT.Add(1)
	nilT.Set(1)
	if len(a.Snapshot()) != 0 {
		t.Error("ended transfer still listed")
	}
}

// BenchmarkTransferAdd: what TFTP pays per ACKed window (and httpboot per
// sampling tick) to keep the live rate's points.
func BenchmarkTransferAdd(b *testing.B) {
	tr := NewActive().Begin(&Fetch{Proto: "tftp"})
	for b.Loop() {
		tr.Add(23488) // a window of 16 x 1468
	}
}
