package measure

import (
	"sync"
	"time"
)

// Clock is the time a Sampler keeps; nil is the system's. Tests drive a
// Sampler with a fake one.
type Clock interface {
	Now() time.Time
	// At returns a channel that receives once t has come, and a func
	// that stops it.
	At(t time.Time) (<-chan time.Time, func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) At(t time.Time) (<-chan time.Time, func() bool) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, tm.Stop
}

// Sampler takes a cumulative reading of a transfer every period on a
// goroutine of its own: at Start + k*Every (k = 1, 2, ...; a late wake-up
// does not shift the later ones), each reading at the time it was taken.
// Stop or Finish ends it with a last reading, so the intervals cut from
// the readings (Intervals, from the base) always add up to the total.
//
// httpboot, which watches many transfers at once, ticks them from one
// goroutine of its own and cuts with Cut and Halve instead.
type Sampler struct {
	clock Clock
	start time.Time
	every time.Duration
	read  func(at time.Duration) Sample

	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu   sync.Mutex
	base Sample
	ss   []Sample
}

// SamplerOptions are a Sampler's settings beyond its period.
type SamplerOptions struct {
	// Base takes a reading at Start (Read(0), waiting for Start when it is
	// ahead): what came before it, iperf3's omitted seconds, is not
	// measured. Without it the base is all zero.
	Base  bool
	Clock Clock // nil: the system's
}

// StartSampler starts reading every period from start. read is called on
// the sampler's goroutine with the time since start (0 for the base) and
// returns the cumulative reading; its At is set by the sampler.
func StartSampler(start time.Time, every time.Duration, read func(at time.Duration) Sample, o SamplerOptions) *Sampler {
	s := &Sampler{clock: o.Clock, start: start, every: every, read: read,
		stop: make(chan struct{}), done: make(chan struct{})}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	go s.run(o.Base)
	return s
}

func (s *Sampler) wait(t time.Time) bool {
	c, stop := s.clock.At(t)
	defer stop()
	select {
	case <-c:
		return true
	case <-s.stop:
		return false
	}
}

func (s *Sampler) run(base bool) {
	defer close(s.done)
	if base {
		if s.clock.Now().Before(s.start) && !s.wait(s.start) {
			return
		}
		b := s.read(0)
		b.At = 0
		s.mu.Lock()
		s.base = b
		s.mu.Unlock()
	}
	if s.every <= 0 {
		<-s.stop
		return
	}
	for k := 1; ; k++ {
		if !s.wait(s.start.Add(time.Duration(k) * s.every)) {
			return
		}
		at := s.clock.Now().Sub(s.start)
		r := s.read(at)
		r.At = at
		s.mu.Lock()
		s.ss = append(s.ss, r)
		s.mu.Unlock()
	}
}

// Pause stops the readings (a UDP receiver pauses when the sender says it
// is done, so none is taken in the grace period for stragglers). When it
// returns, read is not called again by the sampler.
func (s *Sampler) Pause() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// Stop pauses and ends the readings with last: a reading taken at or after
// last.At is dropped (last, cumulative, holds what it counted). It returns
// the base and the readings, last included.
func (s *Sampler) Stop(last Sample) (Sample, []Sample) {
	s.Pause()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.ss)
	for n > 0 && s.ss[n-1].At >= last.At {
		n--
	}
	s.ss = append(s.ss[:n], last)
	return s.base, s.ss
}

// Finish is Stop with a last reading taken now, at at (since start; a UDP
// receiver's test ends when the sender stopped, not after the grace
// period it waited for stragglers).
func (s *Sampler) Finish(at time.Duration) (Sample, []Sample) {
	s.Pause()
	last := s.read(at)
	last.At = at
	return s.Stop(last)
}

// Since is the time from start to now on the sampler's clock.
func (s *Sampler) Since() time.Duration { return s.clock.Now().Sub(s.start) }
