package perfsrv

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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/internal/refuse"
)

// Iperf3 is an iperf3-compatible server. Build it with NewIperf3; Serve
// runs it until ctx ends.
type Iperf3 struct {
	cfg    Config
	ln     *net.TCPListener
	udp    *net.UDPConn // unconnected: receives the UDP stream set-up datagrams
	local  netip.AddrPort
	refuse *refuse.Log

	mu       sync.Mutex
	byCookie map[string]*iperf3Test
	tests    slots                      // tests running, by client address
	udpWait  map[netip.Addr]*iperf3Test // the test taking UDP streams from an address
	pending  slots                      // connections before their cookie
	setup    slots                      // tests between their cookie and TEST_START
	reserved int                        // test slots kept for the new tests that evicted their holders (iperf3setup.go)
	waiters  map[*admitWaiter]struct{}
	udpPPS   ppsPool // datagrams/s the running UDP tests were admitted with

	payloadOnce sync.Once
	payload     []byte // read-only: what every TCP sending stream writes

	wg sync.WaitGroup
}

// A real client writes its cookie as soon as it connects, and its
// parameters as soon as it is asked: both come within a round trip. A
// connection that has not sent its cookie is pending: at most
// maxPendingPerAddr from one address and maxPending in all, each for at
// most handshakeTimeout, so connections that never speak cannot hold the
// process's descriptors (see perfsrv/DESIGN.md#handshake-budget-row-4).
// iperf3 opens a test's streams one after another, so one client has one
// connection pending at a time; the bench stream server keeps 64 in all.
const (
	handshakeTimeout  = 3 * time.Second
	maxPending        = 64
	maxPendingPerAddr = 8
)

// NewIperf3 validates cfg and binds TCP and UDP on cfg.Addr.
func NewIperf3(cfg Config) (*Iperf3, error) {
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("iperf3 listen on %s: %w (another iperf3 -s running? set iperf3.listen or --iperf3-addr)", cfg.Addr, err)
	}
	local := addrPort(ln.Addr())
	lc := net.ListenConfig{Control: reuseAddr}
	pc, err := lc.ListenPacket(context.Background(), "udp", net.JoinHostPort(hostOf(cfg.Addr), strconv.Itoa(int(local.Port()))))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("iperf3 UDP listen on port %d: %w", local.Port(), err)
	}
	return &Iperf3{
		cfg: cfg, ln: ln.(*net.TCPListener), udp: pc.(*net.UDPConn), local: local,
		refuse:   refuse.New(cfg.Log, 0),
		byCookie: map[string]*iperf3Test{}, udpWait: map[netip.Addr]*iperf3Test{},
	}, nil
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}

// Addr is the bound address (TCP and UDP share the port).
func (s *Iperf3) Addr() net.Addr { return s.ln.Addr() }

// Refusals counts refused connections and tests by reason.
func (s *Iperf3) Refusals() map[string]uint64 { return s.refuse.Counts() }

// Running is the number of tests in progress.
func (s *Iperf3) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tests.all
}

// Serve accepts tests until ctx ends, then ends running tests (the
// clients are told the server terminated) and returns nil.
func (s *Iperf3) Serve(ctx context.Context) error {
	return serve(ctx, s.ln, s.udp, &s.wg, s.readUDP,
		func(c *net.TCPConn, seq uint64) { s.handle(ctx, c, seq) },
		s.refuse, "iperf3")
}

// handle reads the cookie of a new connection: a stream of a test being
// set up, or the control connection of a new test. Until its cookie is read
// and, for a new test, a slot is found, the connection holds a pending
// slot: the pending caps bound what waits.
func (s *Iperf3) handle(ctx context.Context, c *net.TCPConn, seq uint64) {
	peer := addrPort(c.RemoteAddr())
	ip := peer.Addr().Unmap()
	if !s.claimPending(ip) {
		s.refuse.Refuse("iperf3: too many connections before their cookie", ip.String(),
			"max_pending", maxPending, "max_pending_per_client", maxPendingPerAddr)
		_ = c.SetLinger(0) // a reset: no FIN_WAIT or TIME_WAIT kept for a flood
		c.Close()
		return
	}
	key, ok := s.readCookie(c, ip)
	if !ok {
		s.releasePending(ip)
		return
	}
	if t := s.testByCookie(key); t != nil {
		s.releasePending(ip)
		s.joinTest(t, c, seq, ip)
		return
	}
	res := s.admit(ip)
	s.releasePending(ip)
	if res != admitted {
		s.refuseBusy(c, ip, res)
		return
	}
	s.runTest(ctx, c, peer, key)
}

