package measure

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is a Clock a test moves by hand: At's channels receive when
// Advance passes their time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	armed   chan struct{} // a waiter was added
}

type fakeWaiter struct {
	t time.Time
	c chan time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t, armed: make(chan struct{}, 16)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) At(t time.Time) (<-chan time.Time, func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan time.Time, 1)
	if !t.After(f.now) {
		c <- f.now
	} else {
		f.waiters = append(f.waiters, fakeWaiter{t, c})
	}
	f.armed <- struct{}{}
	return c, func() bool { return true }
}

// Advance moves the clock by d and fires what came due.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.t.After(f.now) {
			w.c <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// TestSamplerFakeClock drives a sampler with a fake clock: readings at
// start + k*period, taken at the time the clock shows (one wake-up 300 ms
// late, the next on its own time again), the base at a start in the
// future, and Stop's last reading dropping a later one: the intervals add
// up to the total.
func TestSamplerFakeClock(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk := newFakeClock(t0)
	start := t0.Add(2 * time.Second) // two omitted seconds
	var mu sync.Mutex
	bytes := int64(0)
	reads := make(chan time.Duration, 16)
	read := func(at time.Duration) Sample {
		mu.Lock()
		defer mu.Unlock()
		reads <- at
		return Sample{Bytes: bytes, Retransmits: bytes / 1000, Cwnd: bytes, RTT: time.Duration(bytes)}
	}
	setBytes := func(n int64) { mu.Lock(); bytes = n; mu.Unlock() }
	s := StartSampler(start, time.Second, read, SamplerOptions{Base: true, Clock: clk})

	<-clk.armed   // waiting for start
	setBytes(500) // omitted
	clk.Advance(2 * time.Second)
	if at := <-reads; at != 0 {
		t.Fatalf("base read at %v, want 0", at)
	}
	step := func(d time.Duration, b int64, want time.Duration) {
		t.Helper()
		<-clk.armed
		setBytes(b)
		clk.Advance(d)
		if at := <-reads; at != want {
			t.Fatalf("read at %v, want %v", at, want)
		}
	}
	step(time.Second, 1500, time.Second)
	step(1300*time.Millisecond, 4500, 2300*time.Millisecond) // late
	step(700*time.Millisecond, 6500, 3*time.Second)          // on time again
	step(time.Second, 7000, 4*time.Second)
	<-clk.armed
	setBytes(8000)
	base, ss := s.Stop(Sample{At: 3500 * time.Millisecond, Bytes: 8000, Retransmits: 8})
	if base.Bytes != 500 || base.At != 0 {
		t.Errorf("base %+v, want 500 B at 0", base)
	}
	got := Intervals(base, ss, 0)
	want := []Interval{
		{Start: 0, End: time.Second, Bytes: 1000, Retransmits: 1, Cwnd: 1500, RTT: 1500},
		{Start: time.Second, End: 2300 * time.Millisecond, Bytes: 3000, Retransmits: 3, Cwnd: 4500, RTT: 4500},
		{Start: 2300 * time.Millisecond, End: 3 * time.Second, Bytes: 2000, Retransmits: 2, Cwnd: 6500, RTT: 6500},
		// The reading at 4 s came after the last (3.5 s): dropped.
		{Start: 3 * time.Second, End: 3500 * time.Millisecond, Bytes: 1500, Retransmits: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("intervals (-want +got):\n%s", diff)
	}
	var sum int64
	for _, iv := range got {
		sum += iv.Bytes
	}
	if sum != 8000-500 {
		t.Errorf("intervals hold %d B, want %d", sum, 8000-500)
	}
}

// TestSamplerFinish: Finish reads the last time itself, at the given end;
// a sampler stopped before its base has none.
func TestSamplerFinish(t *testing.T) {
	t0 := time.Unix(0, 0)
	clk := newFakeClock(t0)
	var n int64
	reads := make(chan struct{}, 16)
	s := StartSampler(t0, time.Second, func(time.Duration) Sample { n += 100; reads <- struct{}{}; return Sample{Bytes: n} },
		SamplerOptions{Clock: clk})
	<-clk.armed
	clk.Advance(time.Second)
	<-reads
	<-clk.armed
	base, ss := s.Finish(1500 * time.Millisecond)
	if diff := cmp.Diff([]Sample{{At: time.Second, Bytes: 100}, {At: 1500 * time.Millisecond, Bytes: 200}}, ss); diff != "" || base != (Sample{}) {
		t.Errorf("base %+v, readings (-want +got):\n%s", base, diff)
	}

	s = StartSampler(t0.Add(time.Hour), time.Second, func(time.Duration) Sample { t.Error("read before start"); return Sample{} },
		SamplerOptions{Base: true, Clock: clk})
	<-clk.armed
	base, ss = s.Stop(Sample{Bytes: 7})
	if base != (Sample{}) || len(ss) != 1 || ss[0].Bytes != 7 {
		t.Errorf("stopped before start: base %+v, readings %+v", base, ss)
	}
}
