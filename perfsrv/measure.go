package perfsrv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/event"
	meas "github.com/pxeperf/pxeperf/measure"
)

// iperf3Stream is one data stream of a test.
type iperf3Stream struct {
	id     int
	sender bool // the server sends on it
	udp    bool
	c      net.Conn

	bytes    atomic.Int64 // payload bytes read, or written
	lastRead atomic.Int64 // UnixNano of the last read with data
	base     int64        // bytes at the measured start (after -O)

	// UDP receiver (iperf_udp_recv's figures, from measure.UDPRecv), set
	// when the reading goroutine ends.
	packets int64   // highest sequence number seen
	lost    int64   // cnt_error
	jitter  float64 // seconds
	// UDP sender
	sent int64 // datagrams

	atEnd tcpState
}

// measure runs the measured part of a test and keeps its samples.
type measure struct {
	t       *iperf3Test
	ss      []*iperf3Stream
	wall    time.Time // test start (TEST_RUNNING sent)
	t0      time.Time // measured start (after the omitted seconds)
	end     time.Time
	ended   chan struct{}
	stopped atomic.Bool
	wg      sync.WaitGroup
	total   atomic.Int64 // bytes the server sent, all streams (-n)
	blocks  atomic.Int64 // blocks the server sent (-k)

	congestion string // TCP congestion control of the streams

	// One sampler a direction, from t0 (meas.Sampler); their readings
	// land in baseTx, tx, baseRx and rx at stop.
	smpTx, smpRx *sampleTicker
	mu           sync.Mutex
	baseTx       sample // at t0, the direction the board sends (server receives)
	baseRx       sample
	tx, rx       []sample
}

func newMeasure(t *iperf3Test, ss []*iperf3Stream) *measure {
	return &measure{t: t, ss: ss, ended: make(chan struct{})}
}

func (m *measure) start() {
	m.wall = time.Now()
	m.t0 = m.wall.Add(time.Duration(m.t.p.Omit) * time.Second)
	for _, st := range m.ss {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			switch {
			case st.sender && st.udp:
				m.sendUDP(st)
			case st.sender:
				m.sendTCP(st)
			case st.udp:
				m.recvUDP(st)
			default:
				m.recvTCP(st)
			}
		}()
	}
	m.smpTx, m.smpRx = m.sampler(false), m.sampler(true)
}

// snap sums one direction: sending=true is the server's sending streams.
func (m *measure) snap(sending bool, at time.Duration) sample {
	s := sample{at: at}
	first := true
	for _, st := range m.ss {
		if st.sender != sending {
			continue
		}
		if sending && !st.udp {
			ti := readTCPInfo(st.c)
			if ti.ok {
				s.bytes += ti.acked
				s.retransmits += ti.retransmits
				s.cwnd += ti.cwnd
				if first {
					s.rtt, s.sndWnd = ti.rtt, ti.sndWnd
				}
				first = false
				continue
			}
		}
		s.bytes += st.bytes.Load()
	}
	return s
}

// sampler samples one direction (sending: the server's sending streams)
// every period from t0.
//
// The base is what came before the measured start: only the omitted
// seconds (-O). Without them it is zero, not a snapshot taken when the
// sampler first runs: on a loaded host that can be after the first
// megabytes, and the record would come out short of what the board sent
// (see perfsrv/DESIGN.md#sampler-base).
func (m *measure) sampler(sending bool) *sampleTicker {
	return startSampling(m.t0, m.t.s.cfg.Interval, func(at time.Duration) sample {
		s := m.snap(sending, at)
		if at == 0 { // the base
			for _, st := range m.ss {
				if st.sender == sending && (!st.sender || st.udp) {
					st.base = st.bytes.Load()
				}
			}
		}
		return s
	}, m.t0.After(m.wall))
}

// After TEST_END the receivers read what is still in flight until a
// stream is idle for drainIdle (at most drainMax): the client counted those
// bytes as sent before it stopped, and a loaded host may hold them in its
// socket buffer for a while, longer than any fixed wait (see
// perfsrv/DESIGN.md#drain-after-test_end).
const (
	drainIdle = 100 * time.Millisecond
	drainMax  = 3 * time.Second
)

