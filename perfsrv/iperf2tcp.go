package perfsrv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/event"
	meas "github.com/pxeperf/pxeperf/measure"
)

// The test header an iperf 2 client writes first (payloads.h of 2.1.8:
// client_hdr_v1 then client_hdrext, all big-endian). Flags say what
// follows: HEADER_VERSION1 without HEADER_VERSION2 is a legacy two-way test
// (-r tradeoff, or -d dualtest when RUN_NOW is set) for which the server
// connects back to the client's listener on the header's port; with
// HEADER_VERSION2 the extension's upper flags ask for the same-socket modes
// -R (HEADER_REVERSE) and --full-duplex (HEADER_FULLDUPLEX).
const (
	iperf2HeaderVersion1 = 0x80000000
	iperf2HeaderExtend   = 0x40000000
	iperf2HeaderSeqno64  = 0x08000000
	iperf2HeaderVersion2 = 0x04000000
	iperf2HeaderLenBit   = 0x00010000
	iperf2HeaderLenMask  = 0x000001FE
	iperf2RunNow         = 0x00000001
	iperf2UpperReverse   = 0x0400
	iperf2UpperFullDup   = 0x0800
	iperf2HeaderV1Len    = 24 // flags, numThreads, mPort, mBufLen, mWinBand, mAmount
	iperf2HeaderExtLen   = 36 // type, length, upper/lower flags, version, tos, rate, prefetch
	iperf2MaxHeader      = 256
	iperf2MaxBuf         = 4 << 20
)

// Modes of an iperf 2 test, from its header.
const (
	iperf2ModeNormal     = ""
	iperf2ModeTradeoff   = "tradeoff"    // -r: the board sends, then the server connects back and sends
	iperf2ModeDualtest   = "dualtest"    // -d: both at once, the server's leg on a connection back
	iperf2ModeReverse    = "reverse"     // -R: the server sends on the client's connection
	iperf2ModeFullDuplex = "full-duplex" // --full-duplex: both ways on the client's connection
)

// iperf2Header is what the server needs from a test header.
type iperf2Header struct {
	flags   uint32
	threads int
	port    uint16 // the client's listener (-L, default its -p) for -r and -d
	bufLen  int    // -l, 0 when not set
	amount  int32  // < 0: -t in 10 ms units; > 0: -n bytes
	upper   uint16
	rate    uint64 // -b in bits/s, 0 when not set
}

// iperf2HeaderLen is the length of the header whose flags word is flags, flags
// included (Settings_ClientTestHdrLen); 0 when there is no header (an
// iperf 2.0 client without -r/-d sends data straight away).
func iperf2HeaderLen(flags uint32) int {
	if flags&(iperf2HeaderVersion1|iperf2HeaderVersion2|iperf2HeaderExtend) == 0 {
		return 0
	}
	if flags&iperf2HeaderLenBit != 0 {
		return int(flags&iperf2HeaderLenMask) >> 1
	}
	n := 0
	if flags&(iperf2HeaderVersion1|iperf2HeaderExtend) != 0 {
		n = iperf2HeaderV1Len
	}
	if flags&(iperf2HeaderVersion2|iperf2HeaderExtend) != 0 {
		n += iperf2HeaderExtLen
	}
	return n
}

// parseIperf2Header reads a header; fields b is too short for stay zero.
func parseIperf2Header(b []byte) iperf2Header {
	be := binary.BigEndian
	var h iperf2Header
	if len(b) >= 4 {
		h.flags = be.Uint32(b)
	}
	if len(b) >= iperf2HeaderV1Len {
		h.threads = int(int32(be.Uint32(b[4:])))
		h.port = uint16(be.Uint32(b[8:]))
		h.bufLen = int(int32(be.Uint32(b[12:])))
		h.amount = int32(be.Uint32(b[20:]))
	}
	// client_hdrext: type, length, upperflags, lowerflags, version_u,
	// version_l, reserved, tos, lRate, uRate (its upper 24 bits hold the
	// rate's upper 32 >> 8), TCPWritePrefetch.
	if h.flags&(iperf2HeaderExtend|iperf2HeaderVersion2) != 0 {
		if len(b) >= 34 {
			h.upper = be.Uint16(b[32:])
		}
		if len(b) >= 56 {
			h.rate = uint64(be.Uint32(b[48:])) | uint64(be.Uint32(b[52:])>>8)<<32
		}
	}
	return h
}

