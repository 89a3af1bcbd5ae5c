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
	"syscall"
	"time"

	"github.com/pin/tftp/v3/netascii"
	"github.com/pxeperf/pxeperf/event"
)

// link is the packet path of one transfer, to and from one client TID.
type link interface {
	send(b []byte) error
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
	stop func() bool
}

func (c *connLink) send(b []byte) error {
	_, err := c.conn.Write(b)
	return err
}

func (c *connLink) recv(b []byte, deadline time.Time) (int, error) {
	if err := c.conn.SetReadDeadline(deadline); err != nil {
		return 0, err
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
	case errors.As(err, &ce), errors.Is(err, errClientGone), errors.As(err, new(*newRequestError)):
		return event.OutcomeAborted
	default:
		return event.OutcomeError
	}
}

// transfer is one lock-step read transfer.
type transfer struct {
	link    link
	timeout time.Duration
	retries int
	info    *event.TFTPInfo // counters are written here
	req     []byte          // the request this transfer answers

	acked int64 // payload bytes the client acknowledged
	stray int64 // packets that were neither the awaited ACK nor an ERROR
	rbuf  [maxRequestLen]byte
}

// run sends the OACK (when options were accepted) and the file.
func (t *transfer) run(mode string, file io.Reader, neg negotiated) error {
	r := io.Reader(bufio.NewReaderSize(file, 64<<10))
	if mode == "netascii" {
		r = netascii.ToReader(r)
	}
	if len(neg.oack) > 0 {
		if err := t.exchange(appendOACK(nil, neg.oack), 0, false); err != nil {
			return fmt.Errorf("after OACK: %w", err)
		}
	}
	pkt := make([]byte, 4+neg.blockSize)
	binary.BigEndian.PutUint16(pkt, opDATA)
	for block := uint16(1); ; block++ { // wraps to 0 after 65535, as tftp-hpa does
		n, err := io.ReadFull(r, pkt[4:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			_ = t.link.send(appendError(nil, errNotDefined, "server read error"))
			return fmt.Errorf("reading the file: %w", err)
		}
		binary.BigEndian.PutUint16(pkt[2:], block)
		if err := t.exchange(pkt[:4+n], block, true); err != nil {
			return fmt.Errorf("block %d: %w", block, err)
		}
		t.acked += int64(n)
		if n < neg.blockSize {
			return nil
		}
	}
}

// exchange sends pkt until the client acknowledges block, resending after
// each timeout up to retries times. Old ACKs are ignored rather than
// answered, which avoids the Sorcerer's Apprentice bug (RFC 1123 4.2.3.1).
func (t *transfer) exchange(pkt []byte, block uint16, data bool) error {
	for attempt := 0; ; attempt++ {
		if err := t.link.send(pkt); err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				return errClientGone
			}
			return err
		}
		if data {
			t.info.Datagrams++
			if attempt > 0 {
				t.info.Retransmits++
			}
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
				return nil
			}
			// A duplicate ACK of an earlier block: keep waiting.
		}
		t.info.Timeouts++
		if attempt >= t.retries {
			return fmt.Errorf("%w after %d sends %s apart", errNoAck, attempt+1, t.timeout)
		}
	}
}
