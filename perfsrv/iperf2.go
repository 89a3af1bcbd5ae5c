package perfsrv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/refuse"
	meas "github.com/pxeperf/pxeperf/measure"
)

// iperf 2 has no control channel: a TCP test is one connection the client
// writes to until it closes; a UDP test is a flow of datagrams (payloads.h
// UDP_datagram: id, tv_sec, tv_usec, id2, all big-endian) ended by
// datagrams with a negative sequence number, which the server answers with
// its report (server_hdr: flags, total_len1/2, stop_sec/usec, error_cnt,
// outorder_cnt, datagrams, jitter1/2) so the client prints "Server Report".
const iperf2FlowIdle = 10 * time.Second

// Iperf2 is an `iperf -s`-compatible server for TCP and UDP tests.
type Iperf2 struct {
	cfg    Config
	ln     *net.TCPListener
	udp    *net.UDPConn
	refuse *refuse.Log

	mu         sync.Mutex
	active     int
	perClient  map[netip.Addr]int
	tests      map[*iperf2Test]struct{}   // the tests holding slots
	pending    map[netip.Addr]int         // TCP connections still sending their header
	pendingAll map[*headerWaiter]struct{} // the same, each
	done       int                        // finished flows kept for their FIN retries
	flows      map[netip.AddrPort]*iperf2Flow
	verified   map[netip.Addr]time.Time // addresses that ran a TCP test (iperf2guard.go)
	records    bucket                   // unverified UDP records (iperf2guard.go)
	replies    bucket                   // server reports to unverified sources
	udpPPS     ppsPool                  // datagrams/s of the running UDP flows and legs (udprule.go)

	gmu    sync.Mutex
	groups map[string]*iperf2Group // -P tests still taking streams

	wg sync.WaitGroup
}

// NewIperf2 binds TCP and UDP on cfg.Addr.
func NewIperf2(cfg Config) (*Iperf2, error) {
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("iperf2 listen on %s: %w (another iperf -s running? set iperf2.listen or --iperf2-addr)", cfg.Addr, err)
	}
	port := addrPort(ln.Addr()).Port()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(hostOf(cfg.Addr), strconv.Itoa(int(port))))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("iperf2 UDP listen on port %d: %w", port, err)
	}
	u := pc.(*net.UDPConn)
	_ = u.SetReadBuffer(4 << 20)
	_ = u.SetWriteBuffer(4 << 20)
	if err := dropSmallDatagrams(u, cfg.Limits.MinUDPLen); err != nil {
		cfg.Log.Warn("iperf2: no socket filter for datagrams under min_udp_len (each is read and refused)", "err", err)
	}
	return &Iperf2{cfg: cfg, ln: ln.(*net.TCPListener), udp: u, refuse: refuse.New(cfg.Log, 0),
		perClient: map[netip.Addr]int{}, flows: map[netip.AddrPort]*iperf2Flow{}, verified: map[netip.Addr]time.Time{},
		tests: map[*iperf2Test]struct{}{}, pending: map[netip.Addr]int{}, pendingAll: map[*headerWaiter]struct{}{}}, nil
}

// Addr is the bound address (TCP and UDP share the port).
func (s *Iperf2) Addr() net.Addr { return s.ln.Addr() }

// Refusals counts refused tests by reason.
func (s *Iperf2) Refusals() map[string]uint64 { return s.refuse.Counts() }

// Serve runs until ctx ends, then returns nil.
func (s *Iperf2) Serve(ctx context.Context) error {
	defer s.closeGroups() // -P tests cut short by the end: record what came
	return serve(ctx, s.ln, s.udp, &s.wg, func() { s.readUDP(ctx) },
		func(c *net.TCPConn, _ uint64) { s.handleTCP(ctx, c) },
		s.refuse, "iperf2")
}

// Flow bounds: a flow exists only while it holds a slot, or briefly after
// its end to answer its FIN retries; a datagram that opens no flow leaves
// nothing but a count, so forged sources cannot pile up flows and records
// (see perfsrv/DESIGN.md#flows-from-forged-sources).
const (
	maxDoneFlows = 256             // finished flows kept to answer FIN retries
	doneFlowKeep = 3 * time.Second // iperf 2 retries its FIN for ~2.5 s
	maxFirstSeq  = 16              // a flow starts at its first datagrams
)

// iperf2Flow is one UDP test: the datagrams from one client port.
type iperf2Flow struct {
	peer               netip.AddrPort
	first, last, seen  time.Time // seen: the last datagram, FINs included
	bytes              int64
	packets, lost, ooo int64         // recv's figures: the highest sequence number, lost, out of order
	jitter             float64       // seconds
	recv               *meas.UDPRecv // from the flow's first sequence number
	seq64              bool
	done               bool
	doneAt             time.Time
	report             []byte
	slot               *iperf2Test // nil once the flow gave its slot back (or to its -R leg)
	tx                 []sample
	nextSample         time.Time
	header             iperf2Header // the first datagram's test header
	ctx                context.Context
	// budget counts every byte from the flow's source; nil when its
	// address has shown it receives, so its legs are not bounded by it.
	budget *udpBudget
	pps    int64 // datagrams/s of udpPPS the flow's own direction holds until done
}

