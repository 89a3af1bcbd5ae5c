package stream

import (
	"sync"
	"time"
)

// sampler cuts a cumulative counter into intervals on a ticker, as iperf3
// prints them, and keeps a final partial interval so intervals always sum
// to the total.
type sampler struct {
	every time.Duration
	read  func() Stats // cumulative counters
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	prev  Stats
	at    time.Duration
	out   []Stats
}

func startSampler(start time.Time, every time.Duration, read func() Stats) *sampler {
	s := &sampler{every: every, read: read, start: start, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.cut(time.Since(s.start))
		}
	}
}

func (s *sampler) cut(now time.Duration) {
	cur := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = append(s.out, delta(s.prev, cur, s.at, now))
	s.prev, s.at = cur, now
}

// finish stops the ticker, cuts the last (partial) interval and returns
// all of them with the final cumulative snapshot and the elapsed time.
func (s *sampler) finish() ([]Stats, Stats, time.Duration) {
	return s.finishAt(time.Since(s.start))
}

// finishAt is finish with the last interval ending at end (since start)
// rather than now: a UDP receiver's test ends when the sender stopped, not
// after the grace period it waited for stragglers.
func (s *sampler) finishAt(end time.Duration) ([]Stats, Stats, time.Duration) {
	s.pause()
	s.mu.Lock()
	end = max(end, s.at)
	s.mu.Unlock()
	s.cut(end)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out, s.prev, s.at
}

// pause stops the ticker: a UDP receiver pauses when the sender says it is
// done, so no interval starts during the grace period.
func (s *sampler) pause() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}
