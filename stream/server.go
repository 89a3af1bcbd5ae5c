package stream

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/measure"
)

// Server timeouts.
const (
	handshakeTimeout = 5 * time.Second  // hello, request, data connection, UDP hello
	finishSlack      = 10 * time.Second // past the test's duration, for the result
	maxPending       = 64               // connections in their handshake
	tcpBlock         = 128 << 10        // bytes per read/write call
)

// Server answers TCP and UDP stream tests on one port number (TCP for
// control and TCP data, UDP for UDP data).
type Server struct {
	log     *slog.Logger
	ln      *net.TCPListener
	udp     *net.UDPConn
	pending chan struct{}
	wg      sync.WaitGroup

	mu       sync.Mutex
	byCookie map[[cookieLen]byte]*session
	byID     map[uint64]*session
	busy     map[netip.Addr]bool

	// Dropped counts bad input: connections with a bad hello or request,
	// stray data connections, datagrams of no session.
	Dropped atomic.Int64
}

type session struct {
	req    request
	cookie [cookieLen]byte
	id     uint64
	client netip.Addr
	data   chan net.Conn
	hello  chan netip.AddrPort
	recv   atomic.Pointer[recvState] // UDP tx: the server receives
	once   sync.Once
}

// NewServer binds addr ("host:port"; port 0 picks one, DefaultPort is the
// usual) for TCP and the same port for UDP. log may be nil.
func NewServer(addr string, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("stream: server address %q: %w (want host:port)", addr, err)
	}
	var errs []error
	for range 5 { // port 0: the UDP port of the TCP port's number may be taken
		ln, err := net.ListenTCP("tcp", tcpAddr)
		if err != nil {
			return nil, fmt.Errorf("stream: listening on TCP %s: %w (is another pxeperf serve or iperf running there?)", addr, err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: tcpAddr.IP, Port: port, Zone: tcpAddr.Zone})
		if err == nil {
			growRcvbuf(udp, udpServerRcvbuf)
			return &Server{log: log, ln: ln, udp: udp, pending: make(chan struct{}, maxPending),
				byCookie: make(map[[cookieLen]byte]*session), byID: make(map[uint64]*session),
				busy: make(map[netip.Addr]bool)}, nil
		}
		ln.Close()
		errs = append(errs, err)
		if tcpAddr.Port != 0 {
			break
		}
	}
	return nil, fmt.Errorf("stream: listening on UDP %s: %w (pick a port free for both TCP and UDP)", addr, errors.Join(errs...))
}

// Addr is the bound address; the UDP port has the same number.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve answers tests until ctx ends, then closes the sockets, waits for
// running tests to stop and returns nil.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.ln.Close(); s.udp.Close() })
	defer stop()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.readUDP() }()
	var err error
	for {
		var c *net.TCPConn
		c, err = s.ln.AcceptTCP()
		if err != nil {
			break
		}
		select {
		case s.pending <- struct{}{}:
		default:
			s.Dropped.Add(1)
			s.log.Debug("stream: too many connections in handshake, dropping", "peer", c.RemoteAddr())
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, c)
		}()
	}
	cancel()
	s.ln.Close()
	s.udp.Close()
	s.wg.Wait()
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("stream: accepting: %w", err)
}

func (s *Server) handle(ctx context.Context, c *net.TCPConn) {
	release := func() {
		select {
		case <-s.pending:
		default:
		}
	}
	defer release()
	peer := c.RemoteAddr().String()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	kind, cookie, err := readHello(c)
	if err != nil {
		s.drop(c, "bad hello", peer, err)
		return
	}
	if kind == kindData {
		s.mu.Lock()
		sess := s.byCookie[cookie]
		s.mu.Unlock()
		if sess == nil {
			s.drop(c, "data connection for no test", peer, nil)
			return
		}
		select {
		case sess.data <- c:
		default:
			s.drop(c, "second data connection", peer, nil)
		}
		return
	}
	defer c.Close()
	var req request
	if err := readFrame(c, maxRequest, &req); err != nil {
		s.drop(c, "bad request", peer, err)
		return
	}
	if err := req.validate(); err != nil {
		s.Dropped.Add(1)
		s.log.Debug("stream: refusing test", "peer", peer, "err", err)
		writeFrame(c, message{Type: "error", Error: err.Error()})
		return
	}
	sess, err := s.open(c, req)
	if err != nil {
		writeFrame(c, message{Type: "error", Error: err.Error()})
		return
	}
	defer s.close(sess)
	release() // the handshake is over; the session limit holds from here
	stopCtl := context.AfterFunc(ctx, func() { c.Close() })
	defer stopCtl()
	log := s.log.With("peer", peer, "proto", req.Proto, "dir", req.Dir)
	log.Debug("stream: test starts", "duration_ms", req.DurationMs, "rate", req.Rate, "buf", req.Buf)
	if err := writeFrame(c, message{Type: "reply", Cookie: sess.cookie[:], UDPPort: s.udp.LocalAddr().(*net.UDPAddr).Port}); err != nil {
		return
	}
	var res message
	if req.Proto == "tcp" {
		res, err = s.runTCP(ctx, c, sess)
	} else {
		res, err = s.runUDP(ctx, c, sess)
	}
	// Free the client's slot before it reads the result, so its next test
	// is not refused as busy.
	s.close(sess)
	if err == nil {
		err = writeFrame(c, res)
	}
	if err != nil {
		log.Debug("stream: test failed", "err", err)
		c.SetDeadline(time.Now().Add(time.Second))
		writeFrame(c, message{Type: "error", Error: err.Error()})
		return
	}
	log.Debug("stream: test done")
}