// readCookie reads a connection's cookie within handshakeTimeout and
// returns its key (the cookie without its NUL); false: refused and closed.
func (s *Iperf3) readCookie(c *net.TCPConn, ip netip.Addr) (string, bool) {
	_ = c.SetReadDeadline(time.Now().Add(s.handshakeTimeout()))
	var ck [cookieSize]byte
	if _, err := io.ReadFull(c, ck[:]); err != nil {
		s.refuse.Refuse("iperf3: no cookie", ip.String(), "err", err)
		_ = c.SetLinger(0)
		c.Close()
		return "", false
	}
	if !validCookie(ck[:]) {
		s.refuse.Refuse("iperf3: not an iperf3 cookie (not an iperf3 client?)", ip.String())
		c.Close()
		return "", false
	}
	return string(ck[:cookieSize-1]), true
}

// testByCookie is the test a cookie belongs to, nil for a new one.
func (s *Iperf3) testByCookie(key string) *iperf3Test {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byCookie[key]
}

// joinTest hands a data stream to its test, or refuses it when the test
// takes no more streams.
func (s *Iperf3) joinTest(t *iperf3Test, c *net.TCPConn, seq uint64, ip netip.Addr) {
	// A stream reads until its test ends it (measure.stop sets the
	// deadline then): the cookie's deadline left on it would cut the end
	// of the test off the record (see perfsrv/DESIGN.md#stream-deadline).
	_ = c.SetReadDeadline(time.Time{})
	if !t.offerTCP(c, seq) {
		s.refuse.Refuse("iperf3: stream for a test that takes no more streams", ip.String(), "test", t.cookie[:8])
		_, _ = c.Write([]byte{stateByte(stateAccessDenied)})
		c.Close()
	}
}

// refuseBusy tells a new test's client the server is busy (ACCESS_DENIED)
// and counts why.
func (s *Iperf3) refuseBusy(c *net.TCPConn, ip netip.Addr, res admitResult) {
	l := s.cfg.Limits
	s.mu.Lock()
	running, mine, setups := s.tests.all, s.tests.by[ip], s.setup.by[ip]
	s.mu.Unlock()
	reason := "iperf3: busy"
	if res == admitSetupBusy {
		reason = "iperf3: busy (tests in set-up from this client)"
	}
	s.refuse.Refuse(reason, ip.String(), append(clientAttrs(s.cfg.Clients, ip),
		"running", running, "max_tests", l.MaxTests, "client_running", mine, "max_per_client", l.MaxPerClient,
		"client_in_setup", setups, "max_setup_per_client", maxSetupPerAddr)...)
	_, _ = c.Write([]byte{stateByte(stateAccessDenied)})
	c.Close()
}

// runTest registers an admitted test under its cookie, runs it and gives
// its slots back at its end.
func (s *Iperf3) runTest(ctx context.Context, c *net.TCPConn, peer netip.AddrPort, key string) {
	ip := peer.Addr().Unmap()
	l := s.cfg.Limits
	t := &iperf3Test{s: s, ctl: c, peer: peer, cookie: key, tcpIn: make(chan seqConn, 2*l.MaxStreams),
		udpIn: make(chan *net.UDPConn, 2*l.MaxStreams), setup: newSetupState(time.Now())}
	s.mu.Lock()
	if s.byCookie[key] != nil { // the same cookie twice at once: not a real client
		s.tests.give(ip)
		s.setup.give(ip)
		s.mu.Unlock()
		s.refuse.Refuse("iperf3: not an iperf3 cookie (not an iperf3 client?)", ip.String())
		c.Close()
		return
	}
	s.byCookie[key] = t
	s.mu.Unlock()
	defer s.endTest(t, ip)
	t.run(ctx)
}

// endTest takes a finished test out of the server and gives its slots back.
func (s *Iperf3) endTest(t *iperf3Test, ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byCookie, t.cookie)
	if s.udpWait[ip] == t {
		delete(s.udpWait, ip)
	}
	s.tests.give(ip)
	if !t.setupGiven {
		s.setup.give(ip)
	}
}

