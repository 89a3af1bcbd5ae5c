// Package measure owns what a transfer measured, for every producer of
// figures (httpboot, perfsrv's iperf3 and iperf 2 servers, stream's server
// and clients): TCP_INFO read from a socket (Probe, ReadTCPInfo), cumulative
// readings cut into intervals (Sample, Interval, Cut, Intervals, Sampler),
// a UDP receiver's loss, reordering and RFC 3550 jitter (UDPRecv, Jitter),
// the pacing of a sender (Pacer, Pace) and small helpers (Median).
//
// It returns plain values and knows nothing of events, records or storage:
// callers turn its figures into event.Interval, event.TCPInfo, iperf3's
// JSON or stream.Stats. See DESIGN.md.
package measure

import (
	"slices"
	"time"
)

// Sample is one cumulative reading of a transfer at At (from its start):
// counters only grow; gauges (Cwnd, SndWnd, RTT, Jitter) are the value at
// At.
type Sample struct {
	At time.Duration

	Bytes       int64 // payload bytes (acknowledged, written or received: the caller's choice)
	Retransmits int64 // TCP segments sent again (tcpi_total_retrans)
	// UDP receiver counters (see UDPRecv).
	Packets, Lost, OutOfOrder, Duplicates int64

	Cwnd   int64         // gauge: congestion window, bytes (snd_cwnd * snd_mss)
	SndWnd int64         // gauge: the window the peer advertises, bytes
	RTT    time.Duration // gauge: smoothed RTT
	Jitter float64       // gauge: RFC 3550 interarrival jitter, seconds
}

// Interval is a transfer between two readings: counters are differences,
// gauges the later reading's.
type Interval struct {
	Start, End time.Duration

	Bytes, Retransmits                    int64
	Packets, Lost, OutOfOrder, Duplicates int64

	Cwnd, SndWnd int64
	RTT          time.Duration
	Jitter       float64 // seconds
}

// Cut is the interval from prev to cur.
func Cut(prev, cur Sample) Interval {
	return Interval{Start: prev.At, End: cur.At,
		Bytes: cur.Bytes - prev.Bytes, Retransmits: cur.Retransmits - prev.Retransmits,
		Packets: cur.Packets - prev.Packets, Lost: cur.Lost - prev.Lost,
		OutOfOrder: cur.OutOfOrder - prev.OutOfOrder, Duplicates: cur.Duplicates - prev.Duplicates,
		Cwnd: cur.Cwnd, SndWnd: cur.SndWnd, RTT: cur.RTT, Jitter: cur.Jitter}
}

// Merge is a followed by b as one interval: counters add up, gauges are
// b's.
func Merge(a, b Interval) Interval {
	b.Start = a.Start
	b.Bytes += a.Bytes
	b.Retransmits += a.Retransmits
	b.Packets += a.Packets
	b.Lost += a.Lost
	b.OutOfOrder += a.OutOfOrder
	b.Duplicates += a.Duplicates
	return b
}

// Halve merges neighbours in place: half as many intervals (an odd last
// one is kept as it is), each twice as long, as a chart of a long
// transfer would show it.
func Halve(ivs []Interval) []Interval {
	n := len(ivs) / 2
	for i := range n {
		ivs[i] = Merge(ivs[2*i], ivs[2*i+1])
	}
	if len(ivs)%2 == 1 {
		ivs[n] = ivs[len(ivs)-1]
		n++
	}
	return ivs[:n]
}

// Intervals cuts cumulative samples into intervals, from base (the reading
// at the measured start). A last interval shorter than minTail is folded
// into the one before, so the counts match a client's lines: iperf3 drops
// a tail under a tenth of the period (iperf_print_intermediate); iperf 2
// prints whole periods only, its total covering the rest. An interval of
// no length is left out.
func Intervals(base Sample, ss []Sample, minTail time.Duration) []Interval {
	var out []Interval
	prev := base
	for _, s := range ss {
		iv := Cut(prev, s)
		if iv.End-iv.Start < minTail && len(out) > 0 {
			out[len(out)-1] = Merge(out[len(out)-1], iv)
		} else if iv.End > iv.Start {
			out = append(out, iv)
		}
		prev = s
	}
	return out
}

// BitsPerSecond is the interval's payload rate.
func (iv Interval) BitsPerSecond() float64 { return BitsPerSecond(iv.Bytes, iv.End-iv.Start) }

// LostPercent is 100 * Lost / (Packets + Lost), 0 when nothing was due.
func (iv Interval) LostPercent() float64 { return LostPercent(iv.Lost, iv.Packets+iv.Lost) }

// BitsPerSecond is bytes over d; 0 for no time.
func BitsPerSecond(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / d.Seconds()
}

// LostPercent is 100 * lost / expected, 0 when nothing was expected.
func LostPercent(lost, expected int64) float64 {
	if expected <= 0 {
		return 0
	}
	return 100 * float64(lost) / float64(expected)
}

// Number is what Median takes: a value two of which can be averaged.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Median is the middle value of v, and for an even count the mean of the
// two middle values (for an integer type rounded down to the lower middle
// plus half the gap, which cannot overflow for values within the type's
// range of each other); 0 when v is empty. v is not changed: Median sorts
// a copy. It is the one median of the tree (report's tables, the bench and
// its peers lab, TCP_INFO's sampled windows), so an even count is read the
// same way everywhere.
func Median[T Number](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	lo, hi := s[n/2-1], s[n/2]
	if one := T(1); one/2 == 0 { // an integer type: (lo+hi)/2 could overflow
		return lo + (hi-lo)/2
	}
	return (lo + hi) / 2
}