func (h iperf2Header) mode() string {
	switch {
	case h.flags&iperf2HeaderVersion1 != 0 && h.flags&iperf2HeaderVersion2 == 0:
		if h.flags&iperf2RunNow != 0 {
			return iperf2ModeDualtest
		}
		return iperf2ModeTradeoff
	case h.flags&iperf2HeaderVersion2 != 0 && h.upper&iperf2UpperFullDup != 0:
		return iperf2ModeFullDuplex
	case h.flags&iperf2HeaderVersion2 != 0 && h.upper&iperf2UpperReverse != 0:
		return iperf2ModeReverse
	}
	return iperf2ModeNormal
}

// duration of the server's leg; 0 when the client asked for bytes (-n).
func (h iperf2Header) duration() time.Duration {
	if h.amount < 0 {
		return time.Duration(-int64(h.amount)) * 10 * time.Millisecond
	}
	return 0
}

func (h iperf2Header) block() int {
	if h.bufLen > 0 && h.bufLen <= iperf2MaxBuf {
		return h.bufLen
	}
	return 128 << 10 // iperf 2's TCP default
}

// flagName is the client option behind a mode, for the record's file.
func flagName(mode string) string {
	switch mode {
	case iperf2ModeTradeoff:
		return " -r"
	case iperf2ModeDualtest:
		return " -d"
	case iperf2ModeReverse:
		return " -R"
	case iperf2ModeFullDuplex:
		return " --full-duplex"
	}
	return ""
}

// iperf2TestName is a record's File: the board's command line (opts after
// "iperf -c"), the protocol and the record's direction as the board sees
// it ("tx": the board sent), as iperf3's records end in (tx) or (rx). The
// two legs of -r, -d and --full-duplex are told apart by it:
// "iperf -c -r (tcp, tx)" and "iperf -c -r (tcp, rx)".
func iperf2TestName(opts, proto, dir string) string {
	return "iperf -c" + opts + " (" + proto + ", " + dir + ")"
}

// readIperf2Header reads the test header of a new connection (bounded by the
// connection's read deadline). It returns every byte read: they count as
// data, as iperf 2 counts them.
func readIperf2Header(c net.Conn) ([]byte, iperf2Header, error) {
	head := make([]byte, 4, iperf2MaxHeader)
	if n, err := io.ReadFull(c, head); err != nil {
		return head[:n], iperf2Header{}, err
	}
	n := iperf2HeaderLen(binary.BigEndian.Uint32(head))
	if n <= 4 {
		return head, parseIperf2Header(head), nil
	}
	if n > iperf2MaxHeader {
		n = iperf2MaxHeader
	}
	head = head[:n]
	k, err := io.ReadFull(c, head[4:])
	head = head[:4+k]
	return head, parseIperf2Header(head), err
}

// iperf2Leg is one direction of an iperf 2 test.
type iperf2Leg struct {
	dir          string // "tx": the board sends; "rx": the board receives
	start, end   time.Time
	bytes        int64
	samples      []sample
	outcome, why string
	local, peer  netip.AddrPort
}

// handleTCP runs one iperf 2 TCP connection: the board's leg (it sends)
// and, as the header asks, the server's leg on the same connection (-R,
// --full-duplex) or on a connection back to the board (-r after the
// board's leg, -d beside it).
func (s *Iperf2) handleTCP(ctx context.Context, c *net.TCPConn) {
	defer c.Close()
	ip := addrPort(c.RemoteAddr()).Addr().Unmap()
	ctx, cancel := context.WithCancel(ctx) // an evicted test's legs end with it
	defer cancel()
	stopCtx := context.AfterFunc(ctx, func() { c.Close() })
	defer stopCtx()
	head, h, began, ok := s.readTCPHeader(c, ip)
	if !ok {
		return
	}
	t := s.admitTCP(ip, began, len(head), cancel)
	if t == nil {
		return
	}
	defer s.release(t)
	rec := s.newTCPRecorder(ip, h, head, t)
	s.runTCPLegs(ctx, c, h, head, began, t, rec)
}

// readTCPHeader reads a new connection's test header, counted among the
// connections waiting for theirs; began is when it arrived. false: none
// came (refused and counted).
func (s *Iperf2) readTCPHeader(c *net.TCPConn, ip netip.Addr) (head []byte, h iperf2Header, began time.Time, ok bool) {
	start := time.Now()
	unpend := s.headerWait(ip, func() { c.Close() })
	_ = c.SetReadDeadline(start.Add(min(s.cfg.SetupTimeout, iperf2HeaderWait)))
	head, h, err := readIperf2Header(c)
	unpend()
	began = time.Now()
	if err != nil {
		s.refuse.Refuse("iperf2: no test header", ip.String(), append(clientAttrs(s.cfg.Clients, ip), "bytes", len(head), "err", err)...)
		return head, h, began, false
	}
	return head, h, began, true
}

