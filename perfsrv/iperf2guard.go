package perfsrv

import (
	"context"
	"net/netip"
	"sync/atomic"
	"time"
)

// What the iperf 2 server sends to an address that has not shown it
// receives. A UDP datagram's source costs nothing to forge, and iperf 2's
// two-way UDP tests (-R, --full-duplex, -d, -r) ask the server to send to
// that source (or to a port the header names): one forged 92-byte datagram
// once bought a 100 Mbit/s leg for 60 s (issue 27 row 1). So:
//   - an address has shown it receives once it completed a TCP handshake
//     with the listener and sent its test header (the SYN-ACK's sequence
//     number came back): for Config.VerifiedFor after it, its UDP legs run
//     as the header asks;
//   - any other source's UDP leg never runs ahead of udpLegRatio times the
//     bytes its own flow sent plus udpLegAllowance: -d, -r and
//     --full-duplex clients send as much as they ask back, so real ones
//     are not slowed, and a forger buys at most twice what it sends;
//   - a UDP -R test from such a source is refused: iperf 2.1.8 sends one
//     header datagram (repeated every 10 ms while no data comes) and
//     nothing after, so its leg would be all allowance.
const (
	udpLegRatio     = 2
	udpLegAllowance = 64 << 10
	// maxVerified bounds the table of verified addresses; when full the
	// oldest entry goes.
	maxVerified = 1024
)

// udpBudget is what an unverified UDP source has sent on its flow, which
// bounds the server's leg to it.
type udpBudget struct {
	rcvd  atomic.Int64
	ended atomic.Bool // the flow is over: rcvd grows no more
}

// allows says whether n more bytes, after sent, stay within the budget.
func (b *udpBudget) allows(sent, n int64) bool {
	return sent+n <= udpLegRatio*b.rcvd.Load()+udpLegAllowance
}

// wait blocks until n more bytes after sent are allowed; false when the
// flow ended (or ctx did, or until passed) first: the leg stops there.
func (b *udpBudget) wait(ctx context.Context, sent, n int64, until time.Time) bool {
	for !b.allows(sent, n) {
		if b.ended.Load() || ctx.Err() != nil || !time.Now().Before(until) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// verify marks ip as an address that has shown it receives. Holds s.mu.
func (s *Iperf2) verifyLocked(ip netip.Addr, now time.Time) {
	if s.cfg.VerifiedFor <= 0 {
		return
	}
	if _, ok := s.verified[ip]; !ok && len(s.verified) >= maxVerified {
		oldest, at := netip.Addr{}, now
		for a, t := range s.verified {
			if now.Sub(t) > s.cfg.VerifiedFor {
				delete(s.verified, a)
				continue
			}
			if t.Before(at) {
				oldest, at = a, t
			}
		}
		if len(s.verified) >= maxVerified {
			delete(s.verified, oldest)
		}
	}
	s.verified[ip] = now
}

// verifiedLocked says whether ip has shown it receives within
// Config.VerifiedFor. Holds s.mu.
func (s *Iperf2) verifiedLocked(ip netip.Addr, now time.Time) bool {
	t, ok := s.verified[ip]
	return ok && now.Sub(t) <= s.cfg.VerifiedFor
}
