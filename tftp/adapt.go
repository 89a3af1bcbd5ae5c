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
//     itself (CUBIC's beta), once per round, and it then regrows at once
//     to just below the limit found (the blocks the probe showed
//     delivered) and creeps past it (stuckCreep, halved per loss there).
//     An ACK short of the round or a repeat is counted but keeps the
//     window. The client never sees anything but shorter windows.
//   - The retransmit timer follows the round trip measured from a round's
//     last packet to its ACK (smoothed as RFC 6298 does, Karn's rule: no
//     sample from a round sent twice; the OACK's round trip seeds it),
//     between a floor of 30 ms (defaultMinRTO) and the negotiated
//     timeout, doubling on each timeout in a row. A round's first timeout
//     only sends a probe, so it fires sooner (pto).
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
	// sent duplicates; a lower floor fired on clean links. See
	// tftp/DESIGN.md#rto-floor.
	defaultMinRTO = 30 * time.Millisecond
	// defaultMinPTO is the tail-loss probe timer's floor: a probe is one
	// packet, so it may fire sooner than a resend of the round.
	defaultMinPTO = 2 * time.Millisecond
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
	limit  int           // negotiated windowsize: the ceiling
	cwnd   float64       // effective window, blocks
	floor  time.Duration // the timer's least value
	pfloor time.Duration // the tail-loss probe timer's least value
	ceil   time.Duration // and its largest: the negotiated timeout

	// stuck is the window a timeout-class loss (a lost tail: the client
	// fell silent) happened at, 0 before one. Such a loss is most often
	// the client's socket buffer overflowing at a fixed size, so the
	// window regrows quickly to just below it and only creeps past
	// (stuckCreep per round), rather than overflow every few rounds.
	stuck float64
	// hits counts tail losses in a row at (or just past) the remembered
	// window: each halves the creep, so a fixed limit (a client's socket
	// buffer) is probed less and less often, each probe costing a timeout
	// (tftp/DESIGN.md#remembered-limit).
	hits int
	// tails counts the lost tails in a row (no round acknowledged in
	// full between them).
	tails int

	srtt, rttvar time.Duration // 0 until the first sample
	backoff      int           // timeouts in a row

	// rounds[n] counts the rounds that carried n new blocks (the
	// effective window over time).
	rounds []int64
	losses int64 // loss signals: rounds answered short, repeated, or timed out
}

// newCongestion starts a transfer's window at limit. floor overrides both
// timers' floors (tests that want a fixed timer); 0: the defaults.
func newCongestion(limit int, timeout, floor time.Duration) *congestion {
	pfloor := floor
	if floor <= 0 {
		floor, pfloor = defaultMinRTO, defaultMinPTO
	}
	return &congestion{limit: limit, cwnd: float64(limit), floor: floor, pfloor: pfloor, ceil: timeout, rounds: make([]int64, limit+1)}
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

// pto is the timer of a round whose timeout sends a tail-loss probe: two
// round trips (RFC 8985's PTO), or the RTO's variance term when that is
// larger (clients whose round trips vary, as U-Boot's under QEMU do, drew
// spurious probes at two round trips), at least defaultMinPTO. A spurious
// probe costs one packet and one round at a smaller window; each tail lost
// to a full client buffer costs this long, which is why it is not the RTO.
// See tftp/DESIGN.md#probe-timer.
func (c *congestion) pto() time.Duration {
	if c.srtt == 0 {
		return c.rto()
	}
	d := c.srtt + max(c.srtt, 4*c.rttvar) + rttGranularity
	return min(max(d, c.pfloor), c.rto())
}

// prompt reports whether a probe answered after d found the client
// running: within two round trips (at least 1 ms). A tail lost to a full
// buffer is answered at once; a client that was descheduled answers its
// round late, and taking that for a loss would shrink the window round
// after round (tftp/DESIGN.md#probe-timer).
func (c *congestion) prompt(d time.Duration) bool {
	return d <= max(2*c.srtt, time.Millisecond)
}

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
	c.tails = 0
	step := 1.0
	switch {
	case c.stuck > 0 && c.cwnd < c.stuck-1:
		step = c.stuck - 1 - c.cwnd // at once back to the size that fitted
	case c.stuck > 0:
		step = stuckCreep / float64(int(1)<<min(c.hits, maxCreepHalvings))
	}
	c.cwnd = min(c.cwnd+step, float64(c.limit))
	if c.cwnd >= c.stuck+1 {
		c.stuck, c.hits = 0, 0 // crept past it: the limit has moved
	}
}

// maxCreepHalvings bounds the creep's halving (1/64 down to 1/4096 block
// per round), so a limit that moved up is still found within a few
// thousand rounds.
const maxCreepHalvings = 6

// lost records a loss signal: multiplicative decrease. tail is a loss
// found by the timer (the client said nothing); delivered is how many
// blocks of the round the client then acknowledged in order (0: not
// known). A tail lost from a full socket buffer is all that did not fit,
// so delivered is the most the client's buffer took: the window is
// remembered there at once rather than one block lower per loss.
func (c *congestion) lost(tail bool, delivered int) {
	c.losses++
	if !tail {
		// The client saw a gap and said where it is: one block lost at
		// random (a LAN's loss is rarely congestion). The next round
		// starts there, at the same window: shrinking here slowed random
		// loss down and made shorter rounds whose gap block can be lost
		// in turn (tftp/DESIGN.md#lost-tails).
		return
	}
	// One lost tail alone is most often the round's last packet lost at
	// random, or a client that was away (descheduled on a loaded host, or
	// U-Boot under QEMU, whose round trips vary): the window is kept. A
	// client's full buffer loses the tail of every round that size, so a
	// second in a row is a limit; below a limit already found (a size that
	// fitted), the third. Taking each lost tail for a limit walked the
	// window down to 1 block (tftp/DESIGN.md#lost-tails).
	w := c.window()
	need := 2
	if c.stuck > 0 && float64(w) < c.stuck {
		need = 3
	}
	if c.tails++; c.tails < need {
		return
	}
	c.tails = 0
	if delivered > 0 && delivered < w {
		w = delivered
	}
	if c.stuck > 0 && float64(w) <= c.stuck+1 {
		c.hits++ // the same limit again
	} else {
		c.hits = 0
	}
	c.stuck = max(2, float64(w))
	c.cwnd = max(1, c.cwnd*cwndBeta)
}

// seed takes a first round trip measured outside the windows (the OACK
// to its ACK), so the first round's timer is not the negotiated timeout:
// a first window that overflows the client's buffer would wait all of it.
// The OACK's round trip includes the client's start, which can be long on
// a loaded host, so it counts for at most the RTO floor; a first probe
// sent too soon is one packet, and the rounds' own samples take over
// (tftp/DESIGN.md#oack-seed).
func (c *congestion) seed(r time.Duration) {
	if c.srtt == 0 && r > 0 {
		c.sample(min(r, c.floor))
	}
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