// drain moves a receiving stream's deadline on while bytes still come
// after the end.
func (m *measure) drain(st *iperf3Stream) {
	if m.stopped.Load() {
		until := time.Now().Add(drainIdle)
		if last := m.end.Add(drainMax); until.After(last) {
			until = last
		}
		_ = st.c.SetReadDeadline(until)
	}
}

// stop ends the measured part (see drainIdle for the bytes after it).
func (m *measure) stop(ok bool) {
	m.end = time.Now()
	if m.end.Before(m.t0) {
		m.t0 = m.end // ended during the omitted seconds
	}
	for _, st := range m.ss {
		if st.sender {
			_ = st.c.SetWriteDeadline(time.Now())
			if !st.udp {
				st.atEnd = readTCPInfo(st.c)
			}
		} else {
			d := drainIdle
			if !ok {
				d = 0
			}
			_ = st.c.SetReadDeadline(m.end.Add(d))
		}
	}
	if len(m.ss) > 0 {
		m.congestion = congestion(m.ss[0].c)
	}
	m.stopped.Store(true)
	close(m.ended)
	m.smpTx.pause()
	m.smpRx.pause()
	m.wg.Wait()
	// iperf3 closes the streams at TEST_END, before the result exchange:
	// a 3.12 client may sit in a blocking read of a stream until then.
	for _, st := range m.ss {
		st.c.Close()
	}
	at := m.end.Sub(m.t0)
	m.mu.Lock()
	tx := m.snap(false, at)
	rx := m.snap(true, at)
	// Bytes acknowledged at TEST_END, not after: the client stopped
	// reading then.
	rx.bytes, rx.retransmits, rx.cwnd = 0, 0, 0
	for _, st := range m.ss {
		if !st.sender {
			continue
		}
		if st.udp || !st.atEnd.ok {
			rx.bytes += st.bytes.Load()
			continue
		}
		rx.bytes += st.atEnd.acked
		rx.retransmits += st.atEnd.retransmits
		rx.cwnd += st.atEnd.cwnd
	}
	m.baseTx, m.tx = m.smpTx.stopBase(tx)
	m.baseRx, m.rx = m.smpRx.stopBase(rx)
	m.mu.Unlock()
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

func (m *measure) blockLen() int {
	if n := m.t.p.Len; n > 0 {
		return n
	}
	if m.t.p.UDP {
		return udpDefaultLen
	}
	return 128 << 10
}

// udpDefaultLen is a UDP test's datagram without -l.
const udpDefaultLen = 1460

// limitReached: -n or -k satisfied (bytes over all sending streams, as
// iperf3 counts test->bytes_sent).
func (m *measure) limitReached() bool {
	p := m.t.p
	return p.Bytes > 0 && m.total.Load() >= p.Bytes || p.Blocks > 0 && m.blocks.Load() >= p.Blocks
}

func (m *measure) sendTCP(st *iperf3Stream) {
	blk := m.blockLen()
	buf := m.t.s.sendPayload()
	rate := m.t.p.Bandwidth
	for !m.stopped.Load() && !m.limitReached() {
		if !meas.Pace(rate, m.wall, st.bytes.Load(), m.ended) {
			return
		}
		k := m.blocksNext(blk)
		n, err := st.c.Write(buf[:k*blk])
		st.bytes.Add(int64(n))
		m.total.Add(int64(n))
		m.blocks.Add(int64(k))
		if err != nil {
			return
		}
	}
	if m.limitReached() {
		<-m.ended // the client ends the test; keep the stream open until then
	}
}

// blocksNext is how many blocks of blk bytes the next TCP write takes:
// enough for minTCPWrite, no more than -n or -k still asks.
func (m *measure) blocksNext(blk int) int {
	k := int64(max(1, minTCPWrite/blk))
	if p := m.t.p; p.Bytes > 0 {
		k = min(k, max(1, (p.Bytes-m.total.Load()+int64(blk)-1)/int64(blk)))
	} else if p.Blocks > 0 {
		k = min(k, max(1, p.Blocks-m.blocks.Load()))
	}
	return int(k)
}

func (m *measure) sendUDP(st *iperf3Stream) {
	size := m.blockLen()
	buf := payload(size)
	rate := m.t.p.Bandwidth
	if rate <= 0 {
		rate = 1e6 // iperf3's UDP default
	}
	wide := m.t.p.UDP64
	for !m.stopped.Load() && !m.limitReached() {
		if !meas.Pace(rate, m.wall, st.bytes.Load(), m.ended) {
			return
		}
		st.sent++
		now := time.Now()
		binary.BigEndian.PutUint32(buf[0:], uint32(now.Unix()))
		binary.BigEndian.PutUint32(buf[4:], uint32(now.Nanosecond()/1000))
		if wide {
			binary.BigEndian.PutUint64(buf[8:], uint64(st.sent))
		} else {
			binary.BigEndian.PutUint32(buf[8:], uint32(st.sent))
		}
		n, err := st.c.Write(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, net.ErrClosed) {
				return
			}
			// ICMP unreachable from a client that went away: it shows as
			// loss; the control connection ends the test.
			continue
		}
		st.bytes.Add(int64(n))
		m.total.Add(int64(n))
		m.blocks.Add(1)
	}
	if m.limitReached() {
		<-m.ended
	}
}

