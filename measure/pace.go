package measure

import "time"

// Pacer is a token bucket for sending datagrams at a set rate (stream's
// UDP sender). Go's timers may fire a millisecond or more late, so the
// bucket holds up to PacerDepth of tokens: a late wake-up sends what it
// owes in one batch (sendmmsg) and the average rate stays exact, while a
// long stall (a full socket buffer) does not turn into an unbounded burst.
// Not safe for concurrent use.
type Pacer struct {
	rate   float64 // bytes per second
	tokens float64
	depth  float64
	last   time.Time
}

// PacerDepth is how much sending time a Pacer's bucket holds at most (or
// one batch of datagrams, when that is more).
const PacerDepth = 10 * time.Millisecond

// PacerQuantum is the shortest sleep a sender aims for: waking for every
// datagram at gigabit rates costs more CPU than the sends (see
// measure/DESIGN.md#pacer-quantum), so it waits for up to a batch, or a
// quantum's worth at low rates.
const PacerQuantum = time.Millisecond

// BatchFor is how many datagrams of size bytes a sender at bitsPerSec
// waits for before it wakes: a quantum's worth, 1 to batch.
func BatchFor(bitsPerSec int64, size, batch int) int {
	n := int(float64(bitsPerSec) / 8 * PacerQuantum.Seconds() / float64(size))
	return max(1, min(batch, n))
}

// NewPacer paces bitsPerSec from now, for datagrams of packet bytes sent
// up to batch at a time; one datagram may go at once.
func NewPacer(bitsPerSec int64, packet, batch int, now time.Time) *Pacer {
	rate := float64(bitsPerSec) / 8
	depth := max(rate*PacerDepth.Seconds(), float64(packet*batch))
	return &Pacer{rate: rate, tokens: float64(packet), depth: depth, last: now}
}

// Take returns how many datagrams of size bytes may go now, at most n,
// and takes their tokens.
func (p *Pacer) Take(now time.Time, size, n int) int {
	p.tokens = min(p.tokens+now.Sub(p.last).Seconds()*p.rate, p.depth)
	p.last = now
	k := min(int(p.tokens/float64(size)), n)
	if k > 0 {
		p.tokens -= float64(k * size)
	}
	return k
}

// Wait is how long until size bytes may go.
func (p *Pacer) Wait(size int) time.Duration {
	need := float64(size) - p.tokens
	if need <= 0 {
		return 0
	}
	return time.Duration(need / p.rate * float64(time.Second))
}

// Due is when a sender at bitsPerSec since start has sent sent bytes on
// time: the average since the start, as iperf's -b keeps it (a stall is
// made up for at once).
func Due(bitsPerSec int64, start time.Time, sent int64) time.Time {
	return start.Add(time.Duration(float64(sent*8) / float64(bitsPerSec) * float64(time.Second)))
}

// Pace sleeps until the sent bytes are Due, when that is more than
// PacerQuantum away; false when done closed first. A rate of 0 or less is
// no limit.
func Pace(bitsPerSec int64, start time.Time, sent int64, done <-chan struct{}) bool {
	if bitsPerSec <= 0 {
		return true
	}
	if d := time.Until(Due(bitsPerSec, start, sent)); d > PacerQuantum {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-done:
			return false
		}
	}
	return true
}