func (s *Server) drop(c net.Conn, why, peer string, err error) {
	s.Dropped.Add(1)
	s.log.Debug("stream: dropping connection", "why", why, "peer", peer, "err", err)
	c.Close()
}

// open registers a test, one per client address and MaxSessions at once.
func (s *Server) open(c net.Conn, req request) (*session, error) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return nil, fmt.Errorf("stream: peer address: %w", err)
	}
	sess := &session{req: req, client: ap.Addr().Unmap(), data: make(chan net.Conn, 1), hello: make(chan netip.AddrPort, 1)}
	if _, err := rand.Read(sess.cookie[:]); err != nil {
		return nil, err
	}
	sess.id = binary.BigEndian.Uint64(sess.cookie[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[sess.client] {
		return nil, fmt.Errorf("a test from %s is already running (one at a time per client: wait for it to end)", sess.client)
	}
	if len(s.byCookie) >= MaxSessions {
		return nil, fmt.Errorf("server busy with %d tests (limit %d): try again later", len(s.byCookie), MaxSessions)
	}
	s.busy[sess.client] = true
	s.byCookie[sess.cookie] = sess
	s.byID[sess.id] = sess
	return sess, nil
}

// close ends a test's registration; it is idempotent.
func (s *Server) close(sess *session) {
	sess.once.Do(func() {
		s.mu.Lock()
		delete(s.busy, sess.client)
		delete(s.byCookie, sess.cookie)
		delete(s.byID, sess.id)
		s.mu.Unlock()
		select {
		case c := <-sess.data:
			c.Close()
		default:
		}
	})
}

func (s *Server) runTCP(ctx context.Context, ctl net.Conn, sess *session) (message, error) {
	var data *net.TCPConn
	select {
	case c := <-sess.data:
		data = c.(*net.TCPConn)
	case <-time.After(handshakeTimeout):
		return message{}, fmt.Errorf("no data connection within %v", handshakeTimeout)
	case <-ctx.Done():
		return message{}, ctx.Err()
	}
	defer data.Close()
	stop := context.AfterFunc(ctx, func() { data.Close() })
	defer stop()
	if b := sess.req.Buf; b > 0 {
		data.SetReadBuffer(b)
		data.SetWriteBuffer(b)
	}
	dur := time.Duration(sess.req.DurationMs) * time.Millisecond
	start := time.Now()
	end := start.Add(dur + finishSlack)
	ctl.SetDeadline(end)
	data.SetDeadline(end)
	if err := writeFrame(ctl, message{Type: "start"}); err != nil {
		return message{}, err
	}
	every := time.Duration(sess.req.IntervalMs) * time.Millisecond
	var n atomic.Int64
	if sess.req.Dir == "tx" {
		smp := startSampler(start, every, func() measure.Sample { return measure.Sample{Bytes: n.Load()} })
		buf := make([]byte, tcpBlock)
		var err error
		for {
			var k int
			k, err = data.Read(buf)
			n.Add(int64(k))
			if err != nil {
				break
			}
		}
		iv, total, el := smp.finish()
		if !errors.Is(err, io.EOF) {
			return message{}, fmt.Errorf("receiving: %w", err)
		}
		sum := tcpReceived(total.Bytes, el)
		return message{Type: "result", Intervals: iv, Sum: &sum}, nil
	}
	smp := startSampler(start, every, func() measure.Sample { return tcpSample(data, n.Load()) })
	err := sendTCP(data, start.Add(dur), sess.req.Bytes, &n)
	iv, total, el := smp.finish()
	if err != nil {
		return message{}, fmt.Errorf("sending: %w", err)
	}
	data.SetDeadline(end)
	if err := data.CloseWrite(); err != nil {
		return message{}, err
	}
	sum := wholeTest(total, el)
	return message{Type: "result", Intervals: iv, Sum: &sum}, nil
}

// sendTCP writes until the deadline or, when limit > 0, limit bytes.
func sendTCP(c *net.TCPConn, deadline time.Time, limit int64, n *atomic.Int64) error {
	c.SetWriteDeadline(deadline)
	buf := make([]byte, tcpBlock)
	for {
		b := buf
		if limit > 0 {
			left := limit - n.Load()
			if left <= 0 {
				return nil
			}
			b = buf[:min(int64(len(buf)), left)]
		}
		k, err := c.Write(b)
		n.Add(int64(k))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (s *Server) runUDP(ctx context.Context, ctl net.Conn, sess *session) (message, error) {
	var peer netip.AddrPort
	select {
	case peer = <-sess.hello:
	case <-time.After(handshakeTimeout):
		return message{}, fmt.Errorf("no UDP hello within %v (is UDP port %d blocked?)", handshakeTimeout, s.udp.LocalAddr().(*net.UDPAddr).Port)
	case <-ctx.Done():
		return message{}, ctx.Err()
	}
	dur := time.Duration(sess.req.DurationMs) * time.Millisecond
	every := time.Duration(sess.req.IntervalMs) * time.Millisecond
	start := time.Now()
	end := start.Add(dur + finishSlack)
	ctl.SetDeadline(end)
	if sess.req.Dir == "tx" {
		rs := &recvState{u: measure.NewUDPRecv(0, measure.ExpectedPackets(sess.req.Rate, sess.req.PacketSize, dur)), epoch: start}
		sess.recv.Store(rs)
		if err := writeFrame(ctl, message{Type: "start"}); err != nil {
			return message{}, err
		}
		smp := startSampler(start, every, rs.stats)
		var done message
		err := readFrame(ctl, maxRequest, &done)
		stopAt := time.Since(start)
		if err == nil && done.Type != "done" {
			err = fmt.Errorf("%w: %q while waiting for done", ErrProto, done.Type)
		}
		if err != nil {
			smp.finish()
			return message{}, err
		}
		smp.pause()
		time.Sleep(udpGrace)
		rs.sent.Store(done.Packets)
		iv, total, el := smp.finishAt(stopAt)
		sess.recv.Store(nil)
		sum := wholeTest(total, el)
		return message{Type: "result", Intervals: iv, Sum: &sum}, nil
	}
	if err := writeFrame(ctl, message{Type: "start"}); err != nil {
		return message{}, err
	}
	var m sendMeter
	smp := startSampler(start, every, m.stats)
	err := sendUDP(s.udp, net.UDPAddrFromAddrPort(peer), sess.id, sess.req.Rate, sess.req.PacketSize, start,
		start.Add(dur), ctx.Done(), &m)
	iv, total, el := smp.finish()
	if err != nil {
		return message{}, fmt.Errorf("sending UDP: %w", err)
	}
	sum := wholeTest(total, el)
	return message{Type: "result", Intervals: iv, Sum: &sum, Packets: total.Packets}, nil
}

// readUDP dispatches datagrams to their session until the socket closes.
func (s *Server) readUDP() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		at := time.Now()
		d, err := parseDatagram(buf[:n])
		if err != nil {
			s.badDatagram(from, err)
			continue
		}
		s.mu.Lock()
		sess := s.byID[d.session]
		s.mu.Unlock()
		if sess == nil || from.Addr().Unmap() != sess.client {
			s.badDatagram(from, errors.New("datagram for no test of this client"))
			continue
		}
		if d.seq == helloSeq {
			select {
			case sess.hello <- from:
			default: // repeated hello
			}
			continue
		}
		if rs := sess.recv.Load(); rs != nil {
			rs.add(d, n, at)
		}
	}
}

func (s *Server) badDatagram(from netip.AddrPort, err error) {
	if s.Dropped.Add(1)%1000 == 1 { // a flood logs one line per thousand
		s.log.Debug("stream: dropping datagram", "peer", from, "err", err)
	}
}