// admitTCP gives a TCP test from ip a slot (its address now verified; its
// header's headLen bytes count as received); eviction ends it by cancel.
// nil: busy (refused and counted).
func (s *Iperf2) admitTCP(ip netip.Addr, began time.Time, headLen int, cancel func()) *iperf2Test {
	t := newIperf2Test(ip, false, began)
	t.rcvd.Store(int64(headLen))
	t.stop = func() {
		t.evicted.Store(true)
		cancel()
	}
	s.mu.Lock()
	s.verifyLocked(ip, began)
	ok := s.admitLocked(t, began)
	s.mu.Unlock()
	if !ok {
		s.refuse.Refuse("iperf2: busy", ip.String(), clientAttrs(s.cfg.Clients, ip)...)
		return nil
	}
	return t
}

// tcpRecorder turns the legs of one iperf 2 TCP connection into records:
// each on its own, or, for a stream of a -P test, summed with the test's
// other streams (group).
type tcpRecorder struct {
	s       *Iperf2
	ip      netip.Addr
	mode    string
	labels  map[string]string
	headLen int
	t       *iperf2Test
	group   *iperf2Group // nil: not a stream of a -P test
}

func (s *Iperf2) newTCPRecorder(ip netip.Addr, h iperf2Header, head []byte, t *iperf2Test) *tcpRecorder {
	r := &tcpRecorder{s: s, ip: ip, mode: h.mode(), labels: map[string]string{"streams": "1"}, headLen: len(head), t: t}
	if h.flags&(iperf2HeaderVersion1|iperf2HeaderVersion2|iperf2HeaderExtend) != 0 {
		r.labels["iperf2_flags"] = fmt.Sprintf("%#x", h.flags)
	}
	if r.mode != iperf2ModeNormal {
		r.labels["iperf2_mode"] = r.mode
	}
	r.group = s.joinGroup(ip, h, head, func(_ string, l iperf2Leg, streams int) { r.record(l, streams) })
	return r
}

// record sends a leg's record, over streams streams (a -P test's sum).
func (r *tcpRecorder) record(l iperf2Leg, streams int) {
	lb, opts := r.labels, flagName(r.mode)
	if streams > 1 {
		lb = map[string]string{"streams": streamsLabel(streams)}
		for k, v := range r.labels {
			if k != "streams" {
				lb[k] = v
			}
		}
		opts = " -P " + streamsLabel(streams) + opts
	}
	r.s.cfg.Sink.Fetch(r.s.tcpEvent(l, iperf2TestName(opts, "tcp", l.dir), lb))
}

// emit ends a leg: logged or counted as it ended, then recorded, or added
// to its -P test's sum.
func (r *tcpRecorder) emit(l iperf2Leg) {
	s, ip := r.s, r.ip
	if r.group == nil && r.t.evicted.Load() && l.dir == "tx" && l.bytes <= int64(r.headLen) {
		s.refuse.Refuse("iperf2: evicted test sent nothing past its header (not recorded)", ip.String())
		return
	}
	if r.t.evicted.Load() {
		s.refuse.Refuse("iperf2: test leg evicted", ip.String(), "direction", l.dir, "mode", r.mode)
	} else if l.outcome != event.OutcomeOK {
		s.cfg.Log.Warn("iperf2 test leg ended early", append(clientAttrs(s.cfg.Clients, ip),
			"direction", l.dir, "mode", r.mode, "why", l.why)...)
	}
	if r.group != nil {
		s.addLeg(r.group, l)
		return
	}
	r.record(l, 1)
}