// flowIdle is how long a flow may go quiet before it counts as vanished:
// four datagram gaps at its rate, within 2 to 10 s, so a forged one-datagram
// flow does not hold its slot for long.
func (h iperf2Header) flowIdle() time.Duration {
	rate := float64(h.rate)
	if rate <= 0 {
		rate = iperf2UDPRate
	}
	gap := time.Duration(float64(h.udpBlock()*8) / rate * float64(time.Second))
	return min(max(4*gap, 2*time.Second), iperf2FlowIdle)
}

// udpBatch is how many datagrams one read takes (recvmmsg on Linux): a
// flood of datagrams of no test is read at a system call per batch, not
// per datagram.
const udpBatch = 16

// smallSample: one in smallSample datagrams under min_udp_len past a
// flow's start gets through Linux's socket filter (dropSmallDatagrams):
// enough to refuse and count them, too few to cost CPU.
const smallSample = 1024

func (s *Iperf2) readUDP(ctx context.Context) {
	pc := ipv4.NewPacketConn(s.udp)
	ms := make([]ipv4.Message, udpBatch)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 65536)}
	}
	sweep := time.Now()
	for {
		_ = s.udp.SetReadDeadline(time.Now().Add(time.Second))
		k, err := pc.ReadBatch(ms, 0)
		now := time.Now()
		if now.Sub(sweep) > 250*time.Millisecond {
			s.sweep(now)
			sweep = now
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				s.mu.Lock()
				for _, f := range s.flows {
					if !f.done {
						s.finish(f, event.OutcomeAborted, "server shutting down")
					}
				}
				s.mu.Unlock()
				return
			}
			continue
		}
		for _, m := range ms[:k] {
			if ua, ok := m.Addr.(*net.UDPAddr); ok {
				s.received(ctx, ua.AddrPort(), m.Buffers[0][:m.N], now)
			}
		}
	}
}

// received checks one datagram's size, then hands it to its flow.
func (s *Iperf2) received(ctx context.Context, from netip.AddrPort, buf []byte, now time.Time) {
	n := len(buf)
	if n < 12 {
		s.refuse.Refuse("iperf2: UDP datagram too short", from.Addr().Unmap().String(), "bytes", n)
		return
	}
	if seq := int32(binary.BigEndian.Uint32(buf)); n < s.cfg.Limits.MinUDPLen && (seq > maxFirstSeq || seq < 0) {
		// Most were dropped by the socket filter: this is a sample.
		s.refuse.Refuse("iperf2: UDP datagram under min_udp_len (1 in 1024 read, the rest dropped by the kernel)",
			from.Addr().Unmap().String(), "bytes", n, "min_udp_len", s.cfg.Limits.MinUDPLen)
		return
	}
	s.datagram(ctx, from, buf, now)
}

func (s *Iperf2) datagram(ctx context.Context, from netip.AddrPort, b []byte, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[from]
	if f == nil {
		if f = s.openFlowLocked(ctx, from, b, now); f == nil {
			return
		}
	}
	f.seen = now
	if f.budget != nil {
		f.budget.rcvd.Add(int64(len(b)))
	}
	seq := int64(int32(binary.BigEndian.Uint32(b)))
	if f.seq64 && len(b) >= 16 {
		seq = int64(uint64(binary.BigEndian.Uint32(b[12:]))<<32 | uint64(binary.BigEndian.Uint32(b)))
	}
	if seq < 0 {
		if !f.done {
			s.finish(f, event.OutcomeOK, "")
		}
		switch {
		case f.report == nil:
		case f.budget != nil && !s.replies.take(unverifiedReplies, now):
			s.refuse.Refuse("iperf2: server report to an unverified source over its budget (not sent)", from.Addr().Unmap().String())
		default:
			reply := append(append([]byte(nil), b[:16]...), f.report...)
			s.sendNoWait(reply, from)
		}
		return
	}
	if f.done || f.slot == nil {
		return
	}
	f.slot.touch(now)
	if now.Sub(f.first) > s.cfg.Limits.MaxDuration+5*time.Second {
		s.finish(f, event.OutcomeAborted, fmt.Sprintf("test ran past the %s cap", s.cfg.Limits.MaxDuration))
		return
	}
	for !now.Before(f.nextSample) {
		f.tx = append(f.tx, sample{at: f.nextSample.Sub(f.first), bytes: f.bytes})
		f.nextSample = f.nextSample.Add(s.cfg.Interval)
	}
	f.last = now
	f.bytes += int64(len(b))
	if f.recv == nil {
		f.recv = meas.NewUDPRecv(uint64(seq), 0) // no loss before the first
	}
	sent := time.Unix(int64(binary.BigEndian.Uint32(b[4:])), int64(binary.BigEndian.Uint32(b[8:]))*1000)
	f.recv.Add(uint64(seq), len(b), now.Sub(sent))
	f.packets, f.lost, f.ooo, f.jitter = int64(f.recv.Highest()), f.recv.Lost(0), f.recv.OutOfOrder(), f.recv.Jitter()
}

