package measure

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCut(t *testing.T) {
	prev := Sample{At: time.Second, Bytes: 1000, Packets: 10, Lost: 1, Retransmits: 3, OutOfOrder: 1, Duplicates: 2}
	cur := Sample{At: 2 * time.Second, Bytes: 3500, Packets: 30, Lost: 6, Retransmits: 5, OutOfOrder: 2, Duplicates: 2,
		Cwnd: 64000, SndWnd: 1 << 20, Jitter: 0.0005, RTT: ms}
	got := Cut(prev, cur)
	want := Interval{Start: time.Second, End: 2 * time.Second, Bytes: 2500, Packets: 20, Lost: 5, Retransmits: 2,
		OutOfOrder: 1, Cwnd: 64000, SndWnd: 1 << 20, Jitter: 0.0005, RTT: ms}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Cut (-want +got):\n%s", diff)
	}
	if bps, lp := got.BitsPerSecond(), got.LostPercent(); bps != 20000 || lp != 20 {
		t.Errorf("%v bit/s, %v%% lost; want 20000, 20", bps, lp)
	}
	if (Interval{}).BitsPerSecond() != 0 || (Interval{}).LostPercent() != 0 {
		t.Errorf("an empty interval has a rate or a loss")
	}
}

func TestIntervals(t *testing.T) {
	s := func(at time.Duration, b, r int64) Sample {
		return Sample{At: at, Bytes: b, Retransmits: r, Cwnd: b, SndWnd: 2 * b, RTT: time.Duration(b)}
	}
	for name, tc := range map[string]struct {
		base    Sample
		ss      []Sample
		minTail time.Duration
		want    []Interval
	}{
		"whole periods": {ss: []Sample{s(time.Second, 100, 1), s(2*time.Second, 300, 1)}, want: []Interval{
			{End: time.Second, Bytes: 100, Retransmits: 1, Cwnd: 100, SndWnd: 200, RTT: 100},
			{Start: time.Second, End: 2 * time.Second, Bytes: 200, Cwnd: 300, SndWnd: 600, RTT: 300}}},
		"short tail folds into the one before, gauges its own": {
			ss: []Sample{s(time.Second, 100, 1), s(1050*time.Millisecond, 110, 3)}, minTail: 100 * time.Millisecond,
			want: []Interval{{End: 1050 * time.Millisecond, Bytes: 110, Retransmits: 3, Cwnd: 110, SndWnd: 220, RTT: 110}}},
		"a short only interval stays": {ss: []Sample{s(50*time.Millisecond, 10, 0)}, minTail: 100 * time.Millisecond,
			want: []Interval{{End: 50 * time.Millisecond, Bytes: 10, Cwnd: 10, SndWnd: 20, RTT: 10}}},
		"from the base": {base: s(0, 1000, 5), ss: []Sample{s(time.Second, 1500, 6)},
			want: []Interval{{End: time.Second, Bytes: 500, Retransmits: 1, Cwnd: 1500, SndWnd: 3000, RTT: 1500}}},
		"no length is left out": {ss: []Sample{s(0, 0, 0)}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Intervals(tc.base, tc.ss, tc.minTail)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHalve(t *testing.T) {
	var ivs []Interval
	for i := range 5 {
		ivs = append(ivs, Interval{Start: time.Duration(i), End: time.Duration(i + 1), Bytes: int64(10 * (i + 1)),
			Retransmits: 1, Cwnd: int64(i)})
	}
	got := Halve(ivs)
	want := []Interval{{Start: 0, End: 2, Bytes: 30, Retransmits: 2, Cwnd: 1}, {Start: 2, End: 4, Bytes: 70, Retransmits: 2, Cwnd: 3},
		{Start: 4, End: 5, Bytes: 50, Retransmits: 1, Cwnd: 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMedian(t *testing.T) {
	tests := map[string]struct {
		in   []uint32
		want uint32
	}{
		"none":     {nil, 0},
		"one":      {[]uint32{7}, 7},
		"odd":      {[]uint32{9, 1, 5}, 5},
		"even":     {[]uint32{4, 1, 3, 2}, 2}, // 2 + (3-2)/2, rounded down
		"even gap": {[]uint32{10, 1, 20, 2}, 6},
		"repeat":   {[]uint32{65535, 65535, 1024}, 65535},
		"no wrap":  {[]uint32{math.MaxUint32, math.MaxUint32 - 2}, math.MaxUint32 - 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			if got := Median(in); got != tt.want {
				t.Errorf("Median(%v) = %d, want %d", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("Median changed its argument: %v, was %v", in, tt.in)
			}
		})
	}
	floats := map[string]struct {
		in   []float64
		want float64
	}{
		"none": {nil, 0},
		"odd":  {[]float64{0.5, 0.25, 2}, 0.5},
		"even": {[]float64{4, 1, 3, 2}, 2.5},
		"two":  {[]float64{1, 2}, 1.5},
	}
	for name, tt := range floats {
		t.Run("float/"+name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			if got := Median(in); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("Median changed its argument: %v, was %v", in, tt.in)
			}
		})
	}
	if got := Median([]int{-3, -1}); got != -2 {
		t.Errorf("Median(-3, -1) = %d, want -2", got)
	}
}
