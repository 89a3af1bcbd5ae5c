package perfsrv

import (
	"net/netip"
	"sync"
	"time"
)

// A test in set-up (from its cookie until TEST_START) holds a test slot
// while it waits for the client: 3 s for the parameters, 10 s for the
// streams. A real client answers each step within a round trip or two, so
// a set-up that went setupIdle without a step is given up when a new test
// finds no slot, and one address has at most maxSetupPerAddr tests in
// set-up at once (a further one waits its handshakeTimeout for its turn):
// a few addresses that send cookies and nothing more cannot hold every
// slot again and again (see perfsrv/DESIGN.md#iperf3-tests-in-set-up).
const (
	setupIdle       = 500 * time.Millisecond
	maxSetupPerAddr = 2
	admitPoll       = 10 * time.Millisecond
)

// setupState is what a test's set-up shows the admission of others: when
// it last made a step, whether it started, whether it was told to go.
type setupState struct {
	mu       sync.Mutex
	step     time.Time
	started  bool
	evicted  bool
	evictedC chan struct{} // closed when evicted
}

func newSetupState(now time.Time) *setupState {
	return &setupState{step: now, evictedC: make(chan struct{})}
}

// stepped records a step of the set-up (parameters, a stream).
func (st *setupState) stepped() {
	st.mu.Lock()
	st.step = time.Now()
	st.mu.Unlock()
}

// idleSince is when the last step was, and false once the test started
// or was evicted (it is no longer a set-up to give up).
func (st *setupState) idleSince() (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.step, !st.started && !st.evicted
}

// start ends the set-up: the test can no longer be evicted (false: it was
// already).
func (st *setupState) start() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.evicted {
		return false
	}
	st.started = true
	return true
}

// evict tells the set-up to go (false: it started just before).
func (st *setupState) evict() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.started || st.evicted {
		return false
	}
	st.evicted = true
	close(st.evictedC)
	return true
}

func (st *setupState) wasEvicted() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.evicted
}

// admitResult is how admit ended.
type admitResult int

const (
	admitted admitResult = iota
	admitBusy
	admitSetupBusy
)

// admit takes a test slot and a set-up slot for a new test from ip. While
// the slots are full it gives up the set-up that has been idle longest
// (setupIdle or more; one of ip's own when ip is at its max_per_client)
// and waits for its slot, at most handshakeTimeout: the slot is kept for
// it (s.reserved), so other waiters, the flood's own among them, cannot
// take it first. With only started tests in the way it answers busy at
// once, as before.
func (s *Iperf3) admit(ip netip.Addr) admitResult {
	l := s.cfg.Limits
	deadline := time.Now().Add(s.handshakeTimeout())
	reserved := false
	w := &admitWaiter{ip: ip, since: time.Now()}
	s.mu.Lock()
	if s.waiters == nil {
		s.waiters = map[*admitWaiter]struct{}{}
	}
	s.waiters[w] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, w)
		if reserved {
			s.reserved--
		}
		s.mu.Unlock()
	}()
	for {
		now := time.Now()
		s.mu.Lock()
		perAddr := s.setup.by[ip] < maxSetupPerAddr
		free := l.MaxTests - s.tests.all - s.reserved
		if reserved {
			free++
		}
		if perAddr && free > 0 && s.tests.take(ip, l.MaxTests, l.MaxPerClient) {
			s.setup.take(ip, l.MaxTests, maxSetupPerAddr)
			if reserved {
				s.reserved--
				reserved = false
			}
			s.mu.Unlock()
			return admitted
		}
		// ip's own set-ups will start or go idle; a victim is on its way
		// out; a waiter ahead takes the next idle set-up.
		wait := !perAddr || reserved || s.othersFirstLocked(w)
		if perAddr && !reserved && !s.othersFirstLocked(w) {
			evicted, more := s.giveUpIdleLocked(ip, now)
			if evicted {
				s.reserved++
				reserved = true
			}
			wait = evicted || more
		}
		s.mu.Unlock()
		if !wait {
			return admitBusy
		}
		if !now.Before(deadline) {
			if !perAddr {
				return admitSetupBusy
			}
			return admitBusy
		}
		time.Sleep(admitPoll)
	}
}

// admitWaiter is a new test waiting in admit for a slot.
type admitWaiter struct {
	ip    netip.Addr
	since time.Time
}

// othersFirstLocked says whether another waiter goes before w for the
// next idle set-up: one from an address holding fewer test slots (a board
// with none goes before a flood's address holding several), or as many
// and waiting longer. Holds s.mu.
func (s *Iperf3) othersFirstLocked(w *admitWaiter) bool {
	mine := s.tests.by[w.ip]
	for x := range s.waiters {
		if x == w || s.setup.by[x.ip] >= maxSetupPerAddr {
			continue
		}
		if theirs := s.tests.by[x.ip]; theirs < mine || theirs == mine && x.since.Before(w.since) {
			return true
		}
	}
	return false
}

// giveUpIdleLocked evicts the longest idle set-up (ip's own when ip holds
// its max_per_client), and says whether it did, and whether waiting may
// help anyway: set-ups not yet idle are in the way.
func (s *Iperf3) giveUpIdleLocked(ip netip.Addr, now time.Time) (evicted, more bool) {
	own := s.tests.by[ip] >= s.cfg.Limits.MaxPerClient
	var victim *iperf3Test
	var oldest time.Time
	inSetup := false
	for _, t := range s.byCookie {
		if own && t.peer.Addr().Unmap() != ip {
			continue
		}
		step, ok := t.setup.idleSince()
		if !ok {
			continue
		}
		inSetup = true
		if now.Sub(step) >= setupIdle && (victim == nil || step.Before(oldest)) {
			victim, oldest = t, step
		}
	}
	if victim != nil && victim.setup.evict() {
		victim.ctl.Close()
		s.refuse.Refuse("iperf3: test idle in set-up gave its slot to a new test", victim.peer.Addr().Unmap().String(),
			"idle", now.Sub(oldest).Round(time.Millisecond))
		return true, inSetup
	}
	return false, inSetup
}
