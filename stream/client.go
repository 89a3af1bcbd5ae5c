package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/measure"
)

// control is the client's end of a test's control connection.
type control struct {
	conn  net.Conn
	host  string
	reply message
}

func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(DefaultPort))
}

// dialControl connects, sends the request and reads the reply.
func dialControl(ctx context.Context, cfg Config, udp bool) (*control, error) {
	addr := withPort(cfg.Addr)
	host, _, _ := net.SplitHostPort(addr)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("stream: connecting to %s: %w (is `pxeperf serve` running there?)", addr, err)
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := c.Write([]byte{'P', 'X', 'S', '1', kindControl}); err != nil {
		c.Close()
		return nil, fmt.Errorf("stream: %s: %w", addr, err)
	}
	if err := writeFrame(c, cfg.request(udp)); err != nil {
		c.Close()
		return nil, fmt.Errorf("stream: %s: %w", addr, err)
	}
	ctl := &control{conn: c, host: host}
	if err := ctl.expect("reply", &ctl.reply); err != nil {
		c.Close()
		return nil, err
	}
	if len(ctl.reply.Cookie) != cookieLen {
		c.Close()
		return nil, fmt.Errorf("%w: reply with a %d-byte cookie", ErrProto, len(ctl.reply.Cookie))
	}
	return ctl, nil
}

// expect reads the next frame, which must be of type typ.
func (c *control) expect(typ string, m *message) error {
	if err := readFrame(c.conn, maxResult, m); err != nil {
		return fmt.Errorf("stream: waiting for %s from the server: %w", typ, err)
	}
	if m.Type == "error" {
		return fmt.Errorf("%w: %s", ErrRefused, m.Error)
	}
	if m.Type != typ {
		return fmt.Errorf("%w: got %q, want %q", ErrProto, m.Type, typ)
	}
	return nil
}

// clientTest is one test's client end: its defaults-filled config, its
// control connection and its data socket, both closed when ctx ends.
type clientTest struct {
	ctx  context.Context
	cfg  Config
	ctl  *control
	data net.Conn // *net.TCPConn, or *net.UDPConn for a UDP test
	stop func() bool
}

// openTest fills cfg's defaults, opens the test's control connection and
// its data socket. close frees them.
func openTest(ctx context.Context, cfg Config, udp bool) (*clientTest, error) {
	cfg, err := cfg.withDefaults(udp)
	if err != nil {
		return nil, err
	}
	ctl, err := dialControl(ctx, cfg, udp)
	if err != nil {
		return nil, err
	}
	t := &clientTest{ctx: ctx, cfg: cfg, ctl: ctl}
	if udp {
		err = t.dialUDP()
	} else {
		err = t.dialTCP()
	}
	if err != nil {
		ctl.conn.Close()
		return nil, err
	}
	t.stop = context.AfterFunc(ctx, func() { t.ctl.conn.Close(); t.data.Close() })
	return t, nil
}

func (t *clientTest) close() {
	t.stop()
	t.data.Close()
	t.ctl.conn.Close()
}

// dialData opens the test's data socket with the config's buffer sizes.
func (t *clientTest) dialData(network, addr string) (net.Conn, error) {
	d := net.Dialer{Control: bufControl(t.cfg.RcvBuf, t.cfg.SndBuf)}
	return d.DialContext(t.ctx, network, addr)
}

// dialTCP opens a TCP test's data connection, to the control's address.
func (t *clientTest) dialTCP() error {
	dc, err := t.dialData("tcp", withPort(t.cfg.Addr))
	if err != nil {
		return fmt.Errorf("stream: data connection: %w", err)
	}
	t.data = dc
	return nil
}

// dialUDP opens a UDP test's socket to the port the server's reply named.
func (t *clientTest) dialUDP() error {
	uc, err := t.dialData("udp", net.JoinHostPort(t.ctl.host, strconv.Itoa(t.ctl.reply.UDPPort)))
	if err != nil {
		return fmt.Errorf("stream: UDP socket: %w", err)
	}
	t.data = uc
	if t.cfg.RcvBuf == 0 && t.cfg.Direction == Rx {
		// As on the server: the default buffer overflows under a gigabit
		// burst of jumbo datagrams, which would read as link loss (see
		// stream/DESIGN.md#udp-receive-buffer).
		growRcvbuf(uc.(*net.UDPConn), udpServerRcvbuf)
	}
	return nil
}

// result puts this side's figures (its intervals iv and its sum own) beside
// the server's result message m: own is the sender's sum when the client
// sent (Tx), the receiver's otherwise.
func (t *clientTest) result(proto string, iv []Stats, own Stats, m message) Result {
	res := Result{Proto: proto, Direction: t.cfg.Direction, Intervals: iv, PeerIntervals: m.Intervals}
	var peer Stats
	if m.Sum != nil {
		peer = *m.Sum
	}
	if t.cfg.Direction == Tx {
		res.Sender, res.Receiver = own, peer
	} else {
		res.Receiver, res.Sender = own, peer
	}
	return res
}

