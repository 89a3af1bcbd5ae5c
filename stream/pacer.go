package stream

import "time"

// pacer is a token bucket for UDP sending at a set rate. Go's timers may
// fire a millisecond or more late, so the bucket holds up to pacerDepth of
// tokens: a late wake-up sends what it owes in one batch (sendmmsg) and the
// average rate stays exact, while a long stall (a full socket buffer) does
// not turn into an unbounded burst.
type pacer struct {
	rate   float64 // bytes per second
	tokens float64
	depth  float64
	last   time.Time
}

const pacerDepth = 10 * time.Millisecond

// pacerQuantum is the shortest sleep the sender aims for: waking for every
// datagram at 1 Gbit/s (one per 12 µs) costs more CPU than the sends, so
// it waits for up to a batch, or a quantum's worth at low rates.
const pacerQuantum = time.Millisecond

// batchFor is how many datagrams the sender waits for before it wakes.
func batchFor(bitsPerSec int64, size, batch int) int {
	n := int(float64(bitsPerSec) / 8 * pacerQuantum.Seconds() / float64(size))
	return max(1, min(batch, n))
}

func newPacer(bitsPerSec int64, packet, batch int, now time.Time) *pacer {
	rate := float64(bitsPerSec) / 8
	depth := max(rate*pacerDepth.Seconds(), float64(packet*batch))
	return &pacer{rate: rate, tokens: float64(packet), depth: depth, last: now}
}

// take returns how many packets of size bytes may go now, at most n.
func (p *pacer) take(now time.Time, size, n int) int {
	p.tokens = min(p.tokens+now.Sub(p.last).Seconds()*p.rate, p.depth)
	p.last = now
	k := min(int(p.tokens/float64(size)), n)
	if k > 0 {
		p.tokens -= float64(k * size)
	}
	return k
}

// wait is how long until size bytes may go.
func (p *pacer) wait(size int) time.Duration {
	need := float64(size) - p.tokens
	if need <= 0 {
		return 0
	}
	return time.Duration(need / p.rate * float64(time.Second))
}
