// The TFTP read client (Get): RFC 1350 with the
// option extension (RFC 2347) for blksize (RFC 2348), tsize and timeout
// (RFC 2349) and windowsize (RFC 7440). It plays the board's part in
// `pxeperf bench --proto tftp`, the way U-Boot's and iPXE's windowed TFTP
// clients behave:
//
//   - it acknowledges the last block of each window (or the last block of
//     the file);
//   - on a gap (a block ahead of the one awaited) it acknowledges the last
//     in-order block at once, once per gap, so the server restarts at the
//     lost block without waiting for a timeout (RFC 7440 section 4);
//   - a duplicate block makes it send its last ACK again, once, in case
//     that ACK was lost;
//   - after a timeout it sends its last ACK (or the request) again, up to
//     ClientOptions.Retries times in a row;
//   - block numbers wrap at 65535 (to 0, as pxeperf's server, U-Boot and
//     tftp-hpa do), so files of any size go through.
//
// It counts what it saw on the wire (ClientStats): DATA datagrams, duplicate and
// out-of-order blocks, ACKs, early ACKs and timeouts. Packets it cannot
// parse, or from a stranger, are dropped and counted, never a panic. It
// shares the packet codec with the server (packet.go), and its fault hooks
// (ClientOptions.Fault, DupACK, StaleACK, QuietDuplicates,
// RecountAfterTimeout) lose, reorder and duplicate packets on purpose for
// tests, or act as a client that can stall a windowed sender.

package tftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"
)

// Limits of the options (RFC 2348, RFC 7440, RFC 2349).
const (
	MinBlkSize    = 8
	MaxBlkSize    = 65464
	MinWindowSize = 1
	MaxWindowSize = 65535
)

// ClientTimeout is how long the client waits for the next packet before
// it sends its last ACK again, when ClientOptions.Timeout is 0.
const ClientTimeout = time.Second

// ClientRetries is how many timeouts in a row end a fetch, when
// ClientOptions.Retries is 0.
const ClientRetries = 5

// ClientOptions of one fetch.
type ClientOptions struct {
	// BlkSize is the blksize asked for (8..65464); 0: not asked (512).
	BlkSize int
	// WindowSize is the windowsize asked for (1..65535); 0: not asked
	// (lock-step, one block per ACK).
	WindowSize int
	// NoTSize leaves out the tsize option (asked by default, as firmware
	// does, so the client can check the size it got).
	NoTSize bool
	// Timeout is the client's wait before sending its last ACK again; when
	// it is a whole number of seconds (1..255) it is also asked of the
	// server with the timeout option. Default ClientTimeout, not asked.
	Timeout time.Duration
	// Retries is how many timeouts in a row end the fetch. Default
	// ClientRetries.
	Retries int
	Logger  *slog.Logger // debug lines for dropped packets; default discard

	// Fault, when set, picks the fate of the n-th DATA datagram to arrive
	// (from 0) carrying block sequence number seq (from 1, not wrapped):
	// tests lose, reorder and duplicate DATA with it. nil: deliver all.
	Fault func(n int, seq int64) Fault
	// DupACK sends every ACK twice; StaleACK sends, after each ACK, the
	// ACK before it again (an ACK overtaken by the next one).
	DupACK, StaleACK bool
	// QuietDuplicates: a duplicate block draws no ACK (by default the
	// last ACK is sent again, once, in case it was lost).
	QuietDuplicates bool
	// RecountAfterTimeout: after a timeout the client counts the window
	// afresh from the ACK it sent again. With QuietDuplicates it is a
	// client that can stall a windowed sender without a tail probe (RFC
	// 7440 allows it); tests prove the server still finishes.
	RecountAfterTimeout bool
}

// Fault is what the client does with one arriving DATA datagram
// (ClientOptions.Fault).
type Fault int

// Faults.
const (
	Deliver Fault = iota
	Drop          // lose it
	Hold          // deliver it after the next datagram (reordering)
	Twice         // deliver it twice (duplication)
)

// faultReader reads the client's socket, applying ClientOptions.Fault.
type faultReader struct {
	conn  *net.UDPConn
	fault func(n int, seq int64) Fault
	next  *int64 // the block sequence awaited
	n     int
	queue []heldPacket
	held  *heldPacket
}

type heldPacket struct {
	b    []byte
	from netip.AddrPort
}

