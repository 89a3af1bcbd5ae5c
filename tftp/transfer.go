package tftp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pin/tftp/v3/netascii"
	"github.com/pxeperf/pxeperf/event"
	"golang.org/x/net/ipv4"
)

// link is the packet path of one transfer, to and from one client TID.
type link interface {
	send(b []byte) error
	// sendBatch sends packets in order, with as few system calls as it can.
	sendBatch(bs [][]byte) error
	// recv waits until deadline for one packet from the client; a timeout
	// is os.ErrDeadlineExceeded.
	recv(b []byte, deadline time.Time) (int, error)
	close()
}

// connLink is a socket of its own, connected to the client: the kernel
// drops packets from other TIDs, and an ICMP port unreachable (client gone)
// comes back as ECONNREFUSED.
type connLink struct {
	conn *net.UDPConn
	pc   *ipv4.PacketConn // for sendmmsg; nil: one write per packet
	msgs []ipv4.Message
	stop func() bool

	deadline time.Time // the read deadline set last
}

func (c *connLink) send(b []byte) error {
	_, err := c.conn.Write(b)
	return err
}

func (c *connLink) sendBatch(bs [][]byte) error {
	if len(bs) == 1 || c.pc == nil {
		for _, b := range bs {
			if _, err := c.conn.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	// sendmmsg: one system call for up to a window of blocks.
	for len(c.msgs) < len(bs) {
		c.msgs = append(c.msgs, ipv4.Message{Buffers: make([][]byte, 1)})
	}
	msgs := c.msgs[:len(bs)]
	for i, b := range bs {
		msgs[i].Buffers[0] = b
	}
	for len(msgs) > 0 {
		n, err := c.pc.WriteBatch(msgs, 0)
		if err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

func (c *connLink) recv(b []byte, deadline time.Time) (int, error) {
	if !deadline.Equal(c.deadline) { // a window's ACKs share one deadline
		if err := c.conn.SetReadDeadline(deadline); err != nil {
			return 0, err
		}
		c.deadline = deadline
	}
	return c.conn.Read(b)
}

func (c *connLink) close() {
	c.stop()
	c.conn.Close() // a second Close only returns an error
}

// clientError is an ERROR packet the client sent: it stopped the transfer.
type clientError struct {
	code uint16
	msg  string
}

func (e *clientError) Error() string {
	return fmt.Sprintf("client sent error %d %q", e.code, e.msg)
}

// newRequestError is a different request from the client's address,
// arriving at this transfer's socket (single-port mode): the client gave up
// on this transfer and started another.
type newRequestError struct{ pkt []byte }

func (e *newRequestError) Error() string {
	return "client sent a new request instead of an acknowledgement"
}

// errClientGone is an ICMP port unreachable from the client.
var errClientGone = errors.New("client port unreachable: the client stopped listening")

// errNoAck is a packet left unacknowledged after every retry.
var errNoAck = errors.New("no acknowledgement")

// outcomeOf classifies how a transfer ended.
func outcomeOf(err error) string {
	var ce *clientError
	switch {
	case err == nil:
		return event.OutcomeOK
	case errors.As(err, &ce), errors.Is(err, errClientGone), errors.As(err, new(*newRequestError)),
		errors.Is(err, errReplaced):
		return event.OutcomeAborted
	default:
		return event.OutcomeError
	}
}

// transfer is one read transfer: lock-step (RFC 1350) or windowed (RFC
// 7440), one loop for both.
type transfer struct {
	link    link
	timeout time.Duration
	minRTO  time.Duration // the adaptive timer's floor; 0: defaultMinRTO
	oackRTT time.Duration // the OACK's round trip when it was sent once; 0: none
	retries int
	info    *event.TFTPInfo // counters are written here
	req     []byte          // the request this transfer answers
	proof   *proof          // single-port windowed transfers: see proof.go
	heard   bool            // the client has acknowledged something
	onHeard func()          // called once when heard is set; nil: none

	acked    int64           // payload bytes the client acknowledged
	progress *atomic.Int64   // acked for the server's preempt; nil: none
	live     *event.Transfer // the live view's entry; nil: none
	stray    int64           // packets that were neither an ACK nor an ERROR
	rbuf     [maxRequestLen]byte
}

// firstResends is how often the first reply (OACK or DATA 1) is sent again
// before the client acknowledged anything. A forged request draws the reply
// to a victim, so each resend multiplies the gain; a real client whose reply
// was lost sends its request again, which starts a new transfer once this
// one has given up.
const firstResends = 1

// hear notes that the client acknowledged something.
func (t *transfer) hear() {
	if !t.heard {
		t.heard = true
		if t.onHeard != nil {
			t.onHeard()
		}
	}
}

// maxRetries is how many resends in a row are allowed now.
func (t *transfer) maxRetries() int {
	if t.heard {
		return t.retries
	}
	return min(t.retries, firstResends)
}

// run sends the OACK (when options were accepted) and the file.
//
// The file's read buffer (64 KiB) is taken once the OACK is acknowledged:
// a forged request's transfer, whose reply nobody acknowledges, holds
// none of it.
func (t *transfer) run(mode string, file io.Reader, neg negotiated) error {
	if len(neg.oack) > 0 {
		start, timeouts := time.Now(), t.info.Timeouts
		if err := t.exchange(appendOACK(nil, neg.oack), 0); err != nil {
			return fmt.Errorf("after OACK: %w", err)
		}
		if t.info.Timeouts == timeouts { // Karn: not when resent
			t.oackRTT = time.Since(start)
		}
	}
	r := io.Reader(bufio.NewReaderSize(file, 64<<10))
	if mode == "netascii" {
		r = netascii.ToReader(r)
	}
	return t.sendFile(newWindow(r, neg.blockSize, neg.windowSize))
}

// window holds the DATA packets the client has not acknowledged yet, so
// any of them can be sent again. Blocks are numbered from 1 by seq (int64);
// the 16-bit block number on the wire is seq mod 65536, so it wraps from
// 65535 to 0 as tftp-hpa, atftpd and U-Boot expect.
type window struct {
	r    io.Reader
	blk  int
	pkts [][]byte // ring of len(pkts) slots, seq s in slot s % len(pkts)
	read int64    // highest seq read from r
	last int64    // seq of the final (short) block, 0 until it is read
}

func newWindow(r io.Reader, blockSize, size int) *window {
	return &window{r: r, blk: blockSize, pkts: make([][]byte, size)}
}

// packet returns DATA block seq, reading the file up to it. seq must be at
// most one window past the oldest block still needed.
func (w *window) packet(seq int64) ([]byte, error) {
	for w.read < seq && w.last == 0 {
		i := (w.read + 1) % int64(len(w.pkts))
		p := w.pkts[i]
		if p == nil {
			p = make([]byte, 4+w.blk)
			w.pkts[i] = p
		}
		p = p[:4+w.blk]
		n, err := io.ReadFull(w.r, p[4:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, err
		}
		w.read++
		binary.BigEndian.PutUint16(p, opDATA)
		binary.BigEndian.PutUint16(p[2:], uint16(w.read))
		w.pkts[i] = p[:4+n]
		if n < w.blk {
			w.last = w.read
		}
	}
	return w.pkts[seq%int64(len(w.pkts))], nil
}

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
	size := int64(len(w.pkts))
	// Lock-step (RFC 1350) keeps the negotiated timeout: old PXE ROMs that
	// ask for no window are slow and uneven, and each ACK there releases one
	// block anyway. Windowed transfers adapt (adapt.go).
	adaptive := size > 1
	cc := newCongestion(int(size), t.timeout, t.minRTO)
	if adaptive {
		cc.seed(t.oackRTT)
	}
	defer func() {
		t.info.WindowMin, t.info.WindowMedian, t.info.WindowMax = cc.stats()
		t.info.LossEvents, t.info.RTT = cc.losses, cc.srtt
	}()
	base := int64(1) // oldest block not acknowledged
	var (
		sentMax int64                  // every block up to it was sent at least once
		gaps    = map[int64]struct{}{} // gap blocks sent above sentMax
		// The round: blocks base..end in order, then maybe a gap block;
		// top is the highest block an ACK may name, want the ACK that
		// completes it.
		end, top, want, last int64  // last: the highest block sent in the round
		sends                int    // sends of the round (the first, resends, probes)
		signalled            bool   // the round's loss was signalled to cc
		needGap              bool   // the client's ACK counter may be out of step: end rounds in a gap
		probe                bool   // the next send is a tail-loss probe
		pick                 = true // gated: draw the round's size
		sentAt               time.Time
		// A repeated ACK shrank the window: undo, to the cwnd saved, if
		// an ACK then covers the round's first send up to firstEnd (the
		// client had it all: the repeat was a duplicate, not a loss).
		undo     float64
		firstEnd int64
	)
	repeatOK := size > 1 // a repeated ACK of base-1 may be answered
	batch := make([][]byte, 0, size)
	seqs := make([]int64, 0, size)
	readErr := func(err error) error {
		_ = t.link.send(appendError(nil, errNotDefined, "server read error"))
		return fmt.Errorf("reading the file: %w", err)
	}
	for attempt := 0; ; {
		batch, seqs = batch[:0], seqs[:0]
		gated := t.proof != nil && !t.proof.proven
		if probe {
			// The block after next beyond all sent in order, where the
			// window allows: every client sees a gap there, whatever it
			// has. Else the next block, the last of the window: in order
			// for a client that has all sent (it completes its count) and
			// a gap for any other. Else the highest sent: the same for a
			// full window. At the end, the last block: always
			// acknowledged.
			seq := min(sentMax+2, base+size-1)
			if seq < sentMax {
				seq = sentMax
			}
			p, err := w.packet(seq)
			if err != nil {
				return readErr(err)
			}
			if w.last != 0 && seq > w.last {
				seq = w.last
				p = w.pkts[seq%size]
			}
			batch, seqs = append(batch, p), append(seqs, seq)
		} else {
			n, gap := size, false
			switch {
			case gated:
				if pick {
					t.proof.pick()
					pick = false
				}
				n, gap = t.proof.c, true
			case adaptive:
				n = int64(cc.window())
				if size >= 3 && (n < size || needGap) {
					n, gap = min(n, size-2), true
				}
			}
			end = base + n - 1
			for seq := base; seq <= end; seq++ {
				p, err := w.packet(seq)
				if err != nil {
					return readErr(err)
				}
				batch, seqs = append(batch, p), append(seqs, seq)
				if seq == w.last {
					end = seq
				}
			}
			last, top, want = end, end, end
			if gap && end != w.last {
				// The round ends in a gap: block end+2, so the client
				// acknowledges end at once (adapt.go, proof.go).
				p, err := w.packet(end + 2)
				if err != nil {
					return readErr(err)
				}
				if w.last == end+1 {
					// No block after next: send the last one, no gap needed.
					end++
					last, top, want = end, end, end
					p = w.pkts[end%size]
				} else {
					last = end + 2
				}
				batch, seqs = append(batch, p), append(seqs, last)
			}
			// Only an ACK of a block sent in order is honest: in a
			// proof round a higher one ends the transfer below.
			top = last
			if adaptive {
				cc.sent(int(end-base+1), end == w.last && end-base+1 < int64(cc.window()))
			}
			if sends == 0 {
				firstEnd, undo = end, 0
			}
		}
		if gated {
			var n int64
			for _, p := range batch {
				n += int64(len(p) + 28)
			}
			if !t.proof.spend(n) {
				return errBudget
			}
		}
		rto := t.timeout
		switch {
		case adaptive && !gated && !probe:
			rto = cc.pto() // its timeout sends a probe
		case adaptive:
			rto = cc.rto()
		}
		var (
			acked int64
			why   ackKind
		)
		if err := t.link.sendBatch(batch); errors.Is(err, syscall.ECONNREFUSED) {
			// An ICMP error from an earlier send: the client may have
			// left after acknowledging the last block, and its ACK may be
			// waiting behind the error.
			if acked, why, err = t.awaitAck(base, sentMax, false, true, rto); err != nil {
				return err
			}
		} else if err != nil {
			return fmt.Errorf("sending blocks %d-%d: %w", uint16(base), uint16(last), err)
		} else {
			sentAt = time.Now()
			sends++
			t.info.Datagrams += int64(len(batch))
			for _, seq := range seqs {
				_, again := gaps[seq]
				if seq <= sentMax || again {
					t.info.Retransmits++
				} else if seq > end {
					gaps[seq] = struct{}{}
				}
			}
			if !probe && end > sentMax {
				sentMax = end
				for seq := range gaps {
					if seq <= sentMax {
						delete(gaps, seq)
					}
				}
			}
			// Gap blocks and probes can fill the blocks after sentMax:
			// a client may then have them all, in order.
			for {
				if _, ok := gaps[sentMax+1]; !ok {
					break
				}
				delete(gaps, sentMax+1)
				sentMax++
			}
			// The client may ACK any block it could have in order, from
			// this send or an earlier one (in a proof round too: a round
			// shrunk after a repeated ACK can end below what an earlier
			// round sent, and the client has that).
			if gated {
				top = max(last, sentMax)
			} else {
				top = max(end, sentMax)
			}
			if acked, why, err = t.awaitAck(base, top, repeatOK, false, rto); err != nil {
				return err
			}
		}
		switch why {
		case ackTimeout:
			t.info.Timeouts++
			if rto >= t.timeout { // the timer that fired was at the ceiling
				if attempt >= t.maxRetries() {
					return fmt.Errorf("blocks %d-%d: %w after %d sends %s apart",
						uint16(base), uint16(end), errNoAck, attempt+1, t.timeout)
				}
				attempt++
			}
			if !adaptive || gated || probe {
				// An RTO: it backs off. A probe timer does not (RFC
				// 8985): the probe then waits one RTO, not two (atftp
				// leaves some probes unanswered).
				cc.timedOut()
			}
			// After a timeout an ACK of base-1 says where the client
			// is, whatever was in flight before.
			repeatOK = size > 1
			switch {
			case adaptive && !gated && !probe:
				// Probe the tail first (adapt.go); the next timeout
				// goes back to base.
				probe = true
			default:
				// The round (or its probe) was lost: each such timeout
				// is a loss signal of its own, as in TCP.
				probe = false
				if adaptive {
					cc.lost(true, 0)
				}
				signalled, needGap = true, true
			}
		case ackRepeat:
			t.hear()
			repeatOK, probe = false, false
			if gated {
				t.proof.miss()
				pick = true // a new round, a new size
			}
			if !signalled {
				undo = cc.cwnd
				cc.lost(false, 0)
				signalled = true
			}
			needGap = true
		case ackProgress:
			t.hear()
			if gated {
				switch {
				case acked > end && acked > sentMax:
					return fmt.Errorf("%w: block %d", errUnproven, uint16(acked))
				case acked == end:
					t.proof.hit()
				default:
					t.proof.miss()
				}
			}
			if adaptive && sends == 1 && !probe {
				// Karn: only a round sent once times the path.
				cc.sample(time.Since(sentAt))
			}
			switch {
			case undo > 0 && acked >= firstEnd:
				// The repeat was a duplicated ACK (Eifel-style undo).
				cc.cwnd, cc.losses = undo, cc.losses-1
				cc.acked()
				needGap = false
			case signalled:
			case acked >= want && probe && !cc.prompt(time.Since(sentAt)):
				// The probe was answered late: the client was away
				// (descheduled on a loaded host), not short of a block.
				// Its ACK says nothing about the window.
			case acked >= want && sends > 1:
				// The client had the round but said nothing until
				// probed: its tail (the gap block) was lost.
				cc.lost(true, int(end-base+1))
			case acked >= want:
				cc.acked()
				needGap = false
			default:
				// Short of the round: after a timeout (the probe
				// found where the client is) the tail was lost.
				cc.lost(sends > 1, int(acked-base+1))
				needGap = true
			}
			cc.progress()
			was := t.acked
			for seq := base; seq <= acked; seq++ {
				t.acked += int64(len(w.pkts[seq%size]) - 4)
			}
			t.live.Add(t.acked - was)
			if t.progress != nil {
				t.progress.Store(t.acked)
			}
			if acked == w.last {
				return nil
			}
			// A round sent more than once (resent, or probed) put
			// blocks the client may already have in flight, and atftp
			// answers each duplicate with an ACK of where it is: the
			// block before the next round. Taken as a repeat, each
			// would resend that whole round, whose duplicates draw
			// more such ACKs: a loop that resent most of a clean
			// transfer once a single spurious timeout started it. So
			// after such a round a repeat is not answered until the
			// timer fires (a timeout re-arms it).
			base, attempt, repeatOK = acked+1, 0, size > 1 && sends <= 1
			sends, signalled, probe, pick = 0, false, false, true
		}
	}
}

// ackKind is what awaitAck saw.
type ackKind int

const (
	ackProgress ackKind = iota // an ACK of a block in the window
	ackRepeat                  // the ACK of the block before the window, again
	ackTimeout
)

// drainWait is how long to read what is queued after an ICMP error (a
// deadline already past would not even read a queued datagram).
const drainWait = 20 * time.Millisecond

// awaitAck waits up to timeout for an ACK of a block in base..end and
// returns its seq (ackProgress), or an ACK of base-1 when repeat is set
// (ackRepeat), or a timeout. Other ACKs are skipped.
//
// Linux reports an ICMP port unreachable (ECONNREFUSED) before datagrams
// already queued, so the client's last ACK can be waiting behind it: after
// one (or with refused set), awaitAck only reads what is queued (for
// drainWait) and then returns errClientGone.
func (t *transfer) awaitAck(base, end int64, repeat, refused bool, timeout time.Duration) (int64, ackKind, error) {
	deadline := time.Now().Add(timeout)
	if refused {
		deadline = time.Now().Add(drainWait)
	}
	for {
		n, err := t.link.recv(t.rbuf[:], deadline)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if refused {
				return 0, 0, errClientGone
			}
			return 0, ackTimeout, nil
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			refused, deadline = true, time.Now().Add(drainWait)
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		rep, err := parseReply(t.rbuf[:n])
		if err != nil {
			if isRequest(t.rbuf[:n]) && !bytes.Equal(t.rbuf[:n], t.req) {
				return 0, 0, &newRequestError{pkt: append([]byte(nil), t.rbuf[:n]...)}
			}
			t.stray++ // includes resends of our own request
			continue
		}
		if rep.op == opERROR {
			return 0, 0, &clientError{code: rep.code, msg: rep.msg}
		}
		// The seq in base-1..end whose block number is rep.block; the
		// window is under half the number space, so there is one at most.
		seq := base - 1 + int64(rep.block-uint16(base-1))
		switch {
		case seq >= base && seq <= end:
			return seq, ackProgress, nil
		case seq == base-1 && repeat && !refused:
			return seq, ackRepeat, nil
		}
		// Stale, or a duplicate already answered: the client had it.
	}
}

// exchange sends pkt (the OACK) until the client acknowledges block,
// resending after each timeout up to retries times. Old ACKs are ignored rather than
// answered, which avoids the Sorcerer's Apprentice bug (RFC 1123 4.2.3.1).
func (t *transfer) exchange(pkt []byte, block uint16) error {
	for attempt := 0; ; attempt++ {
		if err := t.link.send(pkt); err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				return errClientGone
			}
			return err
		}
		deadline := time.Now().Add(t.timeout)
		for {
			n, err := t.link.recv(t.rbuf[:], deadline)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				return errClientGone
			}
			if err != nil {
				return err
			}
			rep, err := parseReply(t.rbuf[:n])
			if err != nil {
				if isRequest(t.rbuf[:n]) && !bytes.Equal(t.rbuf[:n], t.req) {
					return &newRequestError{pkt: append([]byte(nil), t.rbuf[:n]...)}
				}
				t.stray++ // includes resends of our own request
				continue
			}
			if rep.op == opERROR {
				return &clientError{code: rep.code, msg: rep.msg}
			}
			if rep.block == block {
				t.hear()
				return nil
			}
			// A duplicate ACK of an earlier block: keep waiting.
		}
		t.info.Timeouts++
		if attempt >= t.maxRetries() {
			return fmt.Errorf("%w after %d sends %s apart", errNoAck, attempt+1, t.timeout)
		}
	}
}
