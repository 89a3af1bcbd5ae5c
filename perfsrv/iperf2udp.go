package perfsrv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/event"
	meas "github.com/pxeperf/pxeperf/measure"
)

// iperf 2's UDP defaults (Settings.hpp): 1470-byte datagrams at 1 Mbit/s.
const (
	iperf2UDPLen  = 1470
	iperf2UDPRate = 1e6
	iperf2FinSent = 10 // final datagrams, as iperf 2 retries its FIN
)

// udpBlock is the datagram size h asks for.
func (h iperf2Header) udpBlock() int {
	if h.bufLen >= 16 && h.bufLen <= 65507 {
		return h.bufLen
	}
	return iperf2UDPLen
}

// udpRate is a UDP test's rate per stream, iperf 2's 1 Mbit/s when its
// header names none.
func (h iperf2Header) udpRate() int64 {
	if h.rate > 0 {
		return int64(h.rate)
	}
	return iperf2UDPRate
}

// udpPacketsLocked applies the UDP packet budget (udprule.go) to a flow
// whose first datagram, of n bytes, carries h: the datagrams/s its own
// direction and the server's leg take from udpPPS (taken here), or why
// not. The smaller of n and the header's -l is the flow's size (a datagram
// says what it is). -d and --full-duplex count both directions; -r's leg
// takes its share when it starts. Holds s.mu.
func (s *Iperf2) udpPacketsLocked(h iperf2Header, n int) (flowPPS, legPPS int64, why string) {
	mode := h.mode()
	dirs := int64(1)
	if mode == iperf2ModeFullDuplex || mode == iperf2ModeDualtest {
		dirs = 2
	}
	size := h.udpBlock()
	if mode != iperf2ModeReverse {
		size = min(size, n)
	}
	pps, why := udpPacketRule(s.cfg.Limits, "iperf2", h.udpRate(), size, 1, dirs)
	if why != "" {
		return 0, 0, why
	}
	switch mode {
	case iperf2ModeReverse:
		legPPS = pps
	case iperf2ModeFullDuplex, iperf2ModeDualtest:
		flowPPS, legPPS = pps/2, pps-pps/2
	default:
		flowPPS = pps
	}
	if !s.udpPPS.take(pps, s.cfg.Limits.MaxPPSTotal) {
		return 0, 0, s.ppsTotalWhy(pps)
	}
	return flowPPS, legPPS, ""
}

// ppsTotalWhy says a test of pps datagrams/s is over what the running
// UDP tests leave. Holds s.mu.
func (s *Iperf2) ppsTotalWhy(pps int64) string {
	return fmt.Sprintf("%d datagrams/s: the running UDP tests have %d of %d (iperf2.max_pps_total)", pps, s.udpPPS.used, s.cfg.Limits.MaxPPSTotal)
}

// startUDPLeg runs the server's leg of a UDP test in the background,
// counted in s.wg: on the shared socket to the board's own port (-R,
// --full-duplex) or, with back set, on a socket of its own to the board's
// listener (-r, -d). A budget, for a source that has not shown it
// receives, bounds what the leg sends (iperf2guard.go); a slot, when the
// leg holds the test's, is given back at its end.
func (s *Iperf2) startUDPLeg(ctx context.Context, peer netip.AddrPort, h iperf2Header, back bool, slot *iperf2Test, budget *udpBudget, pps int64) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.release(slot)
		defer func() {
			s.mu.Lock()
			s.udpPPS.give(pps)
			s.mu.Unlock()
		}()
		local := netip.AddrPortFrom(addrPort(s.udp.LocalAddr()).Addr(), 0)
		var l iperf2Leg
		if back {
			l = s.udpConnectBack(ctx, peer, h, budget)
		} else {
			write := func(b []byte) error {
				_, err := s.udp.WriteToUDPAddrPort(b, peer)
				return err
			}
			l = s.sendUDPLeg(ctx, write, nil, h, budget)
			l.local, l.peer = local, peer
		}
		if budget != nil && l.outcome != event.OutcomeOK {
			// Capped or failed towards a source that never showed it
			// receives: a forged flow's leg ends so, and leaves a count.
			s.refuse.Refuse("iperf2: unverified UDP leg ended early (not recorded)", peer.Addr().Unmap().String(),
				"mode", h.mode(), "why", l.why)
			return
		}
		if budget != nil && !s.recordToken(time.Now()) {
			s.refuse.Refuse("iperf2: unverified UDP test over the record budget (not recorded)", peer.Addr().Unmap().String())
			return
		}
		s.cfg.Sink.Fetch(s.udpLegEvent(l, h))
		if l.outcome != event.OutcomeOK {
			s.cfg.Log.Warn("iperf2 test leg ended early", append(clientAttrs(s.cfg.Clients, peer.Addr().Unmap()),
				"direction", l.dir, "mode", h.mode(), "proto", "udp", "why", l.why)...)
		}
	}()
}