func (r *faultReader) read(buf []byte) (int, netip.AddrPort, error) {
	for {
		if len(r.queue) > 0 {
			q := r.queue[0]
			r.queue = r.queue[1:]
			return copy(buf, q.b), q.from, nil
		}
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if r.fault == nil {
			return n, from, err
		}
		if err != nil {
			if h := r.held; h != nil && errors.Is(err, os.ErrDeadlineExceeded) {
				r.held = nil // nothing came after it: deliver it late
				return copy(buf, h.b), h.from, nil
			}
			return n, from, err
		}
		if n < 4 || binary.BigEndian.Uint16(buf) != opDATA {
			return n, from, nil
		}
		block := binary.BigEndian.Uint16(buf[2:])
		seq := *r.next + int64(int16(block-uint16(*r.next)))
		f := r.fault(r.n, seq)
		r.n++
		pkt := heldPacket{b: append([]byte(nil), buf[:n]...), from: from}
		switch f {
		case Drop:
			continue
		case Hold:
			if r.held != nil {
				r.queue = append(r.queue, *r.held)
			}
			r.held = &pkt
			continue
		case Twice:
			r.queue = append(r.queue, pkt)
		}
		if r.held != nil {
			r.queue = append(r.queue, *r.held)
			r.held = nil
		}
		return n, from, nil
	}
}

// ClientStats is what one fetch negotiated and counted.
type ClientStats struct {
	BlkSize    int   // negotiated (512 without the option)
	WindowSize int   // negotiated (1 without the option)
	TSize      int64 // the size the server announced; -1: none
	OACK       bool  // the server acknowledged options
	Bytes      int64 // payload written, in order
	Blocks     int64 // blocks accepted (in order)
	Datagrams  int64 // DATA datagrams received, duplicates and out-of-order included
	Duplicates int64 // DATA for a block already accepted
	OutOfOrder int64 // DATA ahead of the block awaited (a gap before it)
	ACKs       int64 // ACKs sent, resends included
	EarlyACKs  int64 // ACKs sent at once on a gap
	Timeouts   int64
	Malformed  int64 // packets that did not parse (dropped)
	Strangers  int64 // packets from another address or port (answered with error 5, dropped)
	// Start is when the request left; Duration runs from then to the last
	// block.
	Start    time.Time
	Duration time.Duration
}

// Mbps is the payload throughput of the fetch in Mbit/s (0 without a
// duration).
func (s ClientStats) Mbps() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.Bytes) * 8 / s.Duration.Seconds() / 1e6
}

// ServerError is an ERROR packet the server sent.
type ServerError struct {
	Code uint16
	Msg  string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("tftp: server error %d: %s", e.Code, e.Msg)
}

// ErrTimeout is returned (wrapped) when ClientOptions.Retries timeouts in a row
// passed without a packet from the server.
var ErrTimeout = errors.New("tftp: no answer from the server")

func (o ClientOptions) validate() error {
	var errs []error
	if o.BlkSize != 0 && (o.BlkSize < MinBlkSize || o.BlkSize > MaxBlkSize) {
		errs = append(errs, fmt.Errorf("blksize %d: out of range %d..%d (RFC 2348), or 0 for 512 without the option", o.BlkSize, MinBlkSize, MaxBlkSize))
	}
	if o.WindowSize != 0 && (o.WindowSize < MinWindowSize || o.WindowSize > MaxWindowSize) {
		errs = append(errs, fmt.Errorf("windowsize %d: out of range %d..%d (RFC 7440), or 0 for lock-step without the option", o.WindowSize, MinWindowSize, MaxWindowSize))
	}
	if o.Timeout < 0 || o.Retries < 0 {
		errs = append(errs, errors.New("timeout and retries must not be negative"))
	}
	return errors.Join(errs...)
}

// Get reads file from the TFTP server at server through conn (an unbound or
// bound UDP socket the caller owns, e.g. opened inside a namespace) and
// writes its bytes to w in order. It returns the counts also on error. The
// server may answer from another port (its transfer ID, RFC 1350); only
// that address is listened to afterwards.
func Get(ctx context.Context, conn *net.UDPConn, server netip.AddrPort, file string, w io.Writer, opt ClientOptions) (ClientStats, error) {
	st := ClientStats{BlkSize: 512, WindowSize: 1, TSize: -1}
	if err := opt.validate(); err != nil {
		return st, fmt.Errorf("tftp: %w", err)
	}
	c := newFetch(ctx, conn, server, file, w, opt, &st)
	// Ctrl-C or a deadline ends a blocked read at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	defer stop()
	st.Start = time.Now()
	if _, err := conn.WriteToUDPAddrPort(c.rrq, server); err != nil {
		return st, fmt.Errorf("tftp: sending the request to %s: %w", server, err)
	}
	for {
		if done, err := c.receive(); done || err != nil {
			return st, err
		}
	}
}

