package tftp

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// sendFile sends the file a window at a time (RFC 7440; one block when the
// client did not ask for windowsize: plain lock-step) and returns when the
// client acknowledged the last block.
//
// After each window the server waits for the ACK of its last block, then
// sends the next window. An ACK of an earlier block of the window means
// the client lost the block after it: the next window starts there at once,
// without waiting for a timeout. A timeout sends the window again, up to
// retries times in a row.
//
// ACKs of blocks before the window (stale or reordered) are ignored. So is
// a repeated ACK of the block just before the window in lock-step, as RFC
// 1123 4.2.3.1 asks against the Sorcerer's Apprentice bug. With a window,
// though, that repeat is how atftp and U-Boot say the window's first block
// was lost, so it is answered with the window at once, but once per window
// position only: duplicates cost one window at most and cannot multiply.
func (t *transfer) sendFile(w *window) error {
	s := newSender(t, w)
	defer s.report()
	for {
		done, err := s.round()
		if done || err != nil {
			return err
		}
	}
}

// sender is sendFile's state. Each turn of its loop (round) plans what to
// send (plan: a round of blocks, maybe ending in a gap, or a tail-loss
// probe), sends it and waits for an ACK (sendAndWait), and takes what
// came back: onTimeout, onRepeat or onAck, which moves the window on.
// Congestion control is cc (adapt.go); the single-port proof is t.proof
// (proof.go).
type sender struct {
	t    *transfer
	w    *window
	size int64 // the negotiated windowsize
	// adaptive: a windowed transfer, whose window and timer adapt
	// (adapt.go). Lock-step (RFC 1350) keeps the negotiated timeout: old
	// PXE ROMs that ask for no window are slow and uneven, and each ACK
	// there releases one block anyway.
	adaptive bool
	cc       *congestion
	gated    bool // this turn is a round of the single-port proof (proof.go)

	base    int64              // oldest block not acknowledged
	sentMax int64              // every block up to it was sent at least once
	gaps    map[int64]struct{} // gap blocks sent above sentMax
	attempt int                // timeouts at the ceiling in a row
	// repeatOK: a repeated ACK of base-1 may be answered now.
	repeatOK bool
	// needGap: the client's ACK counter may be out of step, so rounds end
	// in a gap.
	needGap bool

	flight flight // the round in flight

	batch [][]byte // the packets of this send
	seqs  []int64  // their seqs
}

// flight is what the sender knows of the round in flight; it starts over
// when an ACK moves the window (next).
type flight struct {
	// The round: blocks base..end in order, then maybe a gap block; last
	// is the highest block sent in it. An ACK of end completes it.
	end, last int64
	sends     int       // sends of the round (the first, resends, probes)
	sentAt    time.Time // when it was last sent
	probe     bool      // the next send is a tail-loss probe
	signalled bool      // the round's loss was signalled to cc
	sized     bool      // gated: the proof drew this round's size
	// A repeated ACK shrank the window: undo, to the cwnd saved, if an
	// ACK then covers the round's first send up to firstEnd (the client
	// had it all: the repeat was a duplicate, not a loss).
	undo     float64
	firstEnd int64
}

func newSender(t *transfer, w *window) *sender {
	size := int64(len(w.pkts))
	s := &sender{
		t: t, w: w, size: size, adaptive: size > 1,
		cc:   newCongestion(int(size), t.timeout, t.minRTO),
		base: 1, gaps: map[int64]struct{}{}, repeatOK: size > 1,
		batch: make([][]byte, 0, size), seqs: make([]int64, 0, size),
	}
	if s.adaptive {
		s.cc.seed(t.oackRTT)
	}
	return s
}

// report puts the window and timer's figures on the transfer's event.
func (s *sender) report() {
	info := s.t.info
	info.WindowMin, info.WindowMedian, info.WindowMax = s.cc.stats()
	info.LossEvents, info.RTT = s.cc.losses, s.cc.srtt
}

