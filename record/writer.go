package record

import (
	"context"
	"time"
)

// run is the sink's single writer: woken by put, it lingers so that the
// entries arriving together share a transaction, then writes the queue
// batch by batch; once the sink closes it drains the queue and returns.
func (s *Sink) run() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.abort:
			cancel()
		case <-s.done:
		}
	}()
	w := &writer{s: s, ctx: ctx, wait: s.opt.Retry}
	closing := s.closing
	for {
		select {
		case <-s.wake:
			if !s.linger(&closing) {
				return
			}
		case <-closing:
			closing = nil // closed: keep draining until empty
		case <-s.abort:
			return
		}
		if !w.drain() {
			return
		}
		if closing == nil && s.drained() {
			return
		}
	}
}

// writer is the state of run between batches: whether the store is
// failing, the retry's wait and the throttle of its log.
type writer struct {
	s        *Sink
	ctx      context.Context // ends when the sink is aborted
	failing  bool
	storeLog throttle // while failing: one line a minute
	wait     time.Duration
}

// drain writes the queue, a batch at a time, until it is empty (or there
// is no store), retrying a failed batch after a wait. It is false when the
// sink is aborted.
func (w *writer) drain() bool {
	s := w.s
	for {
		batch := s.nextBatch()
		if len(batch) == 0 || s.store == nil {
			return true
		}
		if err := s.store.addBatch(w.ctx, batch); err != nil {
			s.storeErrs.Add(1)
			if w.ctx.Err() != nil || !w.backOff(err) {
				return false
			}
			continue
		}
		w.stored(batch)
	}
}

// nextBatch is the head of the queue, up to BatchSize entries.
func (s *Sink) nextBatch() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.queue), s.opt.BatchSize)
	return s.queue[:n:n]
}

// backOff notes a failed write for Health, logs it (at once the first
// time, then once a minute) and waits before the retry, twice as long each
// time up to 10 s. It is false when the sink is aborted meanwhile.
func (w *writer) backOff(err error) bool {
	s := w.s
	now := time.Now()
	s.storeFailed(err, now)
	if !w.failing {
		s.log.Error("record store write failed; retrying, serving goes on", "err", err,
			"pending", s.Stats().Pending)
		w.failing = true
		w.storeLog = throttle{last: now}
	} else if n, ok := w.storeLog.due(now); ok {
		st := s.Stats()
		s.log.Error("record store still failing; retrying, serving goes on", "err", err,
			"failing_for", now.Sub(s.failingSinceTime()).Round(time.Second), "failed_writes_since_last_log", n+1,
			"pending", st.Pending, "journal_bytes", st.JournalBytes, "journal_cap", st.JournalMaxBytes, "dropped", st.Dropped)
	} else {
		s.log.Debug("record store write failed again", "err", err, "retry_in", w.wait)
	}
	select {
	case <-time.After(w.wait):
	case <-s.abort:
		return false
	}
	w.wait = min(w.wait*2, 10*time.Second)
	return true
}

// storeFailed notes, for Health, since when the store fails, its last
// error and whether it failed for want of space.
func (s *Sink) storeFailed(err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failingSince.IsZero() {
		s.failingSince = now
	}
	s.storeErr = err.Error()
	if isDiskFull(err) {
		s.diskFullAt = now
	}
}

// stored counts a committed batch, says so when it ends a failure, and
// takes the batch off the queue.
func (w *writer) stored(batch []*entry) {
	s := w.s
	if w.failing {
		s.log.Info("record store writable again", "written", len(batch), "failed_for", time.Since(s.failingSinceTime()).Round(time.Second))
		w.failing, w.wait = false, s.opt.Retry
		s.mu.Lock()
		s.failingSince, s.storeErr, s.diskFullAt = time.Time{}, "", time.Time{}
		s.mu.Unlock()
	}
	s.written.Add(int64(len(batch)))
	s.batches.Add(1)
	s.dequeue(batch)
}

