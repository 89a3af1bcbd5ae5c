package netlab

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDelayHistBuckets: every value falls in the bucket whose bounds hold
// it, and a bucket is at most 1/64 of its least value wide.
func TestDelayHistBuckets(t *testing.T) {
	check := func(v int64) {
		i := histIndex(v)
		lo, w := histBounds(i)
		if i == histLen-1 && v >= lo+w {
			return // past the sketch's range: counted in the last bucket
		}
		if v < lo || v >= lo+w {
			t.Fatalf("value %d in bucket %d [%d, %d)", v, i, lo, lo+w)
		}
		if lo >= histSub && w*histSub > lo {
			t.Fatalf("bucket %d [%d, %d) wider than 1/%d of its values", i, lo, lo+w, histSub)
		}
	}
	for v := int64(0); v < 5000; v++ {
		check(v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		check(rng.Int64N(int64(30 * time.Second)))
	}
	if i := histIndex(-5); i != 0 {
		t.Errorf("a negative value in bucket %d, want 0", i)
	}
	if i := histIndex(math.MaxInt64); i != histLen-1 {
		t.Errorf("the largest value in bucket %d, want %d", i, histLen-1)
	}
}

// TestDelayReportQuantiles: p50 and p99 of the sketch are within 1/64 of
// the exact quantiles of what was added; the mean and max are exact.
func TestDelayReportQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	asked := int64(120 * time.Microsecond)
	var h delayHist
	var vals []int64
	var sum int64
	for range 20000 {
		// Mostly on time, a tail up to 2 ms.
		v := asked + rng.Int64N(int64(8*time.Microsecond))
		if rng.IntN(50) == 0 {
			v += rng.Int64N(int64(2 * time.Millisecond))
		}
		h.add(v, asked)
		vals = append(vals, v)
		sum += v
	}
	slices.Sort(vals)
	exact := func(q float64) int64 { return vals[int(math.Ceil(q*float64(len(vals))))-1] }
	r := h.take()
	for _, c := range []struct {
		name string
		got  time.Duration
		want int64
	}{{"p50", r.P50, exact(0.50)}, {"p99", r.P99, exact(0.99)}} {
		if d := math.Abs(float64(int64(c.got)-c.want)) / float64(c.want); d > 1.0/histSub {
			t.Errorf("%s %v, exact %v: off by %.2f%%", c.name, c.got, time.Duration(c.want), d*100)
		}
	}
	if r.Max != time.Duration(vals[len(vals)-1]) {
		t.Errorf("max %v, want %v", r.Max, time.Duration(vals[len(vals)-1]))
	}
	if r.Mean != time.Duration(sum/int64(len(vals))) {
		t.Errorf("mean %v, want %v", r.Mean, time.Duration(sum/int64(len(vals))))
	}
	if r.Frames != uint64(len(vals)) {
		t.Errorf("frames %d, want %d", r.Frames, len(vals))
	}
	if again := h.take(); again != (DelayReport{}) {
		t.Errorf("a second take %+v, want an empty period", again)
	}
}

// TestDelayReportLate: a frame is late past the asked delay plus
// LateMargin (half of it, at least 50 µs), and a period fell behind when
// more than 1 % of its frames were late.
func TestDelayReportLate(t *testing.T) {
	us := func(n int64) int64 { return n * int64(time.Microsecond) }
	for _, c := range []struct {
		name         string
		asked        int64
		onTime, late int64 // frames held asked+margin, and asked+margin+1ns
		lateAt       int64
		behind       bool
	}{
		{"120us, 1% late", us(120), 990, 10, us(120 + 60), false},
		{"120us, 1.1% late", us(120), 989, 11, us(120 + 60), true},
		{"20us: margin 50us", us(20), 900, 100, us(20 + 50), true},
		{"2ms: margin 1ms", us(2000), 1000, 0, us(2000 + 1000), false},
	} {
		var h delayHist
		for range c.onTime {
			h.add(c.lateAt, c.asked)
		}
		for range c.late {
			h.add(c.lateAt+1, c.asked)
		}
		h.dropped.Add(3)
		r := h.take()
		if r.Late != uint64(c.late) || r.Frames != uint64(c.onTime+c.late) || r.Dropped != 3 {
			t.Errorf("%s: %d late of %d, %d dropped; want %d of %d, 3", c.name, r.Late, r.Frames, r.Dropped, c.late, c.onTime+c.late)
		}
		if r.Behind() != c.behind {
			t.Errorf("%s: Behind %v (late share %.4f), want %v", c.name, r.Behind(), r.LateShare(), c.behind)
		}
	}
	if (DelayReport{}).Behind() {
		t.Error("a period with no frames fell behind")
	}
}

// BenchmarkDelayHistAdd is what the line's hot path pays per frame for its
// measurement, as run does it: a monotonic clock read and the sketch's
// atomic adds (against a frame's write system call of a few microseconds).
func BenchmarkDelayHistAdd(b *testing.B) {
	var h delayHist
	asked := int64(120 * time.Microsecond)
	base := time.Now()
	wall := base.UnixNano()
	arrived := wall - asked
	for b.Loop() {
		h.add(wall+int64(time.Since(base))-arrived, asked)
	}
	if h.take().Frames == 0 {
		b.Fatal("nothing counted")
	}
}