// TCP runs a TCP stream test against a Server.
func TCP(ctx context.Context, cfg Config) (Result, error) {
	t, err := openTest(ctx, cfg, false)
	if err != nil {
		return Result{}, err
	}
	defer t.close()
	data := t.data.(*net.TCPConn)
	data.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := data.Write(append([]byte{'P', 'X', 'S', '1', kindData}, t.ctl.reply.Cookie...)); err != nil {
		return Result{}, fmt.Errorf("stream: data connection: %w", err)
	}
	var m message
	if err := t.ctl.expect("start", &m); err != nil {
		return Result{}, err
	}
	start := time.Now()
	end := start.Add(t.cfg.Duration + finishSlack)
	t.ctl.conn.SetDeadline(end)
	data.SetDeadline(end)
	if t.cfg.Direction == Tx {
		return t.sendTCP(data, start, end)
	}
	return t.receiveTCP(data, start)
}

// sendTCP is a Tx test's data: the client sends until the test's time (or
// bytes), shuts its side down and reads the server's result.
func (t *clientTest) sendTCP(data *net.TCPConn, start, end time.Time) (Result, error) {
	partial := Result{Proto: "tcp", Direction: t.cfg.Direction}
	var n atomic.Int64
	smp := startSampler(start, t.cfg.Interval, func() measure.Sample { return tcpSample(data, n.Load()) })
	err := sendTCP(data, start.Add(t.cfg.Duration), t.cfg.Bytes, &n)
	iv, total, el := smp.finish()
	if err != nil {
		return partial, ctxErr(t.ctx, fmt.Errorf("stream: sending: %w", err))
	}
	data.SetDeadline(end)
	if err := data.CloseWrite(); err != nil {
		return partial, err
	}
	var m message
	if err := t.ctl.expect("result", &m); err != nil {
		return partial, ctxErr(t.ctx, err)
	}
	return t.result("tcp", iv, wholeTest(total, el), m), nil
}

// receiveTCP is an Rx test's data: the client reads until the server
// closes, then reads the server's result.
func (t *clientTest) receiveTCP(data *net.TCPConn, start time.Time) (Result, error) {
	partial := Result{Proto: "tcp", Direction: t.cfg.Direction}
	var n atomic.Int64
	smp := startSampler(start, t.cfg.Interval, func() measure.Sample { return measure.Sample{Bytes: n.Load()} })
	buf := make([]byte, tcpBlock)
	for {
		k, err := data.Read(buf)
		n.Add(int64(k))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			smp.finish()
			return partial, ctxErr(t.ctx, fmt.Errorf("stream: receiving: %w", err))
		}
	}
	iv, total, el := smp.finish()
	var m message
	if err := t.ctl.expect("result", &m); err != nil {
		return partial, ctxErr(t.ctx, err)
	}
	return t.result("tcp", mergeSender(iv, m.Intervals), tcpReceived(total.Bytes, el), m), nil
}

// mergeSender copies the sender's TCP figures into the receiver's
// intervals, by index.
func mergeSender(iv, peer []Stats) []Stats {
	for i := range min(len(iv), len(peer)) {
		iv[i].Retransmits, iv[i].SndCwnd, iv[i].RTT = peer[i].Retransmits, peer[i].SndCwnd, peer[i].RTT
	}
	return iv
}

// mergeReceiver copies the receiver's UDP figures into the sender's
// intervals, by index.
func mergeReceiver(iv, peer []Stats) []Stats {
	for i := range min(len(iv), len(peer)) {
		p := peer[i]
		iv[i].Lost, iv[i].LostPercent, iv[i].OutOfOrder, iv[i].Duplicates, iv[i].JitterMs =
			p.Lost, p.LostPercent, p.OutOfOrder, p.Duplicates, p.JitterMs
	}
	return iv
}

// ctxErr prefers the context's error: a cancelled test fails with it, not
// with "use of closed connection".
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("stream: %w", ctx.Err())
	}
	return err
}