// dequeue takes a stored batch off the head of the queue. An emptied queue
// settles the journal, then reads back what went to the journal only.
func (s *Sink) dequeue(batch []*entry) {
	var freed int64
	for _, e := range batch {
		freed += int64(e.size)
	}
	s.mu.Lock()
	s.queue = s.queue[len(batch):]
	s.pendingBytes -= freed
	empty, recover := len(s.queue) == 0, s.journalOnly && s.opt.Journal != nil
	if empty {
		s.queue = nil
		s.settle(false)
	}
	s.mu.Unlock()
	if empty && recover {
		s.recover()
	}
}

// drained reports, once the sink is closed, whether the writer is done:
// the queue is empty (the journal is then emptied) or there is no store
// to write it to.
func (s *Sink) drained() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	empty := len(s.queue) == 0
	if empty && s.store != nil {
		s.settle(true)
	}
	return empty || s.store == nil
}

func (s *Sink) failingSinceTime() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failingSince
}

// linger lets events gather before a transaction: a Linger at a time
// while more keep coming, up to MaxLinger, until the batch is full or the
// sink closes (*closing is then set to nil). It is false when the sink is
// aborted.
func (s *Sink) linger(closing *chan struct{}) bool {
	queued := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.queue)
	}
	n := queued()
	end := time.Now().Add(s.opt.MaxLinger)
	t := time.NewTimer(s.opt.Linger)
	defer t.Stop()
	for n < s.opt.BatchSize {
		select {
		case <-t.C:
		case <-*closing:
			*closing = nil
			return true
		case <-s.abort:
			return false
		}
		was := n
		n = queued()
		left := time.Until(end)
		if n == was || left <= 0 {
			break
		}
		t.Reset(min(s.opt.Linger, left))
	}
	return true
}

// journalKeep is how large the journal may grow while everything in it is
// stored before the writer empties it. Emptying it after every batch cost
// an ftruncate (and the block it freed, allocated again by the next
// append) per fetch when fetches come one at a time; what it keeps instead
// is at most this much of stored entries for a restart after kill -9 to
// read again and skip by uid.
const journalKeep = 1 << 20

// settle runs with s.mu held once the queue is empty: when nothing in the
// journal waits outside the store, it empties the journal (when it has
// reached journalKeep, or always when force) or else moves readOff past
// what it holds, all of which is stored.
func (s *Sink) settle(force bool) {
	j := s.opt.Journal
	if j == nil || s.journalOnly || s.keepJournal {
		return
	}
	size, err := j.size()
	// A small journal cap empties sooner: a quarter of the cap stays free
	// for what a healthy store has not stored yet.
	if err == nil && size < min(journalKeep, s.opt.JournalMaxBytes/4) && !force {
		s.readOff = size
		return
	}
	if err := j.truncate(); err != nil {
		s.log.Warn("record journal not emptied; it is replayed idempotently", "err", err)
		return
	}
	s.readOff = 0
}

// recover queues again what went to the journal only (a memory bound was
// hit while the store was slow or failing), now that the store has caught
// up, so those records show up without a restart. It reads on from where
// the last pass stopped, through the journal's own descriptor and without
// holding the lock, as many entries as the memory bounds allow; the queue
// draining calls it again for the rest. Entries read that are already
// stored are skipped by uid.
func (s *Sink) recover() {
	j := s.opt.Journal
	s.mu.Lock()
	gen := s.journalOnlyN.Load()
	size, err := j.size()
	from := s.readOff
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("record journal: cannot read back deferred entries; they are imported at the next start", "err", err)
		return
	}
	var es []*entry
	var bytes int64
	next, bad, err := j.scan(from, size, nil, func(e *entry, n int, _ int64) bool {
		if !s.fits(len(es), bytes, n) {
			return false
		}
		e.size = n
		es = append(es, e)
		bytes += int64(n)
		return true
	})
	if err != nil {
		s.log.Warn("record journal: cannot read back deferred entries; they are imported at the next start", "err", err)
		return
	}
	s.mu.Lock()
	s.queue = append(s.queue, es...)
	s.pendingBytes += bytes
	s.readOff = next
	if next >= size && s.journalOnlyN.Load() == gen {
		s.journalOnly = false
	}
	s.mu.Unlock()
	s.recovered.Add(int64(len(es)))
	s.log.Info("record journal: deferred entries queued again", "entries", len(es), "unreadable_lines", bad,
		"done", next >= size)
}