// round plans a send, sends it, waits for its ACK and takes the answer;
// done is set once the client acknowledged the last block.
func (s *sender) round() (done bool, err error) {
	s.gated = s.t.proof != nil && !s.t.proof.proven
	if err := s.plan(); err != nil {
		return false, err
	}
	if s.gated && !s.t.proof.spend(s.wireBytes()) {
		return false, errBudget
	}
	rto := s.timer()
	acked, why, err := s.sendAndWait(rto)
	if err != nil {
		return false, err
	}
	switch why {
	case ackTimeout:
		return false, s.onTimeout(rto)
	case ackRepeat:
		s.onRepeat()
		return false, nil
	default: // ackProgress
		return s.onAck(acked)
	}
}

// plan fills batch with what to send next: a tail-loss probe, or the
// round from base.
func (s *sender) plan() error {
	s.batch, s.seqs = s.batch[:0], s.seqs[:0]
	if s.flight.probe {
		return s.planProbe()
	}
	return s.planRound()
}

// planProbe sends one block: the block after next beyond all sent in
// order, where the window allows: every client sees a gap there, whatever
// it has. Else the next block, the last of the window: in order for a
// client that has all sent (it completes its count) and a gap for any
// other. Else the highest sent: the same for a full window. At the end,
// the last block: always acknowledged.
func (s *sender) planProbe() error {
	seq := min(s.sentMax+2, s.base+s.size-1)
	if seq < s.sentMax {
		seq = s.sentMax
	}
	p, err := s.w.packet(seq)
	if err != nil {
		return s.readErr(err)
	}
	if s.w.last != 0 && seq > s.w.last {
		seq = s.w.last
		p = s.w.pkts[seq%s.size]
	}
	s.add(p, seq)
	return nil
}

// planRound sends the blocks from base as many as the round takes, then
// the gap block when the round must end in one.
func (s *sender) planRound() error {
	n, gap := s.roundSize()
	r := &s.flight
	r.end = s.base + n - 1
	for seq := s.base; seq <= r.end; seq++ {
		p, err := s.w.packet(seq)
		if err != nil {
			return s.readErr(err)
		}
		s.add(p, seq)
		if seq == s.w.last {
			r.end = seq
		}
	}
	r.last = r.end
	if gap && r.end != s.w.last {
		if err := s.planGap(); err != nil {
			return err
		}
	}
	if s.adaptive {
		s.cc.sent(int(r.end-s.base+1), r.end == s.w.last && r.end-s.base+1 < int64(s.cc.window()))
	}
	if r.sends == 0 {
		r.firstEnd, r.undo = r.end, 0
	}
	return nil
}

// roundSize is how many blocks the round sends in order from base, and
// whether it ends in a gap: the proof's draw, else the effective window
// (a gap when it is below the negotiated one, or after a loss, and room
// is left for one), else the whole window.
func (s *sender) roundSize() (n int64, gap bool) {
	switch {
	case s.gated:
		if !s.flight.sized {
			s.t.proof.pick()
			s.flight.sized = true
		}
		return s.t.proof.c, true
	case s.adaptive:
		n = int64(s.cc.window())
		if s.size >= 3 && (n < s.size || s.needGap) {
			return min(n, s.size-2), true
		}
		return n, false
	}
	return s.size, false
}

// planGap ends the round in a gap: block end+2, so the client acknowledges
// end at once (adapt.go, proof.go). When end+1 is the file's last block
// there is no block after next: the round sends the last one instead, and
// needs no gap.
func (s *sender) planGap() error {
	r := &s.flight
	p, err := s.w.packet(r.end + 2)
	if err != nil {
		return s.readErr(err)
	}
	if s.w.last == r.end+1 {
		r.end++
		r.last = r.end
		p = s.w.pkts[r.end%s.size]
	} else {
		r.last = r.end + 2
	}
	s.add(p, r.last)
	return nil
}

func (s *sender) add(p []byte, seq int64) {
	s.batch, s.seqs = append(s.batch, p), append(s.seqs, seq)
}