// fetch is one Get: the request, then a receive loop whose steps are a
// timeout (onTimeout), the OACK (onOACK) and each DATA (onData), which
// acknowledges each window (ackWindow) and ends on the last block
// (finish).
type fetch struct {
	ctx    context.Context
	conn   *net.UDPConn
	server netip.AddrPort
	file   string
	w      io.Writer
	opt    ClientOptions
	st     *ClientStats
	log    *slog.Logger

	timeout time.Duration // the wait for each packet
	retries int           // timeouts in a row that end the fetch
	rrq     []byte        // the request, sent again after a timeout until the server answers
	rd      *faultReader
	buf     []byte // the datagram read
	out     []byte // the ACK sent

	peer     netip.AddrPort // the server's transfer ID, once known
	next     int64          // sequence number of the block awaited (not wrapped)
	inWindow int            // in-order blocks since the last ACK
	lastACK  int64          // sequence number last acknowledged; -1: none yet
	nacked   int64          // the block an early ACK already asked for
	reACKed  bool           // the last ACK was resent for a duplicate
	misses   int            // timeouts in a row
	prevACK  int64          // the ACK before the last, for ClientOptions.StaleACK
}

// newFetch fills opt's defaults and builds the request with its options.
func newFetch(ctx context.Context, conn *net.UDPConn, server netip.AddrPort, file string, w io.Writer, opt ClientOptions, st *ClientStats) *fetch {
	c := &fetch{ctx: ctx, conn: conn, server: server, file: file, w: w, opt: opt, st: st, log: opt.Logger,
		timeout: opt.Timeout, retries: opt.Retries, buf: make([]byte, 65536+4),
		next: 1, lastACK: -1, nacked: -1, prevACK: -1}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.timeout == 0 {
		c.timeout = ClientTimeout
	}
	if c.retries == 0 {
		c.retries = ClientRetries
	}
	c.rrq = appendRRQ(nil, file, c.requestOptions()...)
	c.rd = &faultReader{conn: conn, fault: opt.Fault, next: &c.next}
	return c
}

// requestOptions are the options the request asks for: blksize and
// windowsize when set, tsize unless NoTSize, timeout when Timeout is a
// whole number of seconds the option can carry.
func (c *fetch) requestOptions() []string {
	var opts []string
	if c.opt.BlkSize > 0 {
		opts = append(opts, "blksize", strconv.Itoa(c.opt.BlkSize))
	}
	if c.opt.WindowSize > 0 {
		opts = append(opts, "windowsize", strconv.Itoa(c.opt.WindowSize))
	}
	if !c.opt.NoTSize {
		opts = append(opts, "tsize", "0")
	}
	if s := c.timeout / time.Second; c.timeout%time.Second == 0 && s >= 1 && s <= 255 && c.opt.Timeout != 0 {
		opts = append(opts, "timeout", strconv.Itoa(int(s)))
	}
	return opts
}

// receive waits for the next packet from the server and takes it: done is
// true once the file is complete.
func (c *fetch) receive() (done bool, err error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	// After setting the deadline: had ctx ended before, the deadline
	// AfterFunc set was just overwritten.
	if c.ctx.Err() != nil {
		return false, c.stopped()
	}
	n, from, err := c.rd.read(c.buf)
	if err != nil {
		return false, c.onTimeout(err)
	}
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	if !c.fromServer(from) {
		c.stranger(from)
		return false, nil
	}
	p, err := parseServerPacket(c.buf[:n])
	if err != nil {
		c.st.Malformed++
		c.log.Debug("tftp client: dropped a packet", "from", from, "err", err)
		return false, nil
	}
	switch p.op {
	case opERROR:
		return false, &ServerError{Code: p.code, Msg: p.msg}
	case opOACK:
		return false, c.onOACK(p, from)
	}
	return c.onData(p, from)
}