func (m *measure) recvTCP(st *iperf3Stream) {
	buf := make([]byte, 128<<10) // iperf3's own read size; one per receiving stream
	for {
		n, err := st.c.Read(buf)
		if n > 0 {
			st.bytes.Add(int64(n))
			st.lastRead.Store(time.Now().UnixNano())
			m.drain(st)
		}
		if err != nil {
			return
		}
	}
}

// recvUDP counts datagrams, loss, reordering and jitter as iperf_udp_recv
// does (meas.UDPRecv, from sequence number 1; RFC 3550 jitter from the
// sender's timestamps).
func (m *measure) recvUDP(st *iperf3Stream) {
	buf := make([]byte, 65536)
	wide := m.t.p.UDP64
	u := meas.NewUDPRecv(1, 0)
	defer func() { st.packets, st.lost, st.jitter = int64(u.Highest()), u.Lost(0), u.Jitter() }()
	limit := recvLimit{pps: max(2*m.t.streamPPS(), 1000), start: time.Now()}
	for {
		limit.wait(m.ended)
		n, err := st.c.Read(buf)
		if err != nil {
			return
		}
		if n < 12 || wide && n < 16 {
			continue
		}
		now := time.Now()
		st.bytes.Add(int64(n))
		st.lastRead.Store(now.UnixNano())
		sec, usec := binary.BigEndian.Uint32(buf[0:]), binary.BigEndian.Uint32(buf[4:])
		var seq uint64
		if wide {
			seq = binary.BigEndian.Uint64(buf[8:]) & math.MaxInt64
		} else {
			seq = uint64(binary.BigEndian.Uint32(buf[8:]))
		}
		u.Add(seq, n, now.Sub(time.Unix(int64(sec), int64(usec)*1000)))
	}
}

// recvLimit holds a UDP receiver to twice the datagrams per second its
// test asked for: a client that sends more than it asked spends its own
// CPU and the kernel's drops (counted as loss), not the server's reads.
type recvLimit struct {
	pps   int64
	start time.Time
	n     int64
}

// wait is called before each read; every 256 datagrams it sleeps (at most
// 100 ms at a time) while the receiver is ahead of pps.
func (r *recvLimit) wait(ended <-chan struct{}) {
	r.n++
	if r.n%256 != 0 {
		return
	}
	due := r.start.Add(time.Duration(float64(r.n) / float64(r.pps) * float64(time.Second)))
	if d := time.Until(due); d > time.Millisecond {
		tm := time.NewTimer(min(d, 100*time.Millisecond))
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ended:
		}
	}
}

// measured is the length of the measured part.
func (m *measure) measured() time.Duration { return m.end.Sub(m.t0) }