// openFlowLocked starts the flow b opens, when it gets a slot, and its
// server leg when the header asks for one; nil when b opens none (counted).
// Holds s.mu.
func (s *Iperf2) openFlowLocked(ctx context.Context, from netip.AddrPort, b []byte, now time.Time) *iperf2Flow {
	ip := from.Addr().Unmap()
	seq0 := int32(binary.BigEndian.Uint32(b))
	if seq0 < 0 {
		return nil // the end of a flow we did not see (or already forgot)
	}
	if seq0 > maxFirstSeq {
		s.refuse.Refuse("iperf2: UDP datagram of no running test", ip.String())
		return nil
	}
	// The test header follows the datagram's own 16 bytes.
	var h iperf2Header
	if len(b) > 16 {
		h = parseIperf2Header(b[16:])
	}
	weak := !s.verifiedLocked(ip, now)
	if h.mode() == iperf2ModeReverse && weak {
		// Its leg would be all allowance (iperf2guard.go).
		s.refuse.Refuse("iperf2: UDP -R from an address that has not shown it receives", ip.String(),
			append(clientAttrs(s.cfg.Clients, ip), "fix", "run a TCP test from it first (iperf -c SERVER -t 1; "+
				"it counts for iperf2.verified_for), or use iperf3 -u -R")...)
		return nil
	}
	flowPPS, legPPS, why := s.udpPacketsLocked(h, len(b))
	if why != "" {
		s.refuse.Refuse("iperf2: UDP packet budget", ip.String(), append(clientAttrs(s.cfg.Clients, ip), "why", why)...)
		return nil
	}
	t := newIperf2Test(ip, weak, now)
	if !s.admitLocked(t, now) {
		s.udpPPS.give(flowPPS + legPPS)
		s.refuse.Refuse("iperf2: busy", ip.String(), clientAttrs(s.cfg.Clients, ip)...)
		return nil
	}
	f := &iperf2Flow{peer: from, first: now, seen: now, nextSample: now.Add(s.cfg.Interval), ctx: ctx, header: h, slot: t,
		seq64: h.flags&iperf2HeaderSeqno64 != 0, pps: flowPPS}
	if weak {
		f.budget = &udpBudget{}
	}
	t.stop = func() { s.finish(f, event.OutcomeAborted, "evicted") }
	s.flows[from] = f
	switch h.mode() {
	case iperf2ModeReverse:
		// The board only listens; it repeats its header until data
		// comes. The leg keeps the slot; the flow records nothing.
		t.stop = nil
		f.slot = nil
		s.markDoneLocked(f, now)
		s.startUDPLeg(ctx, from, h, false, t, nil, legPPS)
	case iperf2ModeFullDuplex:
		s.startUDPLeg(ctx, from, h, false, nil, f.budget, legPPS)
	case iperf2ModeDualtest:
		s.startUDPLeg(ctx, from, h, true, nil, f.budget, legPPS)
	}
	return f
}

// markDoneLocked ends a flow's data: it stays doneFlowKeep to answer FIN
// retries, the oldest such giving way when maxDoneFlows already do (so
// datagrams that keep coming from ended flows cannot fill the table).
// Holds s.mu.
func (s *Iperf2) markDoneLocked(f *iperf2Flow, now time.Time) {
	if f.done {
		return
	}
	f.done, f.doneAt = true, now
	s.udpPPS.give(f.pps)
	f.pps = 0
	if f.budget != nil {
		f.budget.ended.Store(true)
	}
	if s.flows[f.peer] != f {
		return
	}
	if s.done >= maxDoneFlows {
		var oldest *iperf2Flow
		for _, g := range s.flows {
			if g.done && g != f && (oldest == nil || g.doneAt.Before(oldest.doneAt)) {
				oldest = g
			}
		}
		if oldest != nil {
			delete(s.flows, oldest.peer)
			s.done--
		}
	}
	s.done++
}