// endSetup gives the set-up slot back as the test starts (false: it was
// evicted just before).
func (t *iperf3Test) endSetup() bool {
	if !t.setup.start() {
		return false
	}
	s := t.s
	s.mu.Lock()
	s.setup.give(t.peer.Addr().Unmap())
	t.setupGiven = true
	s.mu.Unlock()
	return true
}

// maxTCPLen is the largest -l of a TCP test: iperf3's own MAX_BLOCKSIZE,
// beyond which its client refuses to start, so no board asks more.
const maxTCPLen = 1 << 20

// minTCPWrite: blocks shorter than this go several to a write. The byte
// stream is the same; a -l 1 test no longer costs a system call a byte.
const minTCPWrite = 128 << 10

// sendPayload is what every TCP sending stream writes: one read-only
// buffer of maxTCPLen for all streams of all tests, built at the first,
// so memory does not grow with streams x -l: unread streams cannot make
// the server hold -l each (see perfsrv/DESIGN.md#sending-memory-row-5).
func (s *Iperf3) sendPayload() []byte {
	s.payloadOnce.Do(func() { s.payload = payload(maxTCPLen) })
	return s.payload
}

// claimPending takes a handshake slot for a connection from ip (false:
// none left, for ip or in all).
func (s *Iperf3) claimPending(ip netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending.take(ip, maxPending, maxPendingPerAddr)
}

func (s *Iperf3) releasePending(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending.give(ip)
}

// handshakeTimeout bounds the wait for the cookie and for the parameters.
func (s *Iperf3) handshakeTimeout() time.Duration { return min(handshakeTimeout, s.cfg.SetupTimeout) }

// readUDP answers the UDP stream set-up datagrams: each gets its own socket
// on the server port, connected to the client, handed to the test that
// waits for UDP streams from that address.
func (s *Iperf3) readUDP() {
	buf := make([]byte, 65536)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err == nil { // else transient (an ICMP error queued on the socket)
			s.openUDPStream(n, from)
		}
	}
}

// openUDPStream answers a stream set-up datagram of n bytes from from: a
// socket of the stream's own, connected to from, handed to the test that
// waits for UDP streams from its address.
func (s *Iperf3) openUDPStream(n int, from netip.AddrPort) {
	ip := from.Addr().Unmap()
	s.mu.Lock()
	t := s.udpWait[ip]
	s.mu.Unlock()
	if t == nil || !t.accepting.Load() || n != 4 {
		s.refuse.Refuse("iperf3: UDP datagram outside a stream set-up", ip.String(), "bytes", n)
		return
	}
	d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.udpLocalIP(), s.local.Port())), Control: reuseAddr}
	c, err := d.Dial("udp", from.String())
	if err != nil {
		s.cfg.Log.Warn("iperf3: cannot open a UDP stream socket", "client", ip.String(), "err", err)
		return
	}
	var reply [4]byte
	binary.LittleEndian.PutUint32(reply[:], udpConnectReply)
	if _, err := c.Write(reply[:]); err != nil {
		c.Close()
		return
	}
	select {
	case t.udpIn <- c.(*net.UDPConn):
	default:
		c.Close()
	}
}

func (s *Iperf3) udpLocalIP() netip.Addr {
	a := addrPort(s.udp.LocalAddr()).Addr()
	if !a.IsValid() {
		return netip.IPv4Unspecified()
	}
	return a
}

type seqConn struct {
	c   *net.TCPConn
	seq uint64
}

// iperf3Test is one iperf3 test: its control connection and streams.
type iperf3Test struct {
	s      *Iperf3
	ctl    *net.TCPConn
	peer   netip.AddrPort
	cookie string
	p      Params

	ctlMu      sync.Mutex // writes on ctl
	setup      *setupState
	setupGiven bool // under s.mu: its set-up slot was given back at TEST_START
	accepting  atomic.Bool
	tcpIn      chan seqConn
	udpIn      chan *net.UDPConn
}

func (t *iperf3Test) offerTCP(c *net.TCPConn, seq uint64) bool {
	if !t.accepting.Load() {
		return false
	}
	select {
	case t.tcpIn <- seqConn{c, seq}:
		return true
	default:
		return false
	}
}