// fromServer reports whether from may send this fetch packets: before the
// server answered, any port of the server's address (any address when
// server names none); afterwards only its transfer ID.
func (c *fetch) fromServer(from netip.AddrPort) bool {
	if c.peer.IsValid() {
		return from == c.peer
	}
	a := c.server.Addr()
	return !a.IsValid() || a.IsUnspecified() || from.Addr() == a.Unmap()
}

// onTimeout takes a failed read: ctx ended, a read error, or a timeout,
// after which the request (before the server answered) or the last ACK is
// sent again, up to retries in a row.
func (c *fetch) onTimeout(err error) error {
	if c.ctx.Err() != nil {
		return c.stopped()
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("tftp: reading: %w", err)
	}
	c.st.Timeouts++
	c.misses++
	if c.misses > c.retries {
		if c.peer.IsValid() {
			_, _ = c.conn.WriteToUDPAddrPort(appendError(nil, 0, "timed out"), c.peer)
		}
		return fmt.Errorf("%w: %d timeouts of %v in a row awaiting block %d of %s", ErrTimeout, c.misses-1, c.timeout, c.next, c.file)
	}
	if !c.peer.IsValid() {
		if _, err := c.conn.WriteToUDPAddrPort(c.rrq, c.server); err != nil {
			return fmt.Errorf("tftp: sending the request again: %w", err)
		}
		return nil
	}
	if c.opt.RecountAfterTimeout {
		c.inWindow = 0
	}
	return c.ack(c.lastACK)
}

// stopped ends a fetch whose ctx ended, telling the server.
func (c *fetch) stopped() error {
	if c.peer.IsValid() { // tell the server, so it ends the transfer now
		_, _ = c.conn.WriteToUDPAddrPort(appendError(nil, 0, "transfer cancelled"), c.peer)
	}
	return fmt.Errorf("tftp: %s stopped at block %d: %w", c.file, c.next, context.Cause(c.ctx))
}

// onOACK takes the server's first OACK (its options, then ACK 0); a second
// one means ACK 0 was lost, and draws it again.
func (c *fetch) onOACK(p packet, from netip.AddrPort) error {
	if c.peer.IsValid() {
		if c.lastACK == 0 {
			c.misses = 0
			return c.ack(0)
		}
		return nil
	}
	c.peer = from
	c.misses = 0
	if err := c.takeOptions(p.opts, c.opt); err != nil {
		_, _ = c.conn.WriteToUDPAddrPort(appendError(nil, 8, err.Error()), c.peer)
		return err
	}
	return c.sendACK(0)
}

// onData takes a DATA packet: a duplicate or a block ahead of the one
// awaited draws at most one ACK; the block awaited is written, and the
// window's last block or the file's is acknowledged.
func (c *fetch) onData(p packet, from netip.AddrPort) (done bool, err error) {
	if !c.peer.IsValid() {
		c.peer = from // no OACK: the server ignored the options
	}
	c.misses = 0
	c.st.Datagrams++
	switch d := int16(p.block - uint16(c.next)); {
	case d < 0:
		return false, c.onDuplicate()
	case d > 0:
		return false, c.onGap()
	}
	if len(p.payload) > c.st.BlkSize {
		c.st.Malformed++
		c.log.Debug("tftp client: dropped an oversized block", "block", p.block, "bytes", len(p.payload), "blksize", c.st.BlkSize)
		return false, nil
	}
	if _, err := c.w.Write(p.payload); err != nil {
		_, _ = c.conn.WriteToUDPAddrPort(appendError(nil, 0, "write failed"), c.peer)
		return false, fmt.Errorf("tftp: writing block %d: %w", c.next, err)
	}
	c.st.Bytes += int64(len(p.payload))
	c.st.Blocks++
	last := len(p.payload) < c.st.BlkSize
	if err := c.ackWindow(last); err != nil {
		return false, err
	}
	c.next++
	if last {
		return true, c.finish()
	}
	return false, nil
}

// onDuplicate sends the last ACK again, once, in case it was lost (unless
// QuietDuplicates).
func (c *fetch) onDuplicate() error {
	c.st.Duplicates++
	if c.reACKed || c.lastACK < 0 || c.opt.QuietDuplicates {
		return nil
	}
	c.reACKed = true
	return c.ack(c.lastACK)
}

