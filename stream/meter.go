package stream

import (
	"net"
	"time"

	"github.com/pxeperf/pxeperf/measure"
)

// sampler is one side's measure.Sampler, its readings cut into Stats as
// iperf3 prints them: intervals that always sum to the total.
type sampler struct{ *measure.Sampler }

func startSampler(start time.Time, every time.Duration, read func() measure.Sample) sampler {
	return sampler{measure.StartSampler(start, every, func(time.Duration) measure.Sample { return read() },
		measure.SamplerOptions{})}
}

// finish stops the sampler, takes the last (partial) interval and returns
// all of them with the final cumulative figures and the elapsed time.
func (s sampler) finish() ([]Stats, Stats, time.Duration) { return s.finishAt(s.Since()) }

// finishAt is finish with the last interval ending at end (since start)
// rather than now: a UDP receiver's test ends when the sender stopped, not
// after the grace period it waited for stragglers.
func (s sampler) finishAt(end time.Duration) ([]Stats, Stats, time.Duration) {
	base, ss := s.Finish(end)
	var iv []Stats
	for _, v := range measure.Intervals(base, ss, 0) {
		iv = append(iv, statsOf(v))
	}
	last := ss[len(ss)-1]
	return iv, statsOf(measure.Cut(base, last)), last.At
}

// pause stops the readings: a UDP receiver pauses when the sender says it
// is done, so no interval starts during the grace period.
func (s sampler) pause() { s.Pause() }

// wholeTest is a side's total as its sum over the whole test, el long.
func wholeTest(total Stats, el time.Duration) Stats {
	total.Start, total.End, total.BitsPerSecond = 0, el, measure.BitsPerSecond(total.Bytes, el)
	return total
}

// tcpReceived is a TCP receiver's sum: bytes over the whole test, el long
// (the sender's TCP figures are the sender's).
func tcpReceived(bytes int64, el time.Duration) Stats {
	return Stats{End: el, Bytes: bytes, BitsPerSecond: measure.BitsPerSecond(bytes, el)}
}

func statsOf(v measure.Interval) Stats {
	return Stats{Start: v.Start, End: v.End, Bytes: v.Bytes, BitsPerSecond: v.BitsPerSecond(),
		Retransmits: v.Retransmits, SndCwnd: v.Cwnd, RTT: v.RTT,
		Packets: v.Packets, Lost: v.Lost, LostPercent: v.LostPercent(), OutOfOrder: v.OutOfOrder,
		Duplicates: v.Duplicates, JitterMs: v.Jitter * 1000}
}

// tcpSample is the sending side's TCP_INFO figures (retransmits, cwnd,
// RTT) with bytes the caller's count of bytes written, n; no TCP figures
// where TCP_INFO cannot be read.
func tcpSample(c net.Conn, n int64) measure.Sample {
	s := measure.Sample{}
	if i, err := measure.ReadTCPInfo(c); err == nil {
		s = i.Sample(0)
	}
	s.Bytes = n
	return s
}
