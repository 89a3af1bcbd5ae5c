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
// that source (or to a port the header names), so one forged datagram
// could buy a long leg at a high rate to any address (see
// perfsrv/DESIGN.md#unverified-udp-legs). So:
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

// Slots. Tests are capped in all (Limits.MaxTests) and per address
// (Limits.MaxPerClient), and a test holds its slot from its header to its
// end, so whatever holds slots without moving data shuts real boards out
// (header-only TCP connections, forged first datagrams; see
// perfsrv/DESIGN.md#slots-held-for-nothing). When the
// slots a new test needs are taken, it takes the slot of one that has
// moved nothing for slotIdle, or of an unverified UDP flow when the
// newcomer is verified (a TCP test, or UDP from a verified address): a
// forged flow then never keeps a board that has shown it receives out.
const slotIdle = time.Second

// iperf2Test is a running test's claim on a slot.
type iperf2Test struct {
	ip   netip.Addr
	weak bool // an unverified UDP flow
	// moved is when the test last moved a byte (unix ns).
	moved atomic.Int64
	// stop ends an evicted test; called with s.mu held, so it must not
	// take it (closing a connection, marking a flow).
	stop    func()
	held    bool // under s.mu
	evicted atomic.Bool
	// rcvd is what the board sent on its TCP connection; fwdDone is set
	// when that leg ended (the connect-back's budget).
	rcvd    atomic.Int64
	fwdDone atomic.Bool
}

func newIperf2Test(ip netip.Addr, weak bool, now time.Time) *iperf2Test {
	t := &iperf2Test{ip: ip, weak: weak}
	t.moved.Store(now.UnixNano())
	return t
}

// touch records progress.
func (t *iperf2Test) touch(now time.Time) { t.moved.Store(now.UnixNano()) }

// admitLocked gives t a slot, evicting a test that holds one for nothing
// when the caps are reached; false when none can go. Holds s.mu.
func (s *Iperf2) admitLocked(t *iperf2Test, now time.Time) bool {
	l := s.cfg.Limits
	full := func() (all, mine bool) { return s.active >= l.MaxTests, s.perClient[t.ip] >= l.MaxPerClient }
	if all, mine := full(); all || mine {
		var victim *iperf2Test
		var idlest time.Duration = -1
		for v := range s.tests {
			if mine && v.ip != t.ip || v.stop == nil {
				continue
			}
			idle := now.Sub(time.Unix(0, v.moved.Load()))
			if idle < slotIdle && !(v.weak && !t.weak) {
				continue
			}
			if v.weak && !t.weak {
				idle += time.Hour // the forged-flow suspects go first
			}
			if idle > idlest {
				victim, idlest = v, idle
			}
		}
		if victim != nil {
			s.refuse.Refuse("iperf2: test evicted (its slot held no data, or an unverified flow gave way)", victim.ip.String(),
				clientAttrs(s.cfg.Clients, victim.ip)...)
			s.releaseLocked(victim)
			victim.stop()
		}
		if all, mine := full(); all || mine {
			return false
		}
	}
	t.held = true
	s.tests[t] = struct{}{}
	s.active++
	s.perClient[t.ip]++
	return true
}

// release gives t's slot back (once).
func (s *Iperf2) release(t *iperf2Test) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(t)
}

func (s *Iperf2) releaseLocked(t *iperf2Test) {
	if t == nil || !t.held {
		return
	}
	t.held = false
	delete(s.tests, t)
	s.active--
	if s.perClient[t.ip]--; s.perClient[t.ip] <= 0 {
		delete(s.perClient, t.ip)
	}
}

// TCP connections still sending their header hold no slot, but a socket
// and a goroutine each: they are capped per address and in all (as the
// bench stream server's maxPending), and given iperf2HeaderWait (real
// clients send the header with their first segment). A new connection
// over a cap closes the oldest waiting one of its address (or of all):
// a flood of silent connections then delays no real client, which sends
// its header at once, even from the flooding address. The caps are
// iperf3's (maxPending, maxPendingPerAddr): one rule for both listeners.
const iperf2HeaderWait = 3 * time.Second

