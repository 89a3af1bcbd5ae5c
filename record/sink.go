package record

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/netstate"
)

// SinkOptions shape a Sink. Zero values take the defaults.
type SinkOptions struct {
	// Journal makes every event durable before Fetch returns (see Journal).
	// nil: events live in memory until the store has them.
	Journal *Journal
	// Interface is stamped on fetches that do not name their own.
	Interface string
	// Net reads the interface's MTU, speed and offloads; nil: not recorded.
	Net *netstate.Reader
	// Kernel release; default netstate.Kernel().
	Kernel string
	// Hosts fills a fetch's MAC (by client address) and architecture.
	Hosts *hosts.Table
	// Source of the records; default "serve".
	Source string
	// MaxPending bounds the events held in memory while the store is slow
	// or failing (default 65536). Past it, journaled events wait in the
	// journal for the next start; others are dropped, counted and logged.
	MaxPending int
	// BatchSize is how many events one transaction writes (default 256).
	BatchSize int
	// Retry is the first wait after a store error, doubling up to 10 s
	// (default 200 ms).
	Retry time.Duration
	// Linger is how long the writer lets events gather before a
	// transaction (default 50 ms), so that many short fetches share one
	// commit. Durability does not wait for it: the journal has them.
	Linger time.Duration
}

// SinkStats counts what a Sink did.
type SinkStats struct {
	Written     int64 // entries committed to the store
	Pending     int   // entries waiting in memory
	JournalOnly int64 // entries that went to the journal only (memory bound hit, or no store)
	Recovered   int64 // entries read back from the journal while running
	Dropped     int64 // entries lost: neither journaled nor kept
	StoreErrors int64 // failed store writes (retried)
}

// Sink turns events into records and writes them to a Store without
// blocking serving: Fetch converts the event, appends it to the journal
// (one write) and queues it; one writer goroutine inserts queued entries in
// batches, one transaction each, retrying with backoff while the store
// fails. Safe for concurrent use.
type Sink struct {
	store *Store // nil: journal only
	opt   SinkOptions
	log   *slog.Logger

	mu          sync.Mutex
	queue       []*entry // in journal order
	journalOnly bool     // some journaled entries are not queued: keep the journal
	closed      bool

	wake    chan struct{}
	closing chan struct{}
	abort   chan struct{}
	done    chan struct{}

	written, journalOnlyN, dropped, storeErrs, recovered atomic.Int64
}

// NewSink starts a sink writing to store (nil: only the journal keeps
// events, for import at the next start). Entries left in the journal by an
// earlier run are queued first.
func NewSink(store *Store, logger *slog.Logger, opt SinkOptions) *Sink {
	if opt.MaxPending <= 0 {
		opt.MaxPending = 65536
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 256
	}
	if opt.Retry <= 0 {
		opt.Retry = 200 * time.Millisecond
	}
	if opt.Linger <= 0 {
		opt.Linger = 50 * time.Millisecond
	}
	if opt.Kernel == "" {
		opt.Kernel = netstate.Kernel()
	}
	if opt.Source == "" {
		opt.Source = "serve"
	}
	s := &Sink{
		store: store, opt: opt, log: logger,
		wake: make(chan struct{}, 1), closing: make(chan struct{}), abort: make(chan struct{}), done: make(chan struct{}),
	}
	if j := opt.Journal; j != nil {
		es, bad, err := j.read()
		if err != nil {
			logger.Error("record journal unreadable; its entries stay in the file", "err", err)
			s.journalOnly = true
		}
		if bad > 0 {
			logger.Warn("record journal: skipped unreadable lines (torn by a crash?)", "file", j.Path(), "lines", bad)
		}
		if len(es) > 0 {
			logger.Info("record journal: importing entries from the last run", "file", j.Path(), "entries", len(es))
		}
		if store == nil {
			s.journalOnly = s.journalOnly || len(es) > 0
		} else {
			s.queue = es
		}
	}
	if store == nil {
		logger.Error("RECORDING TO THE STORE IS OFF: fetches are kept only in the journal and imported at the next start",
			"journal", journalPath(opt.Journal))
	}
	go s.run()
	s.signal()
	return s
}

func journalPath(j *Journal) string {
	if j == nil {
		return "(none)"
	}
	return j.Path()
}

// Stats returns the sink's counters.
func (s *Sink) Stats() SinkStats {
	s.mu.Lock()
	n := len(s.queue)
	s.mu.Unlock()
	return SinkStats{Written: s.written.Load(), Pending: n, JournalOnly: s.journalOnlyN.Load(),
		Recovered: s.recovered.Load(), Dropped: s.dropped.Load(), StoreErrors: s.storeErrs.Load()}
}

// Fetch records one fetch.
func (s *Sink) Fetch(f *event.Fetch) {
	r, ivs := s.convert(f)
	s.put(&entry{UID: newUID(), Record: r, Intervals: ivs})
}

// Lease records one DHCP binding.
func (s *Sink) Lease(l *event.Lease) {
	lr := &Lease{Time: l.Time.UTC(), Arch: l.Arch, Host: l.Host, BootFile: l.BootFile, Proxy: l.Proxy}
	if l.MAC != nil {
		lr.MAC = l.MAC.String()
	}
	if l.Addr.IsValid() {
		lr.Addr = l.Addr.String()
	}
	if !l.Expiry.IsZero() {
		lr.Expiry = l.Expiry.UTC()
	}
	s.put(&entry{UID: newUID(), Lease: lr})
}