// finish records a flow and builds its server report. A flow from an
// address that has not shown it receives and ended without its FIN
// (vanished, evicted, cut off) is counted, not recorded: forged ones end
// so. Holds s.mu.
func (s *Iperf2) finish(f *iperf2Flow, outcome, why string) {
	slot := f.slot
	s.markDoneLocked(f, time.Now())
	f.recv = nil // its figures are f's; a done flow kept for FIN retries stays small
	if slot == nil {
		return
	}
	f.slot = nil
	s.releaseLocked(slot)
	end := f.last
	if end.IsZero() {
		end = f.first
	}
	dur := end.Sub(f.first)
	r := make([]byte, 40+60+12)
	be := binary.BigEndian
	be.PutUint32(r[0:], iperf2HeaderVersion1)
	be.PutUint32(r[4:], uint32(uint64(f.bytes)>>32))
	be.PutUint32(r[8:], uint32(f.bytes))
	be.PutUint32(r[12:], uint32(dur/time.Second))
	be.PutUint32(r[16:], uint32(dur%time.Second/time.Microsecond))
	be.PutUint32(r[20:], uint32(f.lost))
	be.PutUint32(r[24:], uint32(f.ooo))
	be.PutUint32(r[28:], uint32(f.packets))
	be.PutUint32(r[32:], uint32(f.jitter))
	be.PutUint32(r[36:], uint32((f.jitter-math.Floor(f.jitter))*1e6))
	f.report = r
	if outcome != event.OutcomeOK && f.budget != nil {
		s.refuse.Refuse("iperf2: unverified UDP flow ended without its FIN (not recorded)", f.peer.Addr().Unmap().String(), "why", why)
		return
	}
	if f.header.mode() == iperf2ModeTradeoff && outcome == event.OutcomeOK {
		// The leg follows the flow: it takes its datagrams/s now.
		pps, _ := udpPacketRule(s.cfg.Limits, "iperf2", f.header.udpRate(), f.header.udpBlock(), 1, 1)
		if !s.udpPPS.take(pps, s.cfg.Limits.MaxPPSTotal) {
			s.refuse.Refuse("iperf2: UDP packet budget", f.peer.Addr().Unmap().String(), "why", s.ppsTotalWhy(pps))
		} else {
			s.startUDPLeg(f.ctx, f.peer, f.header, true, nil, f.budget, pps)
		}
	}
	if f.budget != nil && !s.records.take(unverifiedRecords, time.Now()) {
		s.refuse.Refuse("iperf2: unverified UDP test over the record budget (not recorded)", f.peer.Addr().Unmap().String())
		return
	}
	ss := append(f.tx, sample{at: dur, bytes: f.bytes})
	ev := &event.Fetch{Start: f.first, Proto: event.ProtoUDP, Client: f.peer, File: iperf2TestName(" -u", "udp", "tx"), Bytes: f.bytes,
		Size: -1, Duration: dur, Outcome: outcome, Err: why, Source: SourceIperf2, Direction: "tx",
		Intervals: intervals(sample{}, ss, s.cfg.Interval/2), Labels: map[string]string{"streams": "1"}}
	ev.UDP = &event.UDPInfo{JitterMs: f.jitter * 1000, Lost: f.lost, Packets: f.packets}
	if mode := f.header.mode(); mode != iperf2ModeNormal {
		ev.Labels["iperf2_mode"] = mode
		ev.File = iperf2TestName(" -u"+flagName(mode), "udp", "tx")
	}
	// The interface is looked up off the lock: it lists the interfaces.
	go func() {
		ev.Interface = ifaceOf(addrPort(s.udp.LocalAddr()).Addr())
		if ev.Interface == "" {
			ev.Interface = ifaceRoute(f.peer.Addr())
		}
		s.cfg.Sink.Fetch(ev)
	}()
	if outcome != event.OutcomeOK {
		s.cfg.Log.Warn("iperf2 UDP test ended early", append(clientAttrs(s.cfg.Clients, f.peer.Addr().Unmap()), "why", why)...)
	}
}

// sweep ends flows that went quiet without their end datagrams (the
// client vanished) and forgets finished ones once their FIN retries are
// over. Holds no lock on entry.
func (s *Iperf2) sweep(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, f := range s.flows {
		if f.done {
			if now.Sub(f.doneAt) >= doneFlowKeep {
				delete(s.flows, k)
				s.done--
			}
			continue
		}
		if now.Sub(f.seen) >= f.header.flowIdle() {
			s.finish(f, event.OutcomeAborted, "client vanished mid-test (no end datagrams)")
		}
	}
}

// ifaceRoute names the interface whose subnet holds a (for sockets bound
// to the wildcard address).
func ifaceRoute(a netip.Addr) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		as, _ := ifc.Addrs()
		for _, x := range as {
			if n, ok := x.(*net.IPNet); ok {
				if p, err := netip.ParsePrefix(n.String()); err == nil && p.Contains(a.Unmap()) && ifc.Flags&net.FlagLoopback == 0 {
					return ifc.Name
				}
			}
		}
	}
	return ""
}
