package tftp

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// TestWindowedPeriodicLossNoStall is the stall another engineer saw on main
// in default mode: the client loses every DATA packet n with n%97 == 13
// (2 MiB, blksize 1468, windowsize 64, server timeout 1 s). The sender gave
// up with "blocks 60-123: no acknowledgement after 6 sends" while the
// client waited at block 124 resending an old ACK: the last block of the
// window was lost, the client's timer (200 ms) resent its old ACK 59 and
// restarted its count there, so the window resent (60..123, duplicates to
// it) drew nothing. The adaptive timer now probes the lost tail within a
// few round trips, long before the client's timer.
func TestWindowedPeriodicLossNoStall(t *testing.T) {
	ts := startServer(t, Config{Timeout: time.Second})
	want := ts.file(t, "f", 2<<20)
	opt := ClientOptions{BlkSize: 1468, WindowSize: 64, Timeout: 200 * time.Millisecond, Retries: 50,
		QuietDuplicates: true, RecountAfterTimeout: true, // as the client that saw the stall
		Fault: func(n int, _ int64) Fault {
			if n%97 == 13 {
				return Drop
			}
			return Deliver
		}}
	st := getWhole(t, loopbackConn(t), ts.Addr(), "f", opt, want)
	ev := ts.fetches(t, 1)[0]
	if ev.Outcome != event.OutcomeOK || ev.Bytes != int64(len(want)) {
		t.Errorf("event %+v %+v; want ok, %d bytes", ev, ev.TFTP, len(want))
	}
	t.Logf("%d ACKs, %d early, %d client timeouts; %+v", st.ACKs, st.EarlyACKs, st.Timeouts, ev.TFTP)
}

// bufferClient models a client whose socket buffer takes cap packets of a
// round: a round of n blocks (plus its gap block when n is under the
// limit) that has more loses its tail, and the probe then finds the first
// cap blocks delivered. It drives the sender's window for rounds rounds
// and returns the tail losses and the window of each round.
func bufferClient(c *congestion, cap, rounds int) (losses int, windows []int) {
	for range rounds {
		n := c.window()
		pkts := n
		if n < c.limit {
			n = min(n, c.limit-2)
			pkts = n + 1
		}
		windows = append(windows, n)
		c.sent(n, false)
		if pkts > cap {
			losses++
			c.lost(true, min(n, cap))
			continue
		}
		c.acked()
	}
	return losses, windows
}

// TestCongestionFindsBufferLimit: 8192 x 16 at MTU 9000 against atftp, as
// a model (a round takes 12 packets, 745 rounds a 64 MiB file). The window
// learns the limit from the second lost tail in a row (one alone is taken
// for a random loss) at the blocks delivered, not one block lower per
// loss, and probes past it less and less often: 8 tail losses, where one
// block per loss and a creep of 1/64 a round cost about 16 (each a
// timeout).
func TestCongestionFindsBufferLimit(t *testing.T) {
	c := newCongestion(16, time.Second, 0)
	losses, windows := bufferClient(c, 12, 745)
	if losses > 9 {
		t.Errorf("%d tail losses in 745 rounds, want at most 9", losses)
	}
	if _, med, _ := c.stats(); med != 11 {
		t.Errorf("median window %d, want 11 (11 blocks and the gap block fill 12 packets)", med)
	}
	t.Logf("%d losses; windows of the first 20 rounds %v", losses, windows[:20])
}

// TestCongestionAwayClientKeepsLimit: a round below the learnt limit that
// loses its tail (the client was descheduled) keeps the window and the
// limit, and so does a second in a row; the third in a row is a limit
// that moved.
func TestCongestionAwayClientKeepsLimit(t *testing.T) {
	c := newCongestion(16, time.Second, 0)
	bufferClient(c, 12, 100) // learns 12
	if c.stuck != 12 || c.window() != 11 {
		t.Fatalf("after the model: stuck %v window %d, want 12 and 11", c.stuck, c.window())
	}
	for i := range 2 {
		c.lost(true, 11) // away
		if c.stuck != 12 || c.window() != 11 {
			t.Errorf("loss %d below the limit: stuck %v window %d, want 12 and 11 kept", i+1, c.stuck, c.window())
		}
	}
	c.lost(true, 8) // a third in a row: the client's buffer shrank
	if c.stuck != 8 {
		t.Errorf("a third loss in a row left the limit at %v, want 8 (the blocks delivered)", c.stuck)
	}
}

// TestCongestionRandomTailLoss: a round's last packet lost at random (5%
// of rounds, as at 5% random loss) is not a limit: the window stays near
// the negotiated 16. Taking each lost tail for a limit walked it to 1.
func TestCongestionRandomTailLoss(t *testing.T) {
	c := newCongestion(16, time.Second, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	losses := 0
	for range 2000 {
		n := c.window()
		if n < c.limit {
			n = min(n, c.limit-2)
		}
		c.sent(n, false)
		if rng.IntN(100) < 5 {
			losses++
			c.lost(true, n) // the probe finds every block but the gap
			continue
		}
		c.acked()
	}
	if _, med, _ := c.stats(); med < 14 {
		t.Errorf("median window %d after %d random tail losses in 2000 rounds, want at least 14", med, losses)
	}
}

// TestCongestionTimers: the first round's timer comes from the OACK's round
// trip (capped at the RTO floor: it includes the client's start), and the
// tail-loss probe fires after two round trips, at least defaultMinPTO and
// at most the RTO; a test's floor holds both timers.
func TestCongestionTimers(t *testing.T) {
	c := newCongestion(16, time.Second, 0)
	if got := c.pto(); got != time.Second {
		t.Errorf("pto with no sample %v, want the negotiated timeout", got)
	}
	c.seed(77 * time.Millisecond)
	if c.srtt != defaultMinRTO {
		t.Errorf("seed of 77ms gave srtt %v, want %v", c.srtt, defaultMinRTO)
	}
	c = newCongestion(16, time.Second, 0)
	c.seed(200 * time.Microsecond)
	for range 20 {
		c.sample(200 * time.Microsecond)
	}
	if got := c.pto(); got != defaultMinPTO { // 200µs + 200µs + 1ms
		t.Errorf("pto at srtt 200µs %v, want the %v floor", got, defaultMinPTO)
	}
	if got := c.rto(); got != defaultMinRTO {
		t.Errorf("rto at srtt 200µs %v, want the %v floor", got, defaultMinRTO)
	}
	if !c.prompt(500*time.Microsecond) || c.prompt(16*time.Millisecond) {
		t.Errorf("prompt(500µs) %v, prompt(16ms) %v; want true, false", c.prompt(500*time.Microsecond), c.prompt(16*time.Millisecond))
	}
	fixed := newCongestion(16, 200*time.Millisecond, 200*time.Millisecond)
	fixed.sample(time.Millisecond)
	if got := fixed.pto(); got != 200*time.Millisecond {
		t.Errorf("pto with a test floor of 200ms %v, want 200ms", got)
	}
}