// put journals and queues one entry. It never waits for the store.
func (s *Sink) put(e *entry) {
	var line []byte
	if s.opt.Journal != nil {
		b, err := json.Marshal(e)
		if err != nil {
			s.log.Error("record: cannot encode entry; dropped", "err", err)
			s.dropped.Add(1)
			return
		}
		line = append(b, '\n')
	}
	s.mu.Lock()
	journaled := false
	if line != nil {
		if err := s.opt.Journal.append(line); err != nil {
			s.log.Error("record journal write failed; keeping the entry in memory", "err", err)
		} else {
			journaled = true
		}
	}
	switch {
	case s.store != nil && !s.closed && len(s.queue) < s.opt.MaxPending:
		s.queue = append(s.queue, e)
	case journaled:
		s.journalOnly = true
		if s.journalOnlyN.Add(1) == 1 && s.store != nil {
			s.log.Error("record queue full or closed: entries wait in the journal for the next start",
				"pending", len(s.queue), "journal", s.opt.Journal.Path())
		}
	default:
		if n := s.dropped.Add(1); n == 1 || n%1000 == 0 {
			s.log.Error("record LOST: store behind and no journal", "dropped_total", n, "pending", len(s.queue))
		}
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the single writer.
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
	closing := s.closing
	failing := false
	wait := s.opt.Retry
	for {
		select {
		case <-s.wake:
			// Let more events gather, unless closing or the batch is full.
			s.mu.Lock()
			full := len(s.queue) >= s.opt.BatchSize
			s.mu.Unlock()
			if !full {
				select {
				case <-time.After(s.opt.Linger):
				case <-closing:
					closing = nil
				case <-s.abort:
					return
				}
			}
		case <-closing:
			closing = nil // closed: keep draining until empty
		case <-s.abort:
			return
		}
		for {
			s.mu.Lock()
			n := min(len(s.queue), s.opt.BatchSize)
			batch := s.queue[:n:n]
			s.mu.Unlock()
			if n == 0 || s.store == nil {
				break
			}
			if err := s.store.addBatch(ctx, batch); err != nil {
				s.storeErrs.Add(1)
				if ctx.Err() != nil {
					return
				}
				if !failing {
					s.log.Error("record store write failed; retrying, serving goes on", "err", err,
						"pending", s.Stats().Pending)
					failing = true
				} else {
					s.log.Debug("record store write failed again", "err", err, "retry_in", wait)
				}
				select {
				case <-time.After(wait):
				case <-s.abort:
					return
				}
				wait = min(wait*2, 10*time.Second)
				continue
			}
			if failing {
				s.log.Info("record store writable again", "written", n)
				failing, wait = false, s.opt.Retry
			}
			s.written.Add(int64(n))
			s.mu.Lock()
			s.queue = s.queue[n:]
			empty, recover := len(s.queue) == 0, s.journalOnly && s.opt.Journal != nil
			if empty {
				s.queue = nil
				if s.opt.Journal != nil && !s.journalOnly {
					if err := s.opt.Journal.truncate(); err != nil {
						s.log.Warn("record journal not emptied; it is replayed idempotently", "err", err)
					}
				}
			}
			s.mu.Unlock()
			if empty && recover {
				s.recover()
			}
		}
		if closing == nil {
			s.mu.Lock()
			empty := len(s.queue) == 0
			s.mu.Unlock()
			if empty || s.store == nil {
				return
			}
		}
	}
}

// recover queues again what went to the journal only (the memory bound was
// hit while the store was slow or failing), now that the store has caught
// up, so those records show up without a restart. The journal is read up to
// its size at the start through its own descriptor, without holding the
// lock; entries read that are already stored are skipped by uid.
func (s *Sink) recover() {
	j := s.opt.Journal
	s.mu.Lock()
	gen := s.journalOnlyN.Load()
	size, err := j.size()
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("record journal: cannot read back deferred entries; they are imported at the next start", "err", err)
		return
	}
	if size > maxRecover {
		s.log.Warn("record journal too large to read back while serving; it is imported at the next start",
			"journal", j.Path(), "bytes", size)
		return
	}
	es, bad, err := j.readUpTo(size)
	if err != nil {
		s.log.Warn("record journal: cannot read back deferred entries; they are imported at the next start", "err", err)
		return
	}
	s.mu.Lock()
	s.queue = append(s.queue, es...)
	if s.journalOnlyN.Load() == gen {
		s.journalOnly = false
	}
	s.mu.Unlock()
	s.recovered.Add(int64(len(es)))
	s.log.Info("record journal: deferred entries queued again", "entries", len(es), "unreadable_lines", bad)
}

// maxRecover bounds the journal read back while serving (larger ones wait
// for the next start).
const maxRecover = 256 << 20

// Close writes what is queued, waiting until ctx ends, then stops the
// writer. Entries still queued then stay in the journal for the next start.
// Events after Close go to the journal only. It does not close the store or
// the journal.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.closing)
	select {
	case <-s.done:
	case <-ctx.Done():
		close(s.abort)
		<-s.done
	}
	st := s.Stats()
	s.mu.Lock()
	deferred := s.journalOnly
	s.mu.Unlock()
	if st.Pending > 0 || deferred || st.Dropped > 0 {
		s.log.Warn("record sink closed with entries not in the store", "pending", st.Pending,
			"journal_only", st.JournalOnly, "dropped", st.Dropped, "journal", journalPath(s.opt.Journal))
	}
	return ctx.Err()
}