// UDP runs a UDP stream test at cfg.Rate against a Server.
func UDP(ctx context.Context, cfg Config) (Result, error) {
	t, err := openTest(ctx, cfg, true)
	if err != nil {
		return Result{}, err
	}
	defer t.close()
	u := &udpClient{clientTest: t, conn: t.data.(*net.UDPConn), session: beUint64(t.ctl.reply.Cookie),
		msgs: make(chan message, 1), errc: make(chan error, 1)}
	if err := u.awaitStart(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	t.ctl.conn.SetDeadline(start.Add(t.cfg.Duration + finishSlack))
	if t.cfg.Direction == Tx {
		return u.send(start)
	}
	return u.receive(start)
}

// udpClient is a UDP test's client end: its socket, its session (the
// server's cookie) and the control messages a reader hands over.
type udpClient struct {
	*clientTest
	conn    *net.UDPConn
	session uint64
	msgs    chan message
	errc    chan error
}

// readControl reads the next control message into msgs (or its error into
// errc).
func (u *udpClient) readControl() {
	var m message
	if err := readFrame(u.ctl.conn, maxResult, &m); err != nil {
		u.errc <- err
		return
	}
	u.msgs <- m
}

// awaitStart sends hellos until the server starts the test: it learns where
// to send (Rx) and that UDP gets through.
func (u *udpClient) awaitStart() error {
	go u.readControl()
	hello := make([]byte, headerLen)
	datagram{session: u.session, seq: helloSeq}.put(hello)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var m message
wait:
	for {
		u.conn.Write(hello) // a refused or lost hello is retried
		select {
		case m = <-u.msgs:
			break wait
		case err := <-u.errc:
			return ctxErr(u.ctx, fmt.Errorf("stream: waiting for start: %w", err))
		case <-tick.C:
		}
	}
	if m.Type == "error" {
		return fmt.Errorf("%w: %s", ErrRefused, m.Error)
	}
	if m.Type != "start" {
		return fmt.Errorf("%w: got %q, want start", ErrProto, m.Type)
	}
	return nil
}

// send is a Tx test's data: the client paces datagrams for the test's
// time, tells the server how many it sent and reads its result.
func (u *udpClient) send(start time.Time) (Result, error) {
	cfg := u.cfg
	partial := Result{Proto: "udp", Direction: cfg.Direction}
	var sm sendMeter
	smp := startSampler(start, cfg.Interval, sm.stats)
	err := sendUDP(u.conn, nil, u.session, cfg.Rate, cfg.PacketSize, start, start.Add(cfg.Duration), u.ctx.Done(), &sm)
	iv, total, el := smp.finish()
	if err != nil {
		return partial, ctxErr(u.ctx, fmt.Errorf("stream: sending UDP: %w", err))
	}
	if err := writeFrame(u.ctl.conn, message{Type: "done", Packets: total.Packets}); err != nil {
		return partial, ctxErr(u.ctx, err)
	}
	var m message
	if err := u.ctl.expect("result", &m); err != nil {
		return partial, ctxErr(u.ctx, err)
	}
	return u.result("udp", mergeReceiver(iv, m.Intervals), wholeTest(total, el), m), nil
}

// receive is an Rx test's data: the client counts the server's datagrams
// until its result comes, and a grace period for stragglers after it; the
// test ends when the result came.
func (u *udpClient) receive(start time.Time) (Result, error) {
	cfg := u.cfg
	partial := Result{Proto: "udp", Direction: cfg.Direction}
	rs := &recvState{u: measure.NewUDPRecv(0, measure.ExpectedPackets(cfg.Rate, cfg.PacketSize, cfg.Duration)), epoch: start}
	smp := startSampler(start, cfg.Interval, rs.stats)
	recvDone := make(chan struct{})
	go u.readDatagrams(rs, recvDone)
	go u.readControl()
	var m message
	var err error
	select {
	case m = <-u.msgs:
	case err = <-u.errc:
	}
	stopAt := time.Since(start)
	if err == nil {
		err = resultError(m)
	}
	if err != nil {
		u.conn.SetReadDeadline(time.Now())
		<-recvDone
		smp.finish()
		return partial, ctxErr(u.ctx, err)
	}
	smp.pause()
	time.Sleep(udpGrace)
	u.conn.SetReadDeadline(time.Now())
	<-recvDone
	rs.sent.Store(m.Packets)
	iv, total, el := smp.finishAt(stopAt)
	return u.result("udp", iv, wholeTest(total, el), m), nil
}

// readDatagrams counts the test's datagrams into rs until the socket is
// closed or its deadline passes; done is closed at the end.
func (u *udpClient) readDatagrams(rs *recvState, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 64<<10)
	for {
		n, err := u.conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) || isTimeout(err) {
				return
			}
			continue // e.g. a refused hello's ICMP error
		}
		at := time.Now()
		dg, err := parseDatagram(buf[:n])
		if err != nil || dg.session != u.session || dg.seq == helloSeq {
			continue
		}
		rs.add(dg, n, at)
	}
}

// resultError is why m, which should be the server's result, is not.
func resultError(m message) error {
	switch m.Type {
	case "result":
		return nil
	case "error":
		return fmt.Errorf("%w: %s", ErrRefused, m.Error)
	}
	return fmt.Errorf("%w: got %q, want result", ErrProto, m.Type)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}