// runTCPLegs runs the legs the header's mode asks for: the board's on c
// (from began, when its header arrived) and the server's, on c or on a
// connection back to the board.
func (s *Iperf2) runTCPLegs(ctx context.Context, c *net.TCPConn, h iperf2Header, head []byte, began time.Time, t *iperf2Test, rec *tcpRecorder) {
	mode := rec.mode
	if mode == iperf2ModeReverse {
		// The client sends only the header and reads until the server closes.
		rec.emit(s.sendLeg(ctx, c, h, true, t, nil))
		return
	}
	var wg sync.WaitGroup
	if mode == iperf2ModeFullDuplex {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec.emit(s.sendLeg(ctx, c, h, false, t, nil))
		}()
	}
	if mode == iperf2ModeDualtest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec.emit(s.connectBack(ctx, c, h, t))
		}()
	}
	// The board's leg starts when its header arrived, as its client
	// starts the clock at its first write: with -P it connects all streams
	// before writing.
	fwd := s.recvLeg(ctx, c, began, head, t, h.duration())
	switch mode {
	case iperf2ModeNormal:
		// The client waits for the close; the record can follow (its
		// journal write may wait on the disk).
		c.Close()
		s.release(t)
	case iperf2ModeTradeoff, iperf2ModeDualtest:
		// The board's leg ends when the server closes: iperf 2.1.8's
		// client shuts its side down and reads until the server's FIN,
		// and its clock stops there, as iperf -s closes at once (kept
		// open through the connect-back, a -r board timed its own leg
		// over both; see perfsrv/DESIGN.md#tradeoff-board-leg).
		c.Close()
	}
	rec.emit(fwd)
	if mode == iperf2ModeTradeoff {
		if fwd.outcome == event.OutcomeOK {
			rec.emit(s.connectBack(ctx, c, h, t))
		} else {
			s.cfg.Log.Warn("iperf2 -r: no connect-back after a failed leg", clientAttrs(s.cfg.Clients, rec.ip)...)
		}
	}
	wg.Wait()
}

// recvLeg counts what the board sends on c until it shuts its side down.
// It ends at runLimit of dur, the header's -t (0: -n), so a test that
// does not end by time stops at max_duration, not 10 s (SetupTimeout) past
// it.
func (s *Iperf2) recvLeg(ctx context.Context, c *net.TCPConn, start time.Time, head []byte, t *iperf2Test, dur time.Duration) iperf2Leg {
	l := iperf2Leg{dir: "tx", start: start, outcome: event.OutcomeOK, local: addrPort(c.LocalAddr()), peer: addrPort(c.RemoteAddr())}
	var mu sync.Mutex
	n := int64(len(head))
	tk := startTicker(start, s.cfg.Interval, func(at time.Duration) sample {
		mu.Lock()
		defer mu.Unlock()
		return sample{at: at, bytes: n}
	})
	limit := runLimit(s.cfg.Limits, dur)
	_ = c.SetReadDeadline(start.Add(limit))
	var err error
	buf := make([]byte, 256<<10)
	for err == nil {
		var k int
		k, err = c.Read(buf)
		if k > 0 {
			t.touch(time.Now())
			t.rcvd.Add(int64(k))
		}
		mu.Lock()
		n += int64(k)
		mu.Unlock()
	}
	t.fwdDone.Store(true)
	l.end = time.Now()
	l.bytes = n
	l.samples = tk.stop(sample{at: l.end.Sub(start), bytes: n})
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF):
	case t.evicted.Load():
		l.outcome, l.why = event.OutcomeAborted, evictedWhy
	case ctx.Err() != nil:
		l.outcome, l.why = event.OutcomeAborted, "server shutting down"
	case errors.As(err, &ne) && ne.Timeout():
		l.outcome, l.why = event.OutcomeAborted, overRunWhy(dur, limit)
	case errors.Is(err, io.ErrUnexpectedEOF):
		l.outcome, l.why = event.OutcomeAborted, "client closed inside its test header"
	case !errors.Is(err, net.ErrClosed):
		l.outcome, l.why = event.OutcomeAborted, "client vanished mid-test: "+err.Error()
	}
	return l
}

// overRunWhy is why a leg that asked for dur was stopped at limit.
func overRunWhy(dur, limit time.Duration) string {
	if dur == 0 {
		return fmt.Sprintf("-n test stopped at %s (iperf2.max_duration) before its end", limit)
	}
	return fmt.Sprintf("no end within %s (-t and %s)", limit, endGrace)
}

// overCap says why the server will not run the leg h asks for, or "".
func (s *Iperf2) overCap(h iperf2Header) string {
	lim := s.cfg.Limits
	if d := h.duration(); d > lim.MaxDuration {
		return fmt.Sprintf("the client asks for %s, over the %s cap (iperf2.max_duration)", d, lim.MaxDuration)
	}
	if h.rate > uint64(lim.MaxRate) {
		return fmt.Sprintf("the client asks for %d bit/s, over the %d bit/s cap (iperf2.max_rate)", h.rate, lim.MaxRate)
	}
	return ""
}

