package tftp

import (
	"slices"
	"time"
)

// A windowed transfer adapts two things to the link and the client, as a
// TCP or QUIC sender does (RFC 5681, RFC 6298, RFC 9002), so a large
// window never turns into a collapse:
//
//   - The effective window (congestion window, cwnd) is what the sender puts
//     in one round; the negotiated windowsize is only its ceiling. A round
//     acknowledged in full grows it by one block; a lost tail (found by
//     the timer: a timeout, or a probe answered) shrinks it to 0.7 of
//     itself (CUBIC's beta), once per round, and it then regrows quickly
//     only to just below that window and creeps past it (stuckCreep). An
//     ACK short of the round or a repeat is counted but keeps the window. The client never sees anything but shorter windows.
//   - The retransmit timer follows the round trip measured from a round's
//     last packet to its ACK (smoothed as RFC 6298 does, Karn's rule: no
//     sample from a round sent twice), between a floor of 30 ms (defaultMinRTO) and the negotiated
//     timeout, doubling on each timeout in a row.
//
// An RFC 7440 client acknowledges after windowsize blocks in order (atftp
// counts blocks since its last ACK; U-Boot ACKs at fixed block numbers,
// windowsize apart from its last ACK), or at the last block, or at once
// when a block arrives ahead of the one it waits for (a gap), or on its own
// timeout (5 s for both). A round of fewer blocks than the window would
// wait for that timeout, so a short round ends in a gap: its blocks, then
// the block after next (as the single-port proof does, proof.go). Both
// clients acknowledge the last block in order at once, exactly the end of
// the round, and the skipped block starts the next round. The gap block is
// inside the negotiated window, so a round is at most windowsize-2 blocks.
//
// After a timeout the sender first sends a probe, the highest block of the
// round again (a tail-loss probe): a client that lost only the tail sees
// the round's last block in order (and ACKs it: it completes its count) or
// sees a gap (and ACKs where it is), so a lost tail costs one packet and a
// few round trips, not the client's 5 s. Only when the probe is not
// answered either does the round go back to its first unacknowledged block.

const (
	// defaultMinRTO is the retransmit timer's floor: several scheduler
	// ticks of a loaded host, so a client that is merely descheduled is not
	// sent duplicates. A veth round trip is well under 1 ms, but on a
	// loaded 2-core host a 5 ms floor fired on clean links (same run: up to
	// 10 spurious timeouts per 64 MiB; at 30 ms none).
	defaultMinRTO = 30 * time.Millisecond
	// rttGranularity is the least variance term of the timer (RFC 9002's
	// kGranularity).
	rttGranularity = time.Millisecond
	// cwndBeta is the multiplicative decrease on a loss signal.
	cwndBeta = 0.7
	// stuckCreep is the growth per round acknowledged in full once the
	// window is just below where a tail was last lost.
	stuckCreep = 1.0 / 64
)

// congestion is one windowed transfer's effective window and retransmit
// timer.
type congestion struct {
	limit int           // negotiated windowsize: the ceiling
	cwnd  float64       // effective window, blocks
	floor time.Duration // the timer's least value
	ceil  time.Duration // and its largest: the negotiated timeout

	// stuck is the window a timeout-class loss (a lost tail: the client
	// fell silent) happened at, 0 before one. Such a loss is most often
	// the client's socket buffer overflowing at a fixed size, so the
	// window regrows quickly to just below it and only creeps past
	// (stuckCreep per round), rather than overflow every few rounds.
	stuck float64

	srtt, rttvar time.Duration // 0 until the first sample
	backoff      int           // timeouts in a row

	// rounds[n] counts the rounds that carried n new blocks (the
	// effective window over time).
	rounds []int64
	losses int64 // loss signals: rounds answered short, repeated, or timed out
}

func newCongestion(limit int, timeout, floor time.Duration) *congestion {
	if floor <= 0 {
		floor = defaultMinRTO
	}
	return &congestion{limit: limit, cwnd: float64(limit), floor: floor, ceil: timeout, rounds: make([]int64, limit+1)}
}

// window is the number of blocks the next round may carry.
func (c *congestion) window() int { return max(1, min(int(c.cwnd), c.limit)) }

// rto is the retransmit timeout now.
func (c *congestion) rto() time.Duration {
	if c.srtt == 0 {
		return c.ceil
	}
	d := c.srtt + max(4*c.rttvar, rttGranularity)
	d = max(d, c.floor)
	for range min(c.backoff, 20) {
		d *= 2
		if d >= c.ceil {
			break
		}
	}
	return min(d, c.ceil)
}

// atCeiling reports whether the timer runs at the negotiated timeout: only
// such timeouts count against the retries, so a transfer gives up after as
// long as it did with a fixed timer.
func (c *congestion) atCeiling() bool { return c.rto() >= c.ceil }

// sample adds a round trip measured on a round sent once (RFC 6298 2.2-2.3).
func (c *congestion) sample(r time.Duration) {
	if c.srtt == 0 {
		c.srtt, c.rttvar = r, r/2
		return
	}
	c.rttvar = (3*c.rttvar + (c.srtt - r).Abs()) / 4
	c.srtt = (7*c.srtt + r) / 8
}

// sent records a round of n new blocks.
// A round cut short by the end of the file (final) is not counted unless it
// is the only one: it says nothing about the window.
func (c *congestion) sent(n int, final bool) {
	if final && c.total() > 0 {
		return
	}
	c.rounds[min(n, c.limit)]++
}

func (c *congestion) total() (n int64) {
	for _, k := range c.rounds {
		n += k
	}
	return n
}

// acked records a round acknowledged in full: additive increase.
func (c *congestion) acked() {
	c.backoff = 0
	step := 1.0
	if c.stuck > 0 && c.cwnd+1 > c.stuck-1 {
		step = stuckCreep
		if c.cwnd < c.stuck-1 {
			step = c.stuck - 1 - c.cwnd
		}
	}
	c.cwnd = min(c.cwnd+step, float64(c.limit))
	if c.cwnd >= c.stuck+1 {
		c.stuck = 0 // crept past it: the limit has moved
	}
}

// lost records a loss signal: multiplicative decrease. tail is a loss
// found by the timer (the client said nothing).
func (c *congestion) lost(tail bool) {
	c.losses++
	if !tail {
		// The client saw a gap and said where it is: one block lost at
		// random (a LAN's loss is rarely congestion). The next round
		// starts there, at the same window; shrinking here halved the
		// speed at 0.5% loss (same run, windowsize 16) and made shorter
		// rounds whose gap block can be lost in turn.
		return
	}
	c.stuck = max(2, float64(c.window()))
	c.cwnd = max(1, c.cwnd*cwndBeta)
}

// progress records an ACK that moved the window: the timer stops backing off.
func (c *congestion) progress() { c.backoff = 0 }

// timedOut records a timeout: the timer backs off.
func (c *congestion) timedOut() { c.backoff++ }

// stats returns the least, median and largest effective window over the
// rounds sent (0s before any).
func (c *congestion) stats() (lo, med, hi int) {
	total := c.total()
	if total == 0 {
		return 0, 0, 0
	}
	lo = slices.IndexFunc(c.rounds, func(k int64) bool { return k > 0 })
	for n := len(c.rounds) - 1; n >= 0; n-- {
		if c.rounds[n] > 0 {
			hi = n
			break
		}
	}
	var seen int64
	for n, k := range c.rounds {
		seen += k
		if 2*seen >= total {
			med = n
			break
		}
	}
	return lo, med, hi
}