// results are the server's side of the result exchange (send_results).
// Each stream's time is the board's clock for it, from the client's
// results when it gave one (see clientClock): iperf3 prints its receiver
// sums over the time the server returns, so the board's printed figures
// and pxeperf's records are one measure.
func (m *measure) results(client *results) results {
	r := results{SenderHasRetransmit: -1}
	hasSender := false
	for _, st := range m.ss {
		hasSender = hasSender || st.sender
	}
	if hasSender {
		r.SenderHasRetransmit = 0
		if m.t.p.TCP {
			r.SenderHasRetransmit = 1
		}
	}
	if m.t.p.TCP {
		r.Congestion = m.congestion
	}
	secs := m.measured().Seconds()
	board := map[int]float64{}
	if client != nil {
		for _, cs := range client.Streams {
			board[cs.ID] = cs.EndTime - cs.StartTime
		}
	}
	for _, st := range m.ss {
		sr := streamResult{ID: st.id, Retransmits: -1, StartTime: 0, EndTime: secs}
		if b, ok := boardClock(secs, board[st.id]); ok {
			sr.EndTime = b
		}
		if st.sender {
			sr.Bytes = st.bytes.Load() - st.base
			sr.Packets = st.sent
			if !st.udp && st.atEnd.ok {
				sr.Retransmits = int64(st.atEnd.retransmits)
			}
		} else {
			sr.Bytes = st.bytes.Load() - st.base
			sr.Jitter, sr.Errors, sr.Packets = st.jitter, st.lost, st.packets
		}
		r.Streams = append(r.Streams, sr)
	}
	return r
}

// text is the server's output for --get-server-output, in iperf3's layout.
func (m *measure) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pxeperf iperf3-compatible server\nAccepted connection from %s, port %d\n",
		m.t.peer.Addr().Unmap(), m.t.peer.Port())
	b.WriteString("[ ID] Interval           Transfer     Bitrate\n")
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, dir := range []struct {
		name string
		base sample
		ss   []sample
	}{{"RX-S", m.baseTx, m.tx}, {"TX-S", m.baseRx, m.rx}} {
		if len(dir.ss) == 0 || dir.ss[len(dir.ss)-1].bytes == dir.base.bytes {
			continue
		}
		for _, iv := range intervals(dir.base, dir.ss, m.t.s.cfg.Interval/10) {
			fmt.Fprintf(&b, "[SUM][%s] %6.2f-%-6.2f sec  %d Bytes  %.2f Mbits/sec\n", dir.name,
				iv.Start.Seconds(), iv.End.Seconds(), iv.Bytes, float64(iv.Bytes)*8/(iv.End-iv.Start).Seconds()/1e6)
		}
	}
	return b.String()
}

