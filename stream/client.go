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

// TCP runs a TCP stream test against a Server.
func TCP(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults(false)
	if err != nil {
		return Result{}, err
	}
	ctl, err := dialControl(ctx, cfg, false)
	if err != nil {
		return Result{}, err
	}
	defer ctl.conn.Close()
	d := net.Dialer{Control: bufControl(cfg.RcvBuf, cfg.SndBuf)}
	dc, err := d.DialContext(ctx, "tcp", withPort(cfg.Addr))
	if err != nil {
		return Result{}, fmt.Errorf("stream: data connection: %w", err)
	}
	data := dc.(*net.TCPConn)
	defer data.Close()
	stop := context.AfterFunc(ctx, func() { ctl.conn.Close(); data.Close() })
	defer stop()
	data.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := data.Write(append([]byte{'P', 'X', 'S', '1', kindData}, ctl.reply.Cookie...)); err != nil {
		return Result{}, fmt.Errorf("stream: data connection: %w", err)
	}
	var m message
	if err := ctl.expect("start", &m); err != nil {
		return Result{}, err
	}
	start := time.Now()
	end := start.Add(cfg.Duration + finishSlack)
	ctl.conn.SetDeadline(end)
	data.SetDeadline(end)
	res := Result{Proto: "tcp", Direction: cfg.Direction}
	var n atomic.Int64
	if cfg.Direction == Tx {
		smp := startSampler(start, cfg.Interval, func() measure.Sample { return tcpSample(data, n.Load()) })
		err := sendTCP(data, start.Add(cfg.Duration), cfg.Bytes, &n)
		iv, total, el := smp.finish()
		if err != nil {
			return res, ctxErr(ctx, fmt.Errorf("stream: sending: %w", err))
		}
		data.SetDeadline(end)
		if err := data.CloseWrite(); err != nil {
			return res, err
		}
		if err := ctl.expect("result", &m); err != nil {
			return res, ctxErr(ctx, err)
		}
		res.Intervals, res.PeerIntervals = iv, m.Intervals
		res.Sender = total
		res.Sender.Start, res.Sender.End, res.Sender.BitsPerSecond = 0, el, measure.BitsPerSecond(total.Bytes, el)
		if m.Sum != nil {
			res.Receiver = *m.Sum
		}
		return res, nil
	}
	smp := startSampler(start, cfg.Interval, func() measure.Sample { return measure.Sample{Bytes: n.Load()} })
	buf := make([]byte, tcpBlock)
	for {
		k, err := data.Read(buf)
		n.Add(int64(k))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			smp.finish()
			return res, ctxErr(ctx, fmt.Errorf("stream: receiving: %w", err))
		}
	}
	iv, total, el := smp.finish()
	if err := ctl.expect("result", &m); err != nil {
		return res, ctxErr(ctx, err)
	}
	res.Intervals, res.PeerIntervals = mergeSender(iv, m.Intervals), m.Intervals
	res.Receiver = Stats{End: el, Bytes: total.Bytes, BitsPerSecond: measure.BitsPerSecond(total.Bytes, el)}
	if m.Sum != nil {
		res.Sender = *m.Sum
	}
	return res, nil
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
	cfg, err := cfg.withDefaults(true)
	if err != nil {
		return Result{}, err
	}
	ctl, err := dialControl(ctx, cfg, true)
	if err != nil {
		return Result{}, err
	}
	defer ctl.conn.Close()
	d := net.Dialer{Control: bufControl(cfg.RcvBuf, cfg.SndBuf)}
	uc, err := d.DialContext(ctx, "udp", net.JoinHostPort(ctl.host, strconv.Itoa(ctl.reply.UDPPort)))
	if err != nil {
		return Result{}, fmt.Errorf("stream: UDP socket: %w", err)
	}
	conn := uc.(*net.UDPConn)
	defer conn.Close()
	if cfg.RcvBuf == 0 && cfg.Direction == Rx {
		// As on the server: the default buffer overflows under a 1 Gbit/s
		// burst of jumbo datagrams, which would read as link loss.
		growRcvbuf(conn, udpServerRcvbuf)
	}
	stop := context.AfterFunc(ctx, func() { ctl.conn.Close(); conn.Close() })
	defer stop()
	session := beUint64(ctl.reply.Cookie)

	// Hello until the server starts: it learns where to send (Rx) and that
	// UDP gets through.
	msgs := make(chan message, 1)
	errc := make(chan error, 1)
	readCtl := func() {
		var m message
		if err := readFrame(ctl.conn, maxResult, &m); err != nil {
			errc <- err
			return
		}
		msgs <- m
	}
	go readCtl()
	hello := make([]byte, headerLen)
	datagram{session: session, seq: helloSeq}.put(hello)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var m message