// onGap acknowledges the last in-order block at once, once per gap, so the
// server restarts at the lost block (RFC 7440 section 4).
func (c *fetch) onGap() error {
	c.st.OutOfOrder++
	if c.nacked == c.next {
		return nil
	}
	c.nacked = c.next
	c.st.EarlyACKs++
	return c.sendACK(c.next - 1)
}

// ackWindow counts the block just written into the window and
// acknowledges it when it ends the window or the file.
func (c *fetch) ackWindow(last bool) error {
	c.inWindow++
	if last || c.inWindow >= c.st.WindowSize {
		return c.sendACK(c.next)
	}
	return nil
}

// finish times the fetch and checks the size against the tsize announced.
func (c *fetch) finish() error {
	c.st.Duration = time.Since(c.st.Start)
	if c.st.TSize >= 0 && c.st.Bytes != c.st.TSize {
		return fmt.Errorf("tftp: %s: got %d bytes, the server announced tsize %d", c.file, c.st.Bytes, c.st.TSize)
	}
	return nil
}

// sendACK acknowledges seq as the new last ACK, which starts a window.
func (c *fetch) sendACK(seq int64) error {
	c.lastACK, c.inWindow, c.reACKed = seq, 0, false
	return c.ack(seq)
}

// ack sends ACK seq to the server (again, when seq is the last ACK), twice
// with DupACK, followed by the ACK before it with StaleACK.
func (c *fetch) ack(seq int64) error {
	if err := c.sendOneACK(seq); err != nil {
		return err
	}
	if c.opt.DupACK {
		if err := c.sendOneACK(seq); err != nil {
			return err
		}
	}
	if c.opt.StaleACK && c.prevACK >= 0 && c.prevACK != seq {
		if err := c.sendOneACK(c.prevACK); err != nil {
			return err
		}
	}
	c.prevACK = seq
	return nil
}

func (c *fetch) sendOneACK(seq int64) error {
	c.out = appendACK(c.out[:0], uint16(seq))
	c.st.ACKs++
	if _, err := c.conn.WriteToUDPAddrPort(c.out, c.peer); err != nil {
		return fmt.Errorf("tftp: sending ACK %d: %w", seq, err)
	}
	return nil
}

// stranger answers a packet from another transfer ID with error 5 and
// drops it (RFC 1350).
func (c *fetch) stranger(from netip.AddrPort) {
	c.st.Strangers++
	c.log.Debug("tftp client: packet from an unknown transfer ID", "from", from)
	_, _ = c.conn.WriteToUDPAddrPort(appendError(nil, errUnknownTID, "unknown transfer ID"), from)
}

// takeOptions applies the OACK: only options that were asked may come
// back, within what was asked (RFC 2347).
func (c *fetch) takeOptions(opts map[string]string, opt ClientOptions) error {
	c.st.OACK = true
	for name := range opts {
		switch name {
		case "blksize", "windowsize", "tsize", "timeout":
		default:
			return fmt.Errorf("tftp: the server acknowledged option %q, which was not asked (RFC 2347)", name)
		}
	}
	// blksize and windowsize come back at most as asked, and only if asked.
	for _, o := range []struct {
		name       string
		min, asked int
		took       *int
	}{{"blksize", MinBlkSize, opt.BlkSize, &c.st.BlkSize}, {"windowsize", MinWindowSize, opt.WindowSize, &c.st.WindowSize}} {
		if v, ok, err := optInt(opts, o.name, int64(o.min), int64(max(o.asked, o.min))); err != nil {
			return err
		} else if ok {
			if o.asked == 0 {
				return fmt.Errorf("tftp: the server acknowledged %s, which was not asked", o.name)
			}
			*o.took = int(v)
		}
	}
	if v, ok, err := optInt(opts, "tsize", 0, 1<<62); err != nil {
		return err
	} else if ok {
		c.st.TSize = v
	}
	return nil
}

// ErrMalformed marks a packet that is not a TFTP packet a reading client
// can take (too short, unknown opcode, option list not NUL-terminated).
var ErrMalformed = errors.New("malformed TFTP packet")

// optInt reads a numeric option value of the OACK within lo..hi.
func optInt(opts map[string]string, name string, lo, hi int64) (int64, bool, error) {
	v, ok := opts[name]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, true, fmt.Errorf("%w: OACK %s=%q is not a number in %d..%d", ErrMalformed, name, v, lo, hi)
	}
	return n, true, nil
}