// connectBackPortWhy says why a connect-back (TCP or UDP) will not go to
// port, or "": the header must name one, and one of 1024 or above (an
// iperf listener's, never a system service's).
func connectBackPortWhy(port uint16) string {
	if port == 0 {
		return "connect-back impossible: the test header names no port"
	}
	if port < 1024 {
		return fmt.Sprintf("connect-back refused: port %d is below 1024, a system service's, never an iperf listener's", port)
	}
	return ""
}

// connectBackRetry is how long a refused connect-back is tried again.
const connectBackRetry = 2 * time.Second

// connectBack runs the server's leg of -r or -d: a new connection from the
// address the test arrived on to the address it came from, on the port
// the header names. A refused or unanswered connect ends the leg as an
// error.
func (s *Iperf2) connectBack(ctx context.Context, c *net.TCPConn, h iperf2Header, t *iperf2Test) iperf2Leg {
	peer, local := addrPort(c.RemoteAddr()), addrPort(c.LocalAddr())
	to := netip.AddrPortFrom(peer.Addr(), h.port)
	l := iperf2Leg{dir: "rx", start: time.Now(), outcome: event.OutcomeError, local: netip.AddrPortFrom(local.Addr(), 0), peer: to}
	l.end = l.start
	if why := s.overCap(h); why != "" {
		l.why = "connect-back refused: " + why
		return l
	}
	if why := connectBackPortWhy(h.port); why != "" {
		l.why = why
		return l
	}
	d := net.Dialer{Timeout: s.cfg.SetupTimeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local.Addr(), 0))}
	// iperf 2.1.8 starts its -d listener beside its own leg ("Server
	// listening on TCP port ..." comes after it connected), so a
	// connect-back the moment the header arrives can beat the listener:
	// a refused connect is tried again for a moment.
	retryUntil := time.Now().Add(connectBackRetry)
	bc, err := d.DialContext(ctx, "tcp", to.String())
	for err != nil && errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(retryUntil) {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
		if ctx.Err() != nil {
			break
		}
		bc, err = d.DialContext(ctx, "tcp", to.String())
	}
	if err != nil {
		l.end = time.Now()
		l.why = fmt.Sprintf("connect-back to %s failed: %v (is the board's iperf listening there? its -L port, a firewall?)", to, err)
		return l
	}
	defer bc.Close()
	stop := context.AfterFunc(ctx, func() { bc.Close() })
	defer stop()
	return s.sendLeg(ctx, bc.(*net.TCPConn), h, true, t, t.backBudget)
}

// sendLeg sends to the board on c for the header's time (or bytes), shuts
// the sending side down and waits until the board has acknowledged every
// byte: the leg's end, the moment its receiver has it all. With waitClose
// it then waits for the board to close (the client reads until EOF).
func (s *Iperf2) sendLeg(ctx context.Context, c *net.TCPConn, h iperf2Header, waitClose bool, t *iperf2Test, budget func(sent, n int64) bool) iperf2Leg {
	l := iperf2Leg{dir: "rx", start: time.Now(), outcome: event.OutcomeOK, local: addrPort(c.LocalAddr()), peer: addrPort(c.RemoteAddr())}
	if why := s.overCap(h); why != "" {
		l.end, l.outcome, l.why = l.start, event.OutcomeError, "refused: "+why
		return l
	}
	dur := h.duration()
	limit := s.cfg.Limits.MaxDuration
	if dur > 0 {
		limit = dur
	}
	_ = c.SetWriteDeadline(l.start.Add(limit))
	w := &tcpLegWriter{c: c, h: h, t: t, budget: budget, start: l.start}
	tk := startTicker(l.start, s.cfg.Interval, w.snap)
	capped, err := w.run(ctx)
	l.outcome, l.why = sendOutcome(ctx, capped, err, t, dur, limit)
	// What follows the sending (the board's acknowledgements, its close)
	// ends with the test's runLimit too.
	end := l.start.Add(runLimit(s.cfg.Limits, dur))
	sent := w.written()
	if l.outcome == event.OutcomeOK {
		_ = c.CloseWrite()
		s.awaitAcked(ctx, c, sent, end)
	}
	l.end = time.Now()
	l.bytes = sent
	if ti := readTCPInfo(c); ti.ok {
		l.bytes = min(sent, ti.acked)
	}
	last := w.snap(l.end.Sub(l.start))
	last.bytes = l.bytes
	l.samples = tk.stop(last)
	if l.outcome == event.OutcomeOK && waitClose {
		_ = c.SetReadDeadline(earlier(time.Now().Add(s.cfg.SetupTimeout), end))
		_, _ = io.Copy(io.Discard, c)
	}
	return l
}