func (t *iperf3Test) send(b ...byte) error {
	t.ctlMu.Lock()
	defer t.ctlMu.Unlock()
	_ = t.ctl.SetWriteDeadline(time.Now().Add(t.s.cfg.SetupTimeout))
	_, err := t.ctl.Write(b)
	return err
}

func (t *iperf3Test) state(st int) error { return t.send(stateByte(st)) }

// run is the whole test: parameters, streams, the measured part, results.
func (t *iperf3Test) run(ctx context.Context) {
	log := t.s.cfg.Log.With(append(clientAttrs(t.s.cfg.Clients, t.clientIP()), "test", t.cookie[:8])...)
	defer t.ctl.Close()
	_ = t.ctl.SetNoDelay(true)
	defer t.terminateOnShutdown(ctx)()
	if !t.readParams(log) {
		return
	}
	release, ok := t.admitParams(log)
	if !ok {
		return
	}
	defer release()
	ss, ok := t.openStreams(log)
	if !ok {
		return
	}
	defer func() {
		for _, st := range ss {
			st.c.Close()
		}
	}()
	if !t.endSetup() {
		log.Warn("iperf3 test ended: idle in set-up, its slot given to a new test")
		return
	}
	t.runMeasured(ss, log)
}

// clientIP is the client's address, unmapped.
func (t *iperf3Test) clientIP() netip.Addr { return t.peer.Addr().Unmap() }

// terminateOnShutdown tells the client the server terminated, and closes
// the control connection, if ctx ends before the test; stop ends the watch.
func (t *iperf3Test) terminateOnShutdown(ctx context.Context) (stop func()) {
	ended := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = t.state(stateServerTerminate)
			t.ctl.Close()
		case <-ended:
		}
	}()
	return func() { close(ended) }
}

// readParams asks for the parameters (PARAM_EXCHANGE) and reads them into
// t.p; false: the client left or sent none the server can run, and was
// told why.
func (t *iperf3Test) readParams(log *slog.Logger) bool {
	if err := t.state(stateParamExchange); err != nil {
		log.Info("iperf3 test ended: client left before the parameters", "err", err)
		return false
	}
	_ = t.ctl.SetReadDeadline(time.Now().Add(t.s.handshakeTimeout()))
	b, err := readJSON(t.ctl)
	if err != nil && t.setup.wasEvicted() {
		return false // counted as its eviction
	}
	if err != nil {
		log.Warn("iperf3 test ended: no parameters (wrong cookie on a data stream, or not an iperf3 client)", "err", err)
		if !errors.Is(err, io.EOF) {
			_ = t.send(serverError(ieRecvParams, int(syscall.EBADMSG))...)
		}
		return false
	}
	p, err := ParseParams(b)
	if err != nil {
		errno := syscall.EBADMSG
		if p.SCTP {
			errno = syscall.EPROTONOSUPPORT
		}
		log.Warn("iperf3 test refused: bad parameters", "err", err)
		_ = t.send(serverError(ieRecvParams, int(errno))...)
		return false
	}
	t.p = p
	t.setup.stepped()
	return true
}

// admitParams checks the parameters against the caps and, for a UDP test,
// claims its datagrams/s within MaxPPSTotal; release gives them back.
// false: refused, and the client told why.
func (t *iperf3Test) admitParams(log *slog.Logger) (release func(), ok bool) {
	ip := t.clientIP()
	if ie, errno, why := t.overCap(); why != "" {
		t.s.refuse.Refuse("iperf3: over cap", ip.String(), "why", why)
		log.Warn("iperf3 test refused: over cap", "why", why)
		_ = t.send(serverError(ie, errno)...)
		return nil, false
	}
	if !t.p.UDP {
		return func() {}, true
	}
	pps := t.pps()
	if !t.s.claimPPS(pps) {
		why := fmt.Sprintf("%d datagrams/s: the running UDP tests have %d of %d (iperf3.max_pps_total)", pps, t.s.udpPPSNow(), t.s.cfg.Limits.MaxPPSTotal)
		t.s.refuse.Refuse("iperf3: UDP packet budget", ip.String(), "why", why)
		log.Warn("iperf3 test refused: busy", "why", why)
		_ = t.send(serverError(ieAccessDenied, 0)...)
		return nil, false
	}
	return func() { t.s.releasePPS(pps) }, true
}

