package measure

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPacer(8_000_000, 1000, 4, now) // 1e6 bytes/s: a packet per ms; depth 10 ms
	if k := p.Take(now, 1000, 32); k != 1 {
		t.Errorf("first take: %d packets, want the initial 1", k)
	}
	if w := p.Wait(1000); w != ms {
		t.Errorf("wait %v, want 1ms", w)
	}
	// A late wake-up of 3.5 ms owes 3 packets and keeps half a token.
	if k := p.Take(now.Add(3500*time.Microsecond), 1000, 32); k != 3 {
		t.Errorf("after 3.5 ms: %d packets, want 3", k)
	}
	// A stall of a second is capped at the 10 ms depth.
	if k := p.Take(now.Add(time.Second), 1000, 32); k != 10 {
		t.Errorf("after a stall: %d packets, want 10 (the depth)", k)
	}
}

// TestPacerLongRun counts what a sender like stream's sends in 10 s of
// fake time: a batch goes at once (10 µs a sendmmsg) while tokens last,
// else it sleeps the pacer's Wait and wakes late by a varying 0-2.9 ms, as
// Go's timers do. What it sent plus what it may still send at the end is
// the rate asked over the time it ran, to the datagram: no late wake-up
// lost tokens to the bucket's depth.
func TestPacerLongRun(t *testing.T) {
	const batch = 32
	for _, tc := range []struct {
		rate int64
		size int
	}{{100_000_000, 1448}, {1_000_000_000, 1448}, {1_000_000, 100}, {10_000_000, 9000}} {
		now := time.Unix(0, 0)
		end := now.Add(10 * time.Second)
		p := NewPacer(tc.rate, tc.size, batch, now)
		want := BatchFor(tc.rate, tc.size, batch)
		var sent, wakes int
		for now.Before(end) {
			if k := p.Take(now, tc.size, batch); k > 0 {
				sent += k
				now = now.Add(10 * time.Microsecond)
				continue
			}
			wakes++
			now = now.Add(p.Wait(want*tc.size) + time.Duration(wakes%30)*100*time.Microsecond)
		}
		owed := p.Take(now, tc.size, 1<<30)
		exp := float64(tc.rate)/8*now.Sub(time.Unix(0, 0)).Seconds()/float64(tc.size) + 1 // +1: the first at once
		if d := float64(sent+owed) - exp; d < -1 || d > 1 {
			t.Errorf("%d bit/s of %d B: %d datagrams sent and %d owed in %v, want %.1f", tc.rate, tc.size, sent, owed,
				now.Sub(time.Unix(0, 0)), exp)
		}
		if depth := int(float64(tc.rate)/8*PacerDepth.Seconds())/tc.size + batch; owed > depth {
			t.Errorf("%d bit/s of %d B: %d datagrams owed at the end, more than the bucket's %d", tc.rate, tc.size, owed, depth)
		}
	}
}

func TestBatchFor(t *testing.T) {
	for name, tc := range map[string]struct {
		rate int64
		size int
		want int
	}{
		"1 Gbit/s waits for a full batch":    {1e9, 1448, 32},
		"100 Mbit/s waits a millisecond":     {100e6, 1448, 8},
		"10 Mbit/s wakes for every datagram": {10e6, 1448, 1},
		"jumbo datagrams at 1 Gbit/s":        {1e9, 65000, 1},
	} {
		if got := BatchFor(tc.rate, tc.size, 32); got != tc.want {
			t.Errorf("%s: BatchFor(%d, %d) = %d, want %d", name, tc.rate, tc.size, got, tc.want)
		}
	}
}

// TestDueLongRun: a sender writing blocks whenever Due says the bytes so
// far are on time (PacerQuantum of slack, as Pace allows), checked every
// 0.7 ms of fake time, sends the rate asked over 5 s, within one block
// and the slack; after a stall it makes up the average at once.
func TestDueLongRun(t *testing.T) {
	const rate, block = 40_000_000, 128 << 10
	start := time.Unix(0, 0)
	var sent int64
	for now := start; now.Before(start.Add(5 * time.Second)); now = now.Add(700 * time.Microsecond) {
		if !Due(rate, start, sent).After(now.Add(PacerQuantum)) {
			sent += block
		}
	}
	want := int64(rate / 8 * 5)
	if slack := int64(block + rate/8*PacerQuantum.Seconds()); sent < want || sent > want+slack {
		t.Errorf("sent %d B in 5 s at %d bit/s, want %d to %d", sent, rate, want, want+slack)
	}
	// A stall of 2 s: everything owed is due at once.
	if d, want := Due(rate, start, sent+rate/8*2).Sub(Due(rate, start, sent)), 2*time.Second; d < want-time.Microsecond || d > want+time.Microsecond {
		t.Errorf("2 s more owed after a stall: due %v later, want %v", d, want)
	}
}

func TestPaceNoRate(t *testing.T) {
	done := make(chan struct{})
	close(done)
	if !Pace(0, time.Now(), 1<<40, done) {
		t.Errorf("no rate: paced")
	}
	if Pace(8, time.Now(), 1<<20, done) {
		t.Errorf("due in a day and done: went on")
	}
}

func BenchmarkPacerTake(b *testing.B) {
	now := time.Unix(0, 0)
	p := NewPacer(1e9, 1448, 32, now)
	for b.Loop() {
		now = now.Add(40 * time.Microsecond)
		p.Take(now, 1448, 32)
	}
}