// tcpLegWriter writes the server's TCP leg: blocks of the header's -l, at
// its -b, up to its -n, within a connect-back's budget.
type tcpLegWriter struct {
	c      *net.TCPConn
	h      iperf2Header
	t      *iperf2Test
	budget func(sent, n int64) bool // nil: unbounded
	start  time.Time

	mu   sync.Mutex
	sent int64
}

func (w *tcpLegWriter) written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent
}

// snap is a sample at at: the bytes the board acknowledged (written, when
// TCP_INFO is not there) and the socket's TCP figures.
func (w *tcpLegWriter) snap(at time.Duration) sample {
	sent := w.written()
	smp := sample{at: at, bytes: sent}
	if ti := readTCPInfo(w.c); ti.ok {
		smp.bytes = min(sent, ti.acked)
		smp.retransmits, smp.cwnd, smp.rtt, smp.sndWnd = ti.retransmits, ti.cwnd, ti.rtt, ti.sndWnd
	}
	return smp
}

// run writes until the header's bytes are sent, a write fails (its
// deadline: the header's time), ctx ends or the budget runs out (capped).
func (w *tcpLegWriter) run(ctx context.Context) (capped bool, err error) {
	h := w.h
	buf := payload(h.block())
	clear(buf[:min(len(buf), iperf2HeaderV1Len)]) // no header: the board's listener must not read one
	for {
		k := len(buf)
		if h.amount > 0 {
			left := int64(h.amount) - w.written()
			if left <= 0 {
				return false, nil
			}
			k = int(min(int64(k), left))
		}
		if h.rate > 0 && !meas.Pace(int64(h.rate), w.start, w.written(), ctx.Done()) {
			return false, nil
		}
		if w.budget != nil && !w.budget(w.written(), int64(k)) {
			return true, nil
		}
		n, err := w.c.Write(buf[:k])
		if n > 0 {
			w.t.touch(time.Now())
		}
		w.mu.Lock()
		w.sent += int64(n)
		w.mu.Unlock()
		if err != nil {
			return false, err
		}
	}
}

// sendOutcome is how the server's TCP leg ended, from what stopped its
// writing.
func sendOutcome(ctx context.Context, capped bool, err error, t *iperf2Test, dur, limit time.Duration) (outcome, why string) {
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	switch {
	case capped:
		return event.OutcomeAborted, fmt.Sprintf("connect-back capped at %dx what the board sent plus %d MiB",
			connectBackRatio, connectBackAllowance>>20)
	case t.evicted.Load():
		return event.OutcomeAborted, evictedWhy
	case ctx.Err() != nil:
		return event.OutcomeAborted, "server shutting down"
	case err != nil && !timedOut:
		return event.OutcomeAborted, "client vanished mid-test: " + err.Error()
	case timedOut && dur == 0:
		return event.OutcomeAborted, overRunWhy(dur, limit)
	}
	return event.OutcomeOK, ""
}

// awaitAcked waits until the board acknowledged all sent bytes (FIN
// included: acked runs one past the data), for at most SetupTimeout and
// not past end.
func (s *Iperf2) awaitAcked(ctx context.Context, c *net.TCPConn, sent int64, end time.Time) {
	wait := earlier(time.Now().Add(s.cfg.SetupTimeout), end)
	for ti := readTCPInfo(c); ti.ok && ti.acked < sent && time.Now().Before(wait) && ctx.Err() == nil; ti = readTCPInfo(c) {
		time.Sleep(time.Millisecond)
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tcpEvent turns a leg into its record.
func (s *Iperf2) tcpEvent(l iperf2Leg, file string, labels map[string]string) *event.Fetch {
	lb := make(map[string]string, len(labels))
	for k, v := range labels {
		lb[k] = v
	}
	return &event.Fetch{Start: l.start, Proto: event.ProtoTCP, Client: l.peer, File: file, Bytes: l.bytes, Size: -1,
		Duration: l.end.Sub(l.start), Outcome: l.outcome, Err: l.why, Source: SourceIperf2, Direction: l.dir,
		Interface: ifaceOf(l.local.Addr()), Intervals: intervals(sample{}, l.samples, s.cfg.Interval/2), Labels: lb}
}