// events are the test's records: one per direction with traffic, summed
// over streams. tx: the board sent (server received); rx: the board
// received (server sent).
func (m *measure) events(client *results, outcome, why string) []*event.Fetch {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*event.Fetch
	for _, sending := range []bool{false, true} {
		if f := m.directionEvent(sending, client, outcome, why); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// directionEvent is the record of one direction (sending: the server's
// sending streams), nil when no stream went that way. Holds m.mu.
func (m *measure) directionEvent(sending bool, client *results, outcome, why string) *event.Fetch {
	mine := m.direction(sending)
	if len(mine) == 0 {
		return nil
	}
	f := m.serverEvent(sending, mine, outcome, why)
	if !sending && outcome == event.OutcomeOK {
		endAtLastRead(f, mine, m.t0)
	}
	m.labels(f)
	m.serverFigures(f, mine, sending)
	cb, secs := m.clientSide(f, client, mine, sending)
	preferBoardBytes(f, mine, sending, m.t.p.UDP, cb)
	clientClock(f, outcome, secs)
	return f
}

// direction is the streams one way: sending, the server's sending streams.
func (m *measure) direction(sending bool) []*iperf3Stream {
	var mine []*iperf3Stream
	for _, st := range m.ss {
		if st.sender == sending {
			mine = append(mine, st)
		}
	}
	return mine
}

// serverEvent is a direction's record as the server measured it: its
// samples' bytes over the measured part.
func (m *measure) serverEvent(sending bool, mine []*iperf3Stream, outcome, why string) *event.Fetch {
	base, ss, dir := m.baseTx, m.tx, "tx"
	if sending {
		base, ss, dir = m.baseRx, m.rx, "rx"
	}
	var bytes int64
	if len(ss) > 0 {
		bytes = ss[len(ss)-1].bytes - base.bytes
	}
	f := &event.Fetch{
		Start: m.wall, Proto: event.ProtoTCP, Client: m.t.peer, File: m.describe(dir), Bytes: bytes, Size: -1,
		Duration: m.measured(), Outcome: outcome, Err: why, Source: SourceIperf3, Direction: dir,
		Interface: ifaceOf(addrPort(m.t.ctl.LocalAddr()).Addr()),
		Intervals: intervals(base, ss, m.t.s.cfg.Interval/10),
		Labels:    map[string]string{"streams": strconv.Itoa(len(mine)), "test": m.t.cookie[:8]},
		Test:      &event.TestInfo{},
	}
	if m.t.p.UDP {
		f.Proto = event.ProtoUDP
	}
	return f
}

// endAtLastRead ends what the board sent at its last byte, which the
// server saw: TEST_END may arrive later on a busy host.
func endAtLastRead(f *event.Fetch, mine []*iperf3Stream, t0 time.Time) {
	var last int64
	for _, st := range mine {
		last = max(last, st.lastRead.Load())
	}
	if d := time.Unix(0, last).Sub(t0); last > 0 && d > 0 && d < f.Duration {
		f.Duration = d
	}
}

// serverFigures puts the server's own TCP_INFO (TCP it sent) or loss and
// jitter (UDP it received) on the record.
func (m *measure) serverFigures(f *event.Fetch, mine []*iperf3Stream, sending bool) {
	udp := m.t.p.UDP
	if sending && !udp {
		f.Test.ServerWritten = written(mine)
		ti := &event.TCPInfo{}
		for i, st := range mine {
			ti.Retransmits += st.atEnd.retransmits
			if i == 0 {
				ti.RTT, ti.SndWnd, ti.MaxSndWnd = st.atEnd.rtt, st.atEnd.sndWnd, st.atEnd.sndWnd
			}
		}
		f.TCP = ti
	}
	if !sending && udp {
		var lost, pk int64
		var jit float64
		for _, st := range mine {
			lost, pk, jit = lost+st.lost, pk+st.packets, jit+st.jitter
		}
		f.UDP = &event.UDPInfo{JitterMs: jit / float64(len(mine)) * 1000, Lost: lost, Packets: pk}
	}
}

// preferBoardBytes makes what the board received (cb, from the result
// exchange; < 0: unknown) the record's bytes, the server's figure kept
// beside it. UDP: only the board knows what arrived. TCP: the board's
// figure is what its application read within its clock; what the server
// saw acknowledged at TEST_END differs both ways on a busy host (unread
// bytes in the board's socket buffer, ACKs still queued; see
// perfsrv/DESIGN.md#board-bytes), and the board cannot have read more than
// the server wrote.
func preferBoardBytes(f *event.Fetch, mine []*iperf3Stream, sending, udp bool, cb int64) {
	switch {
	case sending && udp && cb >= 0:
		f.Test.ServerBytes, f.Bytes = f.Bytes, cb
	case sending && cb >= 0 && cb <= written(mine):
		f.Test.ServerBytes, f.Bytes = f.Bytes, cb
	}
}

// written is what the server wrote to ss since the measured start.
func written(ss []*iperf3Stream) int64 {
	var n int64
	for _, st := range ss {
		n += st.bytes.Load() - st.base
	}
	return n
}

// clientClock times a finished test's record by the board's clock: the
// seconds its client measured, from the result exchange (end_time -
// start_time of its streams), the interval its own Mbit/s covers. The
// server's window (TEST_RUNNING sent to TEST_END read) starts before the
// client's clock and ends after it by a trip and the scheduling of two
// busy hosts (see perfsrv/DESIGN.md#board-clock). The server's window stays on
// the record (ServerDuration); a client time far from it (a clock jump, a
// bogus client) is not used.
func clientClock(f *event.Fetch, outcome string, secs float64) {
	own := f.Duration.Seconds()
	f.Test.ServerDuration = f.Duration
	b, ok := boardClock(own, secs)
	if outcome != event.OutcomeOK || !ok {
		return
	}
	f.Duration = time.Duration(b * float64(time.Second))
	f.Test.ClientClock = true
}

// boardClock is the board's seconds when they are within a factor of two
// of the server's own.
func boardClock(own, board float64) (float64, bool) {
	if board <= 0 || board < own/2 || board > own*2 || math.IsNaN(board) {
		return 0, false
	}
	return board, true
}

// clientSide puts the client's own figures from the result exchange
// beside the server's: the client's streams matching this direction. It
// returns the client's bytes, -1 when it sent none, and the seconds it
// measured them over (0: unknown).
func (m *measure) clientSide(f *event.Fetch, client *results, mine []*iperf3Stream, sending bool) (int64, float64) {
	if client == nil {
		return -1, 0
	}
	ids := map[int]bool{}
	for _, st := range mine {
		ids[st.id] = true
	}
	var bytes, retr, lost, pk int64
	var jit, secs float64
	n := 0
	for _, cs := range client.Streams {
		if !ids[cs.ID] {
			continue
		}
		n++
		bytes += cs.Bytes
		if cs.Retransmits > 0 {
			retr += cs.Retransmits
		}
		lost, pk, jit = lost+cs.Errors, pk+cs.Packets, jit+cs.Jitter
		secs = math.Max(secs, cs.EndTime-cs.StartTime)
	}
	if n == 0 {
		return -1, 0
	}
	f.Test.ClientReported, f.Test.ClientBytes = true, bytes
	if secs > 0 {
		f.Test.ClientMbps = float64(bytes) * 8 / secs / 1e6
	}
	if !sending {
		// The board sent: its TCP_INFO retransmits are the sending side's.
		if !m.t.p.UDP {
			f.TCP = &event.TCPInfo{Retransmits: uint32(retr)}
		}
		f.Test.ClientRetransmits = retr
	} else if m.t.p.UDP {
		// The board received: its loss and jitter are the measure.
		f.UDP = &event.UDPInfo{JitterMs: jit / float64(n) * 1000, Lost: lost, Packets: pk}
	}
	return bytes, secs
}

func (m *measure) labels(f *event.Fetch) {
	p := m.t.p
	set := func(k string, v int64) {
		if v != 0 {
			f.Labels[k] = strconv.FormatInt(v, 10)
		}
	}
	set("window", int64(p.Window))
	set("len", int64(p.Len))
	set("bandwidth", p.Bandwidth)
	set("omit", int64(p.Omit))
	set("parallel", int64(p.Parallel))
	if p.ZeroCopy {
		f.Labels["zerocopy"] = "1"
	}
	if p.Congestion != "" {
		f.Labels["congestion"] = p.Congestion
	}
	if p.ClientVersion != "" {
		f.Labels["client_version"] = p.ClientVersion
	}
	if p.Title != "" {
		f.Labels["title"] = p.Title
	}
}

// describe is the record's File: the test as an iperf3 command line would
// say it, from the board's side.
func (m *measure) describe(dir string) string {
	p := m.t.p
	var b strings.Builder
	b.WriteString("iperf3")
	if p.UDP {
		fmt.Fprintf(&b, " -u -b %d", p.Bandwidth)
	}
	if p.Parallel > 1 {
		fmt.Fprintf(&b, " -P %d", p.Parallel)
	}
	switch {
	case p.Bidir:
		b.WriteString(" --bidir")
	case p.Reverse:
		b.WriteString(" -R")
	}
	if p.Window > 0 {
		fmt.Fprintf(&b, " -w %d", p.Window)
	}
	if p.Len > 0 {
		fmt.Fprintf(&b, " -l %d", p.Len)
	}
	if p.Bytes > 0 {
		fmt.Fprintf(&b, " -n %d", p.Bytes)
	} else if p.Time > 0 {
		fmt.Fprintf(&b, " -t %d", p.Time)
	}
	b.WriteString(" (" + dir + ")")
	return b.String()
}
