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