// headerWaiter is a connection waiting for its header.
type headerWaiter struct {
	ip    netip.Addr
	since time.Time
	close func()
}

// headerWait counts c waiting for its header, closing the oldest waiting
// connection over a cap; done takes it out.
func (s *Iperf2) headerWait(ip netip.Addr, close func()) (done func()) {
	p := &headerWaiter{ip: ip, since: time.Now(), close: close}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.pending[ip] >= maxPendingPerAddr
	if mine || len(s.pendingAll) >= maxPending {
		var oldest *headerWaiter
		for q := range s.pendingAll {
			if (!mine || q.ip == ip) && (oldest == nil || q.since.Before(oldest.since)) {
				oldest = q
			}
		}
		if oldest != nil {
			s.refuse.Refuse("iperf2: connection closed waiting for its header (too many wait)", oldest.ip.String())
			s.unpendLocked(oldest)
			oldest.close()
		}
	}
	s.pendingAll[p] = struct{}{}
	s.pending[ip]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.unpendLocked(p)
	}
}

func (s *Iperf2) unpendLocked(p *headerWaiter) {
	if _, ok := s.pendingAll[p]; !ok {
		return
	}
	delete(s.pendingAll, p)
	if s.pending[p.ip]--; s.pending[p.ip] <= 0 {
		delete(s.pending, p.ip)
	}
}

// evictedWhy is the record's reason for a test that gave its slot away.
const evictedWhy = "evicted: moved no data for 1 s while every slot was taken"

// A TCP connect-back (-r, -d) goes to the address whose handshake the
// test's own connection proved, but to a port the header names, where
// any service may listen (see perfsrv/DESIGN.md#tcp-connect-back), and
// iperf 2.1.8's listener sends nothing back that
// would tell it from another. So a connect-back goes only to a port of
// 1024 or above (iperf's listener is its -p or -L, 5001 by default), and
// sends at most connectBackRatio times what the board sent on its own
// connection plus connectBackAllowance: a board's two directions differ
// by less on a real link, and a client cannot aim more than that at a
// service of its address.
const (
	connectBackRatio     = 4
	connectBackAllowance = 4 << 20
)

// backBudget says whether the connect-back may send n more bytes after
// sent, waiting while the board's own leg still runs (-d).
func (t *iperf2Test) backBudget(sent, n int64) bool {
	for sent+n > connectBackRatio*t.rcvd.Load()+connectBackAllowance {
		if t.fwdDone.Load() || t.evicted.Load() {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Records of and replies to unverified UDP tests. A forged flow that ends
// with its FIN looks like a real board's test: a flood of them would fill
// the store (each a record and a log line) and the reader behind it, and
// their server reports to addresses nobody answers ARP for hold the shared
// socket's send buffer in the neighbour queues, so a real board's report
// finds no room (see perfsrv/DESIGN.md#unverified-records-and-replies).
// Tests from addresses that ran a TCP test are never limited; those of
// other sources share a record budget (64, refilled at 1 a second) and a
// reply budget (200, refilled at 100 a second: what queues for ARP's 3 s
// fits the 4 MiB send buffer), and what is over them is counted, not
// recorded or sent.
var (
	unverifiedRecords = bucketSpec{burst: 64, rate: 1}
	unverifiedReplies = bucketSpec{burst: 200, rate: 100}
)

// bucketSpec shapes a token bucket.
type bucketSpec struct{ burst, rate float64 }

// bucket is a token bucket; the zero value starts full. Its owner locks it.
type bucket struct {
	tokens float64
	last   time.Time
}

// take takes one token; false when none is left.
func (b *bucket) take(spec bucketSpec, now time.Time) bool {
	if b.last.IsZero() {
		b.tokens = spec.burst
	} else {
		b.tokens = min(spec.burst, b.tokens+now.Sub(b.last).Seconds()*spec.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// recordToken takes one unverified record from the budget.
func (s *Iperf2) recordToken(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records.take(unverifiedRecords, now)
}