// openStreams asks for the streams (CREATE_STREAMS) and takes them as they
// come, UDP ones one client test at a time; false: they did not all come,
// and the client was told.
func (t *iperf3Test) openStreams(log *slog.Logger) ([]*iperf3Stream, bool) {
	p, ip := t.p, t.clientIP()
	dirs := 1
	if p.Bidir {
		dirs = 2
	}
	want := p.Parallel * dirs
	if p.UDP && !t.waitUDPTurn(ip) {
		log.Warn("iperf3 test ended: another UDP test from this client was still setting up")
		_ = t.send(serverError(ieInitTest, int(syscall.EBUSY))...)
		return nil, false
	}
	t.accepting.Store(true)
	if err := t.state(stateCreateStreams); err != nil {
		return nil, false
	}
	conns, err := t.collect(want)
	t.accepting.Store(false)
	if p.UDP {
		t.s.mu.Lock()
		delete(t.s.udpWait, ip)
		t.s.mu.Unlock()
	}
	if err != nil {
		if !t.setup.wasEvicted() {
			log.Warn("iperf3 test ended: streams did not arrive", "err", err, "want", want, "got", len(conns))
		}
		_ = t.send(serverError(ieStreamAccept, int(syscall.ETIMEDOUT))...)
		for _, c := range conns {
			c.Close()
		}
		return nil, false
	}
	return t.streams(conns, log), true
}

// runMeasured starts the test (TEST_START, TEST_RUNNING), measures it
// until its end, exchanges the results and records it.
func (t *iperf3Test) runMeasured(ss []*iperf3Stream, log *slog.Logger) {
	m := newMeasure(t, ss)
	if err := t.state(stateTestStart); err != nil {
		return
	}
	if err := t.state(stateTestRunning); err != nil {
		return
	}
	m.start()
	outcome, why := t.waitEnd(t.runLimit())
	m.stop(outcome == "ok")
	var client *results
	if outcome == "ok" {
		client = t.exchange(m, log)
	}
	for _, f := range m.events(client, outcome, why) {
		t.s.cfg.Sink.Fetch(f)
	}
	if outcome != "ok" {
		log.Warn("iperf3 test ended early", "why", why)
	}
}

// overCap checks the parameters against the limits: the i_errno and errno
// the client prints, and why for the log ("" when within the caps).
func (t *iperf3Test) overCap() (ie, errno int, why string) {
	l, p := t.s.cfg.Limits, t.p
	dirs := int64(1)
	if p.Bidir {
		dirs = 2
	}
	if p.TCP && p.Len > maxTCPLen {
		return ieBlockSize, 0, fmt.Sprintf("-l %d: at most %d bytes a block (iperf3's own limit)", p.Len, maxTCPLen)
	}
	if p.TCP && p.Congestion != "" {
		if allowed, ok := congestionAllowed(p.Congestion); !ok {
			return ieSetCongestion, int(syscall.EPERM), fmt.Sprintf("-C %s: not in net.ipv4.tcp_allowed_congestion_control (%s)",
				p.Congestion, strings.Join(allowed, " "))
		}
	}
	if p.Parallel > l.MaxStreams {
		return ieInitTest, int(syscall.EMFILE), fmt.Sprintf("-P %d: at most %d streams per test", p.Parallel, l.MaxStreams)
	}
	if d := time.Duration(p.Time+p.Omit) * time.Second; d > l.MaxDuration {
		return ieInitTest, int(syscall.ERANGE), fmt.Sprintf("-t %d -O %d: at most %s per test", p.Time, p.Omit, l.MaxDuration)
	}
	if total := p.Bandwidth * int64(p.Parallel) * dirs; total > l.MaxRate {
		return ieTotalRate, 0, fmt.Sprintf("-b %d x %d streams x %d directions = %d bit/s: at most %d bit/s per test",
			p.Bandwidth, p.Parallel, dirs, total, l.MaxRate)
	}
	if !p.UDP {
		return 0, 0, ""
	}
	if _, why := udpPacketRule(l, "iperf3", p.Bandwidth, t.udpLen(), int64(p.Parallel), dirs); why != "" {
		if t.udpLen() < l.MinUDPLen {
			return ieInitTest, int(syscall.EINVAL), why
		}
		return ieTotalRate, 0, why
	}
	return 0, 0, ""
}

