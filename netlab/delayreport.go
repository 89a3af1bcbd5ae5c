package netlab

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
)

// DelayReport is what the delay line delivered over one period (the bench:
// one point): the delay it added to each frame it sent on, from the frame's
// kernel receive timestamp on one delay end to the moment the line wrote it
// to the other, against the one-way delay asked. A line that keeps up adds
// the asked delay plus a few microseconds; one that falls behind (its thread
// not scheduled in time on a busy host, or a burst queued behind slow
// writes) adds more, and the round trip a window-limited flow sees grows
// with it. Zero (Frames 0) with netem or without a line.
type DelayReport struct {
	Asked  time.Duration // the one-way delay set when the period was taken
	Frames uint64        // frames sent on, both directions
	// Late counts the frames held longer than their asked delay plus
	// LateMargin of it.
	Late uint64
	// Dropped counts frames the line could not queue or the peer end
	// could not take.
	Dropped uint64
	// The added delay per frame: median, 99th percentile (a sketch, within
	// 1/64 of the value), mean and largest.
	P50, P99, Mean, Max time.Duration
}

// LateMargin is how much longer than asked a frame may be held before it
// counts as late: half the asked delay, at least 50 µs (a real-time thread
// on an idle core wakes within a few).
func LateMargin(asked time.Duration) time.Duration {
	return max(50*time.Microsecond, asked/2)
}

// BehindShare is the share of late frames above which a period's line fell
// behind: then more than 1 frame in 100 was held beyond the margin, and the
// round trip the flow saw is the host's, not the asked one.
const BehindShare = 0.01

// Behind reports whether the line fell behind over the period (more than
// BehindShare of its frames late).
func (r DelayReport) Behind() bool {
	return r.Frames > 0 && float64(r.Late) > BehindShare*float64(r.Frames)
}

// LateShare is the share of frames that were late (0 without frames).
func (r DelayReport) LateShare() float64 {
	if r.Frames == 0 {
		return 0
	}
	return float64(r.Late) / float64(r.Frames)
}

func (r DelayReport) String() string {
	if r.Frames == 0 {
		return "no frames"
	}
	return fmt.Sprintf("asked %v: %d frames, p50 %v, p99 %v, max %v, %d late (> %v), %d dropped",
		r.Asked, r.Frames, r.P50.Round(100*time.Nanosecond), r.P99.Round(100*time.Nanosecond),
		r.Max.Round(100*time.Nanosecond), r.Late, r.Asked+LateMargin(r.Asked), r.Dropped)
}

// The delay sketch: a log-linear histogram of nanoseconds, exact below
// histSub, then histSub buckets per octave (each within 1/histSub of its
// values) up to histSub<<histOct ns (~68 s); larger values count in the last
// bucket.
const (
	histSub = 64
	histOct = 30
	histLen = histSub + histOct*histSub
)

// delayHist accumulates DelayReport over a period. One goroutine adds (the
// line's thread: a few atomic adds per frame, no lock, no allocation);
// another takes, which reads and zeroes every counter. A frame added while
// a take runs lands whole in one of the two periods for each counter, so
// the counters of a period may disagree by the frames of that moment.
type delayHist struct {
	counts       [histLen]atomic.Uint64
	frames, late atomic.Uint64
	dropped      atomic.Uint64
	sum          atomic.Uint64 // ns
	max          atomic.Int64  // ns
}

// histIndex is the bucket of v ns.
func histIndex(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 7 // v>>e is in [64, 128)
	if e >= histOct {
		return histLen - 1
	}
	return histSub + e*histSub + int(v>>e) - histSub
}

// histBounds is the least value of bucket i and its width.
func histBounds(i int) (lo, width int64) {
	if i < histSub {
		return int64(i), 1
	}
	e := (i - histSub) / histSub
	return int64(histSub+(i-histSub)%histSub) << e, 1 << e
}

// add counts one frame held added ns, asked ns.
func (h *delayHist) add(added, asked int64) {
	h.counts[histIndex(added)].Add(1)
	h.frames.Add(1)
	h.sum.Add(uint64(max(added, 0)))
	if added-asked > int64(LateMargin(time.Duration(asked))) {
		h.late.Add(1)
	}
	for m := h.max.Load(); added > m; m = h.max.Load() {
		if h.max.CompareAndSwap(m, added) {
			break
		}
	}
}

// take returns the period's report (Asked left to the caller) and starts a
// new one.
func (h *delayHist) take() DelayReport {
	var counts [histLen]uint64
	var n uint64
	for i := range h.counts {
		counts[i] = h.counts[i].Swap(0)
		n += counts[i]
	}
	r := DelayReport{Frames: h.frames.Swap(0), Late: h.late.Swap(0), Dropped: h.dropped.Swap(0)}
	sum, mx := h.sum.Swap(0), h.max.Swap(0)
	if n == 0 {
		return r
	}
	r.Max, r.Mean = time.Duration(mx), time.Duration(sum/n)
	r.P50, r.P99 = quantile(&counts, n, 0.50, mx), quantile(&counts, n, 0.99, mx)
	return r
}

// quantile is the q-quantile of the n values counted: the middle of the
// bucket holding the value of rank ceil(q·n), at most the largest value.
func quantile(counts *[histLen]uint64, n uint64, q float64, mx int64) time.Duration {
	rank := uint64(q*float64(n) + 0.999999)
	rank = min(max(rank, 1), n)
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum >= rank {
			lo, w := histBounds(i)
			return time.Duration(min(lo+w/2, max(mx, lo)))
		}
	}
	return time.Duration(mx)
}