// udpConnectBack sends -r/-d's server leg from a socket of its own to the
// address the test came from, on the port its header names, and waits for
// the board's server report after the final datagrams.
func (s *Iperf2) udpConnectBack(ctx context.Context, peer netip.AddrPort, h iperf2Header, budget *udpBudget) iperf2Leg {
	to := netip.AddrPortFrom(peer.Addr(), h.port)
	l := iperf2Leg{dir: "rx", start: time.Now(), outcome: event.OutcomeError, peer: to}
	l.end = l.start
	if why := connectBackPortWhy(h.port); why != "" {
		l.why = why
		return l
	}
	la := addrPort(s.udp.LocalAddr()).Addr()
	if la.IsUnspecified() {
		la = netip.Addr{}
	}
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(la, 0)), net.UDPAddrFromAddrPort(to))
	if err != nil {
		l.why = fmt.Sprintf("connect-back to %s failed: %v", to, err)
		return l
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	report := func() bool {
		_ = c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		var b [512]byte
		n, err := c.Read(b[:])
		return err == nil && n > 0
	}
	write := func(b []byte) error {
		_, err := c.Write(b)
		return err
	}
	l = s.sendUDPLeg(ctx, write, report, h, budget)
	l.local, l.peer = addrPort(c.LocalAddr()), to
	return l
}

// sendUDPLeg paces numbered datagrams (UDP_datagram: id, tv_sec, tv_usec,
// id2) at the header's rate for its time or bytes, then sends negative
// numbers so the board's receiver ends; with report it waits for the
// board's server report between them, as an iperf 2 client does. With a
// budget it sends no more than the budget allows and ends early, as
// aborted, once the budget's flow ended.
func (s *Iperf2) sendUDPLeg(ctx context.Context, write func([]byte) error, report func() bool, h iperf2Header, budget *udpBudget) iperf2Leg {
	l := iperf2Leg{dir: "rx", start: time.Now(), outcome: event.OutcomeOK}
	if why := s.overCap(h); why != "" {
		l.end, l.outcome, l.why = l.start, event.OutcomeError, "refused: "+why
		return l
	}
	rate := h.udpRate()
	dur := h.duration()
	if dur <= 0 {
		dur = s.cfg.Limits.MaxDuration
	}
	end := l.start.Add(dur)
	buf := payload(h.udpBlock())
	clear(buf[:min(len(buf), 16+iperf2MaxHeader)]) // no test header for the board to read
	var mu sync.Mutex
	var sent, seq int64
	tk := startTicker(l.start, s.cfg.Interval, func(at time.Duration) sample {
		mu.Lock()
		defer mu.Unlock()
		return sample{at: at, bytes: sent}
	})
	stamp := func(id int64) {
		now := time.Now()
		be := binary.BigEndian
		be.PutUint32(buf[0:], uint32(id))
		be.PutUint32(buf[4:], uint32(now.Unix()))
		be.PutUint32(buf[8:], uint32(now.Nanosecond()/1000))
		be.PutUint32(buf[12:], uint32(uint64(id)>>32))
	}
	for ctx.Err() == nil && time.Now().Before(end) && (h.amount <= 0 || sent < int64(h.amount)) {
		if !meas.Pace(rate, l.start, sent, ctx.Done()) {
			break
		}
		if budget != nil && !budget.wait(ctx, sent, int64(len(buf)), end) {
			if ctx.Err() == nil && time.Now().Before(end) {
				l.outcome = event.OutcomeAborted
				l.why = fmt.Sprintf("capped at %dx what the source sent plus %d KiB: its address has not shown it receives "+
					"(no TCP test from it within iperf2.verified_for)", udpLegRatio, udpLegAllowance>>10)
			}
			break
		}
		seq++
		stamp(seq)
		if err := write(buf); err != nil {
			if errors.Is(err, net.ErrClosed) {
				break
			}
			continue // an ICMP unreachable from the board shows as loss
		}
		mu.Lock()
		sent += int64(len(buf))
		mu.Unlock()
	}
	l.end = time.Now()
	l.bytes = sent
	l.samples = tk.stop(sample{at: l.end.Sub(l.start), bytes: sent})
	if ctx.Err() != nil {
		l.outcome, l.why = event.OutcomeAborted, "server shutting down"
		return l
	}
	finSent := sent
	for i := range iperf2FinSent {
		if budget != nil && !budget.allows(finSent, int64(len(buf))) {
			break
		}
		finSent += int64(len(buf))
		stamp(-(seq + int64(i)))
		_ = write(buf)
		if report == nil {
			time.Sleep(10 * time.Millisecond)
		} else if report() {
			break
		}
	}
	return l
}

// udpLegEvent is the record of the server's UDP leg: what it sent (the
// board alone knows what arrived).
func (s *Iperf2) udpLegEvent(l iperf2Leg, h iperf2Header) *event.Fetch {
	f := s.tcpEvent(l, iperf2TestName(" -u"+flagName(h.mode()), "udp", l.dir), map[string]string{"streams": "1", "iperf2_mode": h.mode()})
	f.Proto = event.ProtoUDP
	if f.Interface == "" {
		f.Interface = ifaceRoute(l.peer.Addr())
	}
	return f
}