wait:
	for {
		conn.Write(hello) // a refused or lost hello is retried
		select {
		case m = <-msgs:
			break wait
		case err := <-errc:
			return Result{}, ctxErr(ctx, fmt.Errorf("stream: waiting for start: %w", err))
		case <-tick.C:
		}
	}
	if m.Type == "error" {
		return Result{}, fmt.Errorf("%w: %s", ErrRefused, m.Error)
	}
	if m.Type != "start" {
		return Result{}, fmt.Errorf("%w: got %q, want start", ErrProto, m.Type)
	}
	start := time.Now()
	end := start.Add(cfg.Duration + finishSlack)
	ctl.conn.SetDeadline(end)
	res := Result{Proto: "udp", Direction: cfg.Direction}
	if cfg.Direction == Tx {
		var sm sendMeter
		smp := startSampler(start, cfg.Interval, sm.stats)
		err := sendUDP(conn, nil, session, cfg.Rate, cfg.PacketSize, start, start.Add(cfg.Duration), ctx.Done(), &sm)
		iv, total, el := smp.finish()
		if err != nil {
			return res, ctxErr(ctx, fmt.Errorf("stream: sending UDP: %w", err))
		}
		if err := writeFrame(ctl.conn, message{Type: "done", Packets: total.Packets}); err != nil {
			return res, ctxErr(ctx, err)
		}
		if err := ctl.expect("result", &m); err != nil {
			return res, ctxErr(ctx, err)
		}
		res.Intervals, res.PeerIntervals = mergeReceiver(iv, m.Intervals), m.Intervals
		res.Sender = total
		res.Sender.Start, res.Sender.End, res.Sender.BitsPerSecond = 0, el, measure.BitsPerSecond(total.Bytes, el)
		if m.Sum != nil {
			res.Receiver = *m.Sum
		}
		return res, nil
	}
	rs := &recvState{u: measure.NewUDPRecv(0, measure.ExpectedPackets(cfg.Rate, cfg.PacketSize, cfg.Duration)), epoch: start}
	smp := startSampler(start, cfg.Interval, rs.stats)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) || isTimeout(err) {
					return
				}
				continue // e.g. a refused hello's ICMP error
			}
			at := time.Now()
			dg, err := parseDatagram(buf[:n])
			if err != nil || dg.session != session || dg.seq == helloSeq {
				continue
			}
			rs.add(dg, n, at)
		}
	}()
	go readCtl()
	select {
	case m = <-msgs:
	case err = <-errc:
	}
	stopAt := time.Since(start)
	if err == nil && m.Type != "result" {
		err = fmt.Errorf("%w: got %q, want result", ErrProto, m.Type)
		if m.Type == "error" {
			err = fmt.Errorf("%w: %s", ErrRefused, m.Error)
		}
	}
	if err != nil {
		conn.SetReadDeadline(time.Now())
		<-recvDone
		smp.finish()
		return res, ctxErr(ctx, err)
	}
	smp.pause()
	time.Sleep(udpGrace)
	conn.SetReadDeadline(time.Now())
	<-recvDone
	rs.sent.Store(m.Packets)
	iv, total, el := smp.finishAt(stopAt)
	res.Intervals, res.PeerIntervals = iv, m.Intervals
	res.Receiver = total
	res.Receiver.Start, res.Receiver.End, res.Receiver.BitsPerSecond = 0, el, measure.BitsPerSecond(total.Bytes, el)
	if m.Sum != nil {
		res.Sender = *m.Sum
	}
	return res, nil
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