// udpLen is a UDP test's datagram size.
func (t *iperf3Test) udpLen() int {
	if t.p.Len > 0 {
		return t.p.Len
	}
	return udpDefaultLen
}

// streamPPS is the datagrams per second one stream of a UDP test asks for.
func (t *iperf3Test) streamPPS() int64 { return t.p.Bandwidth / (8 * int64(t.udpLen())) }

// pps is what a UDP test asks for over all its streams and directions.
func (t *iperf3Test) pps() int64 {
	dirs := int64(1)
	if t.p.Bidir {
		dirs = 2
	}
	return t.streamPPS() * int64(t.p.Parallel) * dirs
}

func (s *Iperf3) udpPPSNow() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udpPPS.used
}

// claimPPS admits a UDP test's datagram rate within MaxPPSTotal (false:
// the running UDP tests have it); releasePPS gives it back.
func (s *Iperf3) claimPPS(pps int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udpPPS.take(pps, s.cfg.Limits.MaxPPSTotal)
}

func (s *Iperf3) releasePPS(pps int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.udpPPS.give(pps)
}

// waitUDPTurn serializes the UDP stream set-up per client address: the
// set-up datagrams carry no cookie, so only one test of a client may
// collect them at a time.
func (t *iperf3Test) waitUDPTurn(ip netip.Addr) bool {
	deadline := time.Now().Add(t.s.cfg.SetupTimeout)
	for time.Now().Before(deadline) && !t.setup.wasEvicted() {
		t.s.mu.Lock()
		if t.s.udpWait[ip] == nil {
			t.s.udpWait[ip] = t
			t.s.mu.Unlock()
			return true
		}
		t.s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// collect waits for want streams, TCP in accept order (the client connects
// them one after another; iperf3 numbers them in that order).
func (t *iperf3Test) collect(want int) ([]net.Conn, error) {
	timer := time.NewTimer(t.s.cfg.SetupTimeout)
	defer timer.Stop()
	var tcp []seqConn
	var conns []net.Conn
	for len(tcp)+len(conns) < want {
		select {
		case sc := <-t.tcpIn:
			tcp = append(tcp, sc)
			t.setup.stepped()
		case c := <-t.udpIn:
			conns = append(conns, c)
			t.setup.stepped()
		case <-t.setup.evictedC:
			for _, sc := range tcp {
				conns = append(conns, sc.c)
			}
			return conns, fmt.Errorf("%d of %d streams: idle in set-up, its slot given to a new test", len(conns), want)
		case <-timer.C:
			for _, sc := range tcp {
				conns = append(conns, sc.c)
			}
			return conns, fmt.Errorf("%d of %d streams within %s", len(conns), want, t.s.cfg.SetupTimeout)
		}
	}
	if len(tcp) > 0 {
		// Insertion sort: at most a few hundred.
		for i := 1; i < len(tcp); i++ {
			for j := i; j > 0 && tcp[j].seq < tcp[j-1].seq; j-- {
				tcp[j], tcp[j-1] = tcp[j-1], tcp[j]
			}
		}
		for _, sc := range tcp {
			conns = append(conns, sc.c)
		}
	}
	return conns, nil
}

// streams assigns ids and roles: the server receives on the client's
// sending streams (made first under --bidir) and sends on the rest.
func (t *iperf3Test) streams(conns []net.Conn, log interface{ Debug(string, ...any) }) []*iperf3Stream {
	p := t.p
	ss := make([]*iperf3Stream, len(conns))
	for i, c := range conns {
		sender := p.Reverse || p.Bidir && i >= p.Parallel
		st := &iperf3Stream{id: streamID(i), sender: sender, c: c, udp: p.UDP}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(p.NoDelay)
			if p.Congestion != "" {
				if err := setCongestion(tc, p.Congestion); err != nil {
					log.Debug("iperf3: congestion control not set", "algo", p.Congestion, "err", err)
				}
			}
		}
		if p.Window > 0 {
			type bufs interface {
				SetReadBuffer(int) error
				SetWriteBuffer(int) error
			}
			if b, ok := c.(bufs); ok {
				_ = b.SetReadBuffer(p.Window)
				_ = b.SetWriteBuffer(p.Window)
			}
		} else if p.UDP {
			if u, ok := c.(*net.UDPConn); ok {
				_ = u.SetReadBuffer(4 << 20)
			}
		}
		ss[i] = st
	}
	return ss
}

// endGrace is how late a -t test's TEST_END may come: the client sends it
// when its own timer ends, and a loaded board or host is a second or two
// late.
const endGrace = 5 * time.Second

// runLimit bounds the measured part: -t and -O plus endGrace, and a test
// ended by -n or -k (no -t) at MaxDuration.
func (t *iperf3Test) runLimit() time.Duration {
	var d time.Duration
	if t.p.Time > 0 {
		d = time.Duration(t.p.Time+t.p.Omit) * time.Second
	}
	return runLimit(t.s.cfg.Limits, d)
}

// runLimit is how long a test that asked for d (0: it ends by bytes or
// blocks) may run, iperf3's and iperf 2's alike: d within MaxDuration plus
// endGrace, or MaxDuration, however few bytes a slow or silent board lets
// through (see perfsrv/DESIGN.md#whole-test-time-row-18).
func runLimit(l Limits, d time.Duration) time.Duration {
	if d > 0 {
		return min(d, l.MaxDuration) + endGrace
	}
	return l.MaxDuration
}

// waitEnd reads the control connection during the test, for at most limit:
// TEST_END is the normal end; anything else ends it early.
func (t *iperf3Test) waitEnd(limit time.Duration) (outcome, why string) {
	_ = t.ctl.SetReadDeadline(time.Now().Add(limit))
	var b [1]byte
	_, err := io.ReadFull(t.ctl, b[:])
	switch {
	case err == nil && int8(b[0]) == stateTestEnd:
		return "ok", ""
	case err == nil && int8(b[0]) == stateClientTerminate:
		return "aborted", "client terminated the test (Ctrl-C)"
	case err == nil:
		return "error", fmt.Sprintf("unexpected control state %d", int8(b[0]))
	case os.IsTimeout(err) && t.p.Time == 0:
		_ = t.state(stateServerTerminate)
		return "aborted", fmt.Sprintf("-n/-k test stopped at %s (iperf3.max_duration) before its end", limit)
	case os.IsTimeout(err):
		_ = t.state(stateServerTerminate)
		return "aborted", fmt.Sprintf("no TEST_END within %s (-t, -O and %s)", limit, endGrace)
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return "aborted", "client vanished mid-test (control connection closed)"
	}
	return "aborted", "control connection: " + err.Error()
}

// exchange runs the result exchange and returns the client's results (nil
// when it failed; the test is still recorded from the server's side).
func (t *iperf3Test) exchange(m *measure, log interface {
	Warn(string, ...any)
	Debug(string, ...any)
}) *results {
	if err := t.state(stateExchangeResults); err != nil {
		log.Warn("iperf3: client left before the results", "err", err)
		return nil
	}
	_ = t.ctl.SetReadDeadline(time.Now().Add(t.s.cfg.SetupTimeout))
	b, err := readJSON(t.ctl)
	if err != nil {
		log.Warn("iperf3: no results from the client", "err", err)
		return nil
	}
	cr, err := parseResults(b)
	if err != nil {
		log.Warn("iperf3: client results unreadable", "err", err)
		_ = t.send(serverError(ieRecvResults, int(syscall.EBADMSG))...)
		return nil
	}
	out := m.results(&cr)
	if t.p.GetServerOutput {
		out.ServerOutputText = m.text()
	}
	t.ctlMu.Lock()
	_ = t.ctl.SetWriteDeadline(time.Now().Add(t.s.cfg.SetupTimeout))
	err = writeJSON(t.ctl, out)
	t.ctlMu.Unlock()
	if err != nil {
		log.Warn("iperf3: cannot send results", "err", err)
		return &cr
	}
	if err := t.state(stateDisplayResults); err != nil {
		return &cr
	}
	_ = t.ctl.SetReadDeadline(time.Now().Add(t.s.cfg.SetupTimeout))
	var b1 [1]byte
	if _, err := io.ReadFull(t.ctl, b1[:]); err == nil && int8(b1[0]) != stateIperfDone {
		log.Debug("iperf3: expected IPERF_DONE", "state", int8(b1[0]))
	}
	return &cr
}