// readErr tells the client the file could not be read and returns why.
func (s *sender) readErr(err error) error {
	_ = s.t.link.send(appendError(nil, errNotDefined, "server read error"))
	return fmt.Errorf("reading the file: %w", err)
}

// wireBytes is what batch costs on the wire, IPv4 and UDP headers
// included: what the proof's budget is charged.
func (s *sender) wireBytes() int64 {
	var n int64
	for _, p := range s.batch {
		n += int64(len(p) + 28)
	}
	return n
}

// timer is how long the send waits for its ACK: a round whose timeout
// sends a probe waits the probe timer, a probe or a proof round the
// retransmit timer, lock-step the negotiated timeout.
func (s *sender) timer() time.Duration {
	switch {
	case s.adaptive && !s.gated && !s.flight.probe:
		return s.cc.pto()
	case s.adaptive:
		return s.cc.rto()
	}
	return s.t.timeout
}

// sendAndWait sends batch and waits up to rto for an ACK the client may
// send: of any block it could have in order, from this send or an earlier
// one (in a proof round too: a round shrunk after a repeated ACK can end
// below what an earlier round sent, and the client has that).
func (s *sender) sendAndWait(rto time.Duration) (int64, ackKind, error) {
	err := s.t.link.sendBatch(s.batch)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		// An ICMP error from an earlier send: the client may have left
		// after acknowledging the last block, and its ACK may be waiting
		// behind the error.
		return s.t.awaitAck(s.base, s.sentMax, false, true, rto)
	case err != nil:
		return 0, 0, fmt.Errorf("sending blocks %d-%d: %w", uint16(s.base), uint16(s.flight.last), err)
	}
	s.sent()
	// Only an ACK of a block sent in order is honest: in a proof round a
	// higher one ends the transfer (onAck).
	top := max(s.flight.end, s.sentMax)
	if s.gated {
		top = max(s.flight.last, s.sentMax)
	}
	return s.t.awaitAck(s.base, top, s.repeatOK, false, rto)
}

// sent counts a send the kernel took (datagrams, resends) and moves
// sentMax up to every block now sent in order.
func (s *sender) sent() {
	r := &s.flight
	r.sentAt = time.Now()
	r.sends++
	s.t.info.Datagrams += int64(len(s.batch))
	for _, seq := range s.seqs {
		_, again := s.gaps[seq]
		if seq <= s.sentMax || again {
			s.t.info.Retransmits++
		} else if seq > r.end {
			s.gaps[seq] = struct{}{}
		}
	}
	if !r.probe && r.end > s.sentMax {
		s.sentMax = r.end
		for seq := range s.gaps {
			if seq <= s.sentMax {
				delete(s.gaps, seq)
			}
		}
	}
	// Gap blocks and probes can fill the blocks after sentMax: a client
	// may then have them all, in order.
	for {
		if _, ok := s.gaps[s.sentMax+1]; !ok {
			break
		}
		delete(s.gaps, s.sentMax+1)
		s.sentMax++
	}
}

// onTimeout takes a send that drew no ACK within rto: it counts against
// retries only when rto was at the ceiling; a round's first timeout sends
// a tail-loss probe (adapt.go), a later one resends from base.
func (s *sender) onTimeout(rto time.Duration) error {
	t, r := s.t, &s.flight
	t.info.Timeouts++
	if rto >= t.timeout { // the timer that fired was at the ceiling
		if s.attempt >= t.maxRetries() {
			return fmt.Errorf("blocks %d-%d: %w after %d sends %s apart",
				uint16(s.base), uint16(r.end), errNoAck, s.attempt+1, t.timeout)
		}
		s.attempt++
	}
	if !s.adaptive || s.gated || r.probe {
		// An RTO: it backs off. A probe timer does not (RFC 8985): the
		// probe then waits one RTO, not two (atftp leaves some probes
		// unanswered).
		s.cc.timedOut()
	}
	// After a timeout an ACK of base-1 says where the client is, whatever
	// was in flight before.
	s.repeatOK = s.size > 1
	if s.adaptive && !s.gated && !r.probe {
		// Probe the tail first; the next timeout goes back to base.
		r.probe = true
		return nil
	}
	// The round (or its probe) was lost: each such timeout is a loss
	// signal of its own, as in TCP.
	r.probe = false
	if s.adaptive {
		s.cc.lost(true, 0)
	}
	r.signalled, s.needGap = true, true
	return nil
}

// onRepeat takes a repeated ACK of base-1: the window's first block was
// lost. It is a loss signal once per round (undone if the round then
// turns out to have arrived whole), and a proof round starts over.
func (s *sender) onRepeat() {
	r := &s.flight
	s.t.hear()
	s.repeatOK, r.probe = false, false
	if s.gated {
		s.t.proof.miss()
		r.sized = false // a new round, a new size
	}
	if !r.signalled {
		r.undo = s.cc.cwnd
		s.cc.lost(false, 0)
		r.signalled = true
	}
	s.needGap = true
}

// onAck takes an ACK of block acked in the window: the proof and the
// congestion window judge it, the acknowledged bytes are credited, and the
// window moves on; it reports whether that was the last block.
func (s *sender) onAck(acked int64) (done bool, err error) {
	s.t.hear()
	if s.gated {
		if err := s.t.proof.judge(acked, s.flight.end, s.sentMax); err != nil {
			return false, err
		}
	}
	if s.adaptive && s.flight.sends == 1 && !s.flight.probe {
		// Karn: only a round sent once times the path.
		s.cc.sample(time.Since(s.flight.sentAt))
	}
	s.adapt(acked)
	s.cc.progress()
	s.credit(acked)
	if acked == s.w.last {
		return true, nil
	}
	s.next(acked)
	return false, nil
}

// adapt tells the congestion window what the ACK of acked says about the
// round (adapt.go).
func (s *sender) adapt(acked int64) {
	r, cc := &s.flight, s.cc
	switch {
	case r.undo > 0 && acked >= r.firstEnd:
		// The repeat was a duplicated ACK (Eifel-style undo).
		cc.cwnd, cc.losses = r.undo, cc.losses-1
		cc.acked()
		s.needGap = false
	case r.signalled:
	case acked >= r.end && r.probe && !cc.prompt(time.Since(r.sentAt)):
		// The probe was answered late: the client was away (descheduled
		// on a loaded host), not short of a block. Its ACK says nothing
		// about the window.
	case acked >= r.end && r.sends > 1:
		// The client had the round but said nothing until probed: its
		// tail (the gap block) was lost.
		cc.lost(true, int(r.end-s.base+1))
	case acked >= r.end:
		cc.acked()
		s.needGap = false
	default:
		// Short of the round: after a timeout (the probe found where the
		// client is) the tail was lost.
		cc.lost(r.sends > 1, int(acked-s.base+1))
		s.needGap = true
	}
}

// credit adds the payload of blocks base..acked to what the client
// acknowledged, for the event, the live view and the server's preempt.
func (s *sender) credit(acked int64) {
	t := s.t
	was := t.acked
	for seq := s.base; seq <= acked; seq++ {
		t.acked += int64(len(s.w.pkts[seq%s.size]) - 4)
	}
	t.live.Add(t.acked - was)
	if t.progress != nil {
		t.progress.Store(t.acked)
	}
}

// next starts the round after acked.
//
// A round sent more than once (resent, or probed) put blocks the client
// may already have in flight, and atftp answers each duplicate with an
// ACK of where it is: the block before the next round. Taken as a repeat,
// each would resend that whole round, whose duplicates draw more such
// ACKs, a loop a single spurious timeout could start. So after such a
// round a repeat is not answered until the timer fires (a timeout re-arms
// it); see tftp/DESIGN.md#adaptive-windows-and-timer-issue-16.
func (s *sender) next(acked int64) {
	s.base, s.attempt = acked+1, 0
	s.repeatOK = s.size > 1 && s.flight.sends <= 1
	s.flight = flight{}
}
