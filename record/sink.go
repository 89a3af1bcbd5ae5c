package record

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/internal/refuse"
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
	// Addrs names the interface holding a fetch's local address;
	// default netstate.NewAddrs(netstate.DefaultTTL).
	Addrs *netstate.Addrs
	// Kernel release; default netstate.Kernel().
	Kernel string
	// Hosts fills a fetch's MAC (by client address) and architecture.
	Hosts *hosts.Table
	// Source of the records; default "serve".
	Source string
	// Server and Site are stamped on every record and lease (server.name,
	// server.site): which pxeperf measured it, in a store many share.
	Server, Site string
	// MaxPending bounds the events held in memory while the store is slow
	// or failing (default 65536), and MaxPendingBytes their size (default
	// 64 MiB; an event counts as its journal line). Past either, journaled
	// events wait in the journal and are read back, a bounded slice at a
	// time, once the store has caught up; events without a journal are
	// dropped. Both are counted and logged (once a minute).
	MaxPending      int
	MaxPendingBytes int64
	// JournalMaxBytes caps the journal (records.journal_max_mib, default
	// 1 GiB), which grows while the store is away: past three quarters of
	// it, records of failed fetches (kind error) are no longer journaled,
	// so what is left goes to completed fetches and leases; at the cap no
	// record is (the newest are dropped). Each is counted by reason
	// (RefuseJournalErrors, RefuseJournalFull), shown by Health and
	// logged at most once a minute. Below the cap nothing is lost.
	JournalMaxBytes int64
	// BatchSize is how many events one transaction writes (default 256).
	BatchSize int
	// Retry is the first wait after a store error, doubling up to 10 s
	// (default 200 ms).
	Retry time.Duration
	// Linger is how long the writer lets events gather before a
	// transaction (default 50 ms), so that many short fetches share one
	// commit; while events keep coming, a Linger at a time, it waits on,
	// up to MaxLinger in all (default 20 Lingers, 1 s): the fetches of
	// boards booting together end over a second or so, one every few tens
	// of milliseconds, and a commit costs far more CPU than a record's
	// rows in it (see DESIGN.md#linger-fetches-that-end-together-share-a-commit).
	// Durability does not wait for it: the journal has them.
	Linger, MaxLinger time.Duration
}

// SinkStats counts what a Sink did.
type SinkStats struct {
	Written int64 // entries committed to the store
	Batches int64 // transactions that committed them
	Pending int   // entries waiting in memory
	// PendingBytes is their size, as counted against MaxPendingBytes.
	PendingBytes int64
	JournalOnly  int64 // entries that went to the journal only (memory bound hit, or no store)
	Recovered    int64 // entries read back from the journal while running
	Dropped      int64 // entries lost: neither journaled nor kept
	StoreErrors  int64 // failed store writes (retried)
	// JournalBytes is the journal's size now and JournalMaxBytes its cap.
	JournalBytes, JournalMaxBytes int64
	// JournalErrors counts failed journal writes (disk full, ...).
	JournalErrors int64
	// Failing: the last store write failed (it is being retried).
	Failing bool
	// Refused counts entries turned away from memory or the journal, by
	// reason (see the refusal constants).
	Refused map[string]uint64
}

// Reasons the sink refuses an entry a place, as counted in
// SinkStats.Refused and logged through internal/refuse.
const (
	// RefuseQueueFull: the memory queue is at MaxPending or
	// MaxPendingBytes; the entry waits in the journal.
	RefuseQueueFull = "record: queue full"
	// RefuseLost: the memory queue is full and there is no journal (or
	// its write failed): the entry is lost.
	RefuseLost = "record: lost"
	// RefuseTrimmed: the entry's journal line would pass maxLine; its
	// intervals (then labels) were left out, as its labels say.
	RefuseTrimmed = "record: trimmed to fit the journal"
	// RefuseJournalErrors: the journal is past three quarters of
	// JournalMaxBytes and the entry is a failed fetch: it is dropped, so
	// the rest is kept for completed fetches and leases.
	RefuseJournalErrors = "record: journal nearly full, failed fetch dropped"
	// RefuseJournalFull: the journal is at JournalMaxBytes: the entry is
	// dropped.
	RefuseJournalFull = "record: journal full"
)

// DefaultJournalMaxBytes is SinkOptions.JournalMaxBytes by default.
const DefaultJournalMaxBytes = 1 << 30

// Sink turns events into records and writes them to a Store without
// blocking serving: Fetch converts the event, appends it to the journal
// (one write) and queues it; one writer goroutine inserts queued entries in
// batches, one transaction each, retrying with backoff while the store
// fails. Safe for concurrent use.
type Sink struct {
	store *Store // nil: journal only
	opt   SinkOptions
	log   *slog.Logger

	mu           sync.Mutex
	queue        []*entry // in journal order
	pendingBytes int64    // sum of the queued entries' sizes
	journalOnly  bool     // some journaled entries are not queued: keep the journal
	// readOff is where in the journal reading back deferred entries goes
	// on; everything before it was queued (or read and found damaged).
	readOff int64
	// keepJournal: damaged lines could not be kept aside, so the journal
	// is never emptied in this run.
	keepJournal bool
	closed      bool
	refuse      *refuse.Log
	// What Health reports, guarded by mu: since when the store fails and
	// its last error; when a write last failed for want of space; when an
	// entry was last dropped; the journal's last write error.
	failingSince, diskFullAt, droppedAt, journalErrAt time.Time
	storeErr, journalErr                              string
	// journalLog throttles the log of failed journal writes to one line a
	// minute (with the count of those not logged): on a full disk every
	// fetch fails its write.
	journalLog throttle

	wake    chan struct{}
	closing chan struct{}
	abort   chan struct{}
	done    chan struct{}

	written, batches, journalOnlyN, dropped, storeErrs, recovered, journalErrs atomic.Int64
}

// NewSink starts a sink writing to store (nil: only the journal keeps
// events, for import at the next start). Entries left in the journal by an
// earlier run are queued first.
func NewSink(store *Store, logger *slog.Logger, opt SinkOptions) *Sink {
	if opt.MaxPending <= 0 {
		opt.MaxPending = 65536
	}
	if opt.MaxPendingBytes <= 0 {
		opt.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if opt.JournalMaxBytes <= 0 {
		opt.JournalMaxBytes = DefaultJournalMaxBytes
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
	if opt.MaxLinger < opt.Linger {
		opt.MaxLinger = 20 * opt.Linger
	}
	if opt.Kernel == "" {
		opt.Kernel = netstate.Kernel()
	}
	if opt.Source == "" {
		opt.Source = "serve"
	}
	if opt.Addrs == nil {
		opt.Addrs = netstate.NewAddrs(netstate.DefaultTTL)
	}
	s := &Sink{
		store: store, opt: opt, log: logger, refuse: refuse.New(logger, 0),
		wake: make(chan struct{}, 1), closing: make(chan struct{}), abort: make(chan struct{}), done: make(chan struct{}),
	}
	if j := opt.Journal; j != nil {
		s.importJournal(j)
	}
	if store == nil {
		logger.Error("RECORDING TO THE STORE IS OFF: fetches are kept only in the journal and imported at the next start",
			"journal", journalPath(opt.Journal))
	}
	go s.run()
	s.signal()
	return s
}

// importJournal queues what an earlier run left in the journal, up to the
// memory bounds (the rest is read back as the queue drains), and keeps its
// damaged lines aside.
func (s *Sink) importJournal(j *Journal) {
	aside := &aside{path: j.Path() + DamagedSuffix, from: JournalName}
	var es []*entry
	var size int64
	found := 0
	full := false // past the memory bounds: the rest is read back later
	next, bad, err := j.scan(0, -1, aside, func(e *entry, n int, at int64) bool {
		found++
		// The whole file is read, so that every damaged line is kept aside
		// now; entries past the bounds are only looked at.
		if s.store == nil || full {
			return true
		}
		if !s.fits(len(es), size, n) {
			full, s.readOff = true, at
			return true
		}
		e.size = n
		es = append(es, e)
		size += int64(n)
		return true
	})
	if aerr := aside.close(); aerr != nil {
		s.keepJournal = true
		s.log.Error("record journal: damaged lines could not be kept aside; the journal is kept whole", "file", j.Path(),
			"damaged_file", aside.path, "err", aerr)
	}
	if err != nil {
		s.log.Error("record journal unreadable; its entries stay in the file", "err", err)
		s.keepJournal = true
	}
	if bad > 0 {
		s.log.Warn("record journal: skipped damaged lines and kept them aside (a torn last line after a crash is normal)",
			"file", j.Path(), "lines", bad, "damaged_file", aside.path)
	}
	if found > 0 {
		s.log.Info("record journal: importing entries from the last run (those already stored are skipped by uid)",
			"file", j.Path(), "entries", found)
	}
	if s.store == nil {
		s.journalOnly = found > 0
		return
	}
	s.queue, s.pendingBytes = es, size
	if full {
		s.journalOnly = true // the rest is read back from readOff as the queue drains
	} else {
		s.readOff = next
	}
}

// DefaultMaxPendingBytes is SinkOptions.MaxPendingBytes by default.
const DefaultMaxPendingBytes = 64 << 20

// fits reports whether an entry of n bytes may join a queue of count
// entries and size bytes. An empty queue takes any entry, so reading back
// always progresses.
func (s *Sink) fits(count int, size int64, n int) bool {
	return count == 0 || count < s.opt.MaxPending && size+int64(n) <= s.opt.MaxPendingBytes
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
	n, b, failing := len(s.queue), s.pendingBytes, !s.failingSince.IsZero()
	var jn int64
	if s.opt.Journal != nil {
		jn = s.opt.Journal.n
	}
	s.mu.Unlock()
	return SinkStats{Written: s.written.Load(), Batches: s.batches.Load(), Pending: n, PendingBytes: b, JournalOnly: s.journalOnlyN.Load(),
		Recovered: s.recovered.Load(), Dropped: s.dropped.Load(), StoreErrors: s.storeErrs.Load(),
		JournalBytes: jn, JournalMaxBytes: s.opt.JournalMaxBytes, JournalErrors: s.journalErrs.Load(), Failing: failing,
		Refused: s.refuse.Counts()}
}

// Fetch records one fetch.
func (s *Sink) Fetch(f *event.Fetch) {
	r, ivs := s.convert(f)
	r.Server, r.Site = s.opt.Server, s.opt.Site
	s.put(&entry{UID: newUID(), Record: r, Intervals: ivs})
}

// Lease records one DHCP binding.
func (s *Sink) Lease(l *event.Lease) {
	lr := &Lease{Time: l.Time.UTC(), Arch: l.Arch, Host: l.Host, BootFile: l.BootFile, Proxy: l.Proxy,
		Server: s.opt.Server, Site: s.opt.Site}
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
		var ok bool
		if line, ok = s.encode(e); !ok {
			return
		}
		e.size = len(line)
	} else {
		e.size = approxSize(e)
	}
	s.mu.Lock()
	journaled := false
	if line != nil {
		if !s.journalTakes(e, len(line)) {
			s.mu.Unlock()
			return
		}
		if err := s.opt.Journal.append(line); err != nil {
			s.journalFailed(err)
		} else {
			journaled = true
			s.diskFullAt = time.Time{}
		}
	}
	switch {
	case s.store != nil && !s.closed && s.fits(len(s.queue), s.pendingBytes, e.size):
		e.queued = time.Now()
		s.queue = append(s.queue, e)
		s.pendingBytes += int64(e.size)
	case journaled:
		s.journalOnly = true
		s.journalOnlyN.Add(1)
		if s.store != nil && !s.closed {
			// The sink's own state, not the client's: one line a minute
			// however many clients fetch.
			s.refuse.Refuse(RefuseQueueFull, "", "pending", len(s.queue), "pending_bytes", s.pendingBytes,
				"journal", s.opt.Journal.Path(), "then", "it waits in the journal and is imported once the store catches up")
		}
	default:
		s.drop(RefuseLost, e, "pending", len(s.queue), "pending_bytes", s.pendingBytes,
			"why", "store behind and no journal (or its write failed)")
	}
	s.mu.Unlock()
	s.signal()
}

// journalTakes applies JournalMaxBytes to an entry of n bytes (s.mu
// held): false when it is dropped.
//
// A probe (a lookup the loader expected to miss) is no failure in the
// tables, but like one it moved nothing and costs a forged RRQ as little:
// past three quarters it goes too.
func (s *Sink) journalTakes(e *entry, n int) bool {
	j, limit := s.opt.Journal, s.opt.JournalMaxBytes
	switch {
	case j.n+int64(n) > limit:
		s.drop(RefuseJournalFull, e, "journal", j.Path(), "journal_bytes", j.n, "cap", limit,
			"fix", "bring the record store back (the journal empties once it has everything), or raise records.journal_max_mib")
		return false
	case j.n+int64(n) > limit/4*3 && e.Record != nil && notCompleted(e.Record):
		s.drop(RefuseJournalErrors, e, "journal", j.Path(), "journal_bytes", j.n, "cap", limit,
			"then", "the last quarter is kept for completed fetches and leases")
		return false
	}
	return true
}

// drop counts an entry lost for reason (s.mu held), logged once a minute.
func (s *Sink) drop(reason string, e *entry, args ...any) {
	s.dropped.Add(1)
	s.droppedAt = time.Now()
	s.refuse.Refuse(reason, "", append([]any{"last_client", e.client()}, args...)...)
}

// journalFailed notes a failed journal write (s.mu held): counted, shown
// by Health, logged at most once a minute.
func (s *Sink) journalFailed(err error) {
	s.journalErrs.Add(1)
	now := time.Now()
	s.journalErrAt, s.journalErr = now, err.Error()
	if isDiskFull(err) {
		s.diskFullAt = now
	}
	if n, ok := s.journalLog.due(now); ok {
		s.log.Error("record journal write failed; the entry is kept in memory while there is room, else dropped (counted)",
			"err", err, "failed_writes", s.journalErrs.Load(), "not_logged_since_last", n, "dropped", s.dropped.Load(),
			"next_log_within", throttleEvery)
	}
}

// throttle lets one log line through a minute and counts the others.
type throttle struct {
	last   time.Time
	missed int
}

// throttleEvery is how often a repeated failure is logged.
const throttleEvery = time.Minute

// due reports whether a line may be logged now, and how many were not
// since the last.
func (t *throttle) due(now time.Time) (missed int, ok bool) {
	if !t.last.IsZero() && now.Sub(t.last) < throttleEvery {
		t.missed++
		return 0, false
	}
	missed, t.missed, t.last = t.missed, 0, now
	return missed, true
}

// encode returns e's journal line. A line too long to be read back
// (maxLine) loses the entry's intervals, then its labels, which a label
// "pxeperf_trimmed" then says; ok is false when the entry cannot be
// encoded at all (counted as lost).
func (s *Sink) encode(e *entry) (line []byte, ok bool) {
	b, err := marshalEntry(e)
	for err == nil && len(b) >= maxLine && e.Record != nil {
		what := "intervals"
		switch {
		case len(e.Intervals) > 0:
			e.Intervals = nil
		case len(e.Record.Labels) > 1 || e.Record.Labels["pxeperf_trimmed"] == "":
			what = "intervals,labels"
			e.Record.Labels = nil
		default:
			err = fmt.Errorf("%d bytes without intervals and labels", len(b))
			continue
		}
		if e.Record.Labels == nil {
			e.Record.Labels = map[string]string{}
		}
		e.Record.Labels["pxeperf_trimmed"] = what
		s.refuse.Refuse(RefuseTrimmed, e.client(), "bytes", len(b), "left_out", what)
		b, err = marshalEntry(e)
	}
	if err == nil && len(b) >= maxLine {
		err = fmt.Errorf("%d bytes", len(b))
	}
	if err != nil {
		s.dropped.Add(1)
		s.refuse.Refuse(RefuseLost, "", "last_client", e.client(), "why", "cannot encode the entry", "err", err)
		return nil, false
	}
	return append(b, '\n'), true
}

// approxSize is what an entry counts against MaxPendingBytes when there is
// no journal line to measure.
func approxSize(e *entry) int {
	n := 512 + 64*len(e.Intervals)
	if e.Record != nil {
		n += len(e.Record.File) + len(e.Record.Err)
		for k, v := range e.Record.Labels {
			n += len(k) + len(v) + 8
		}
	}
	return n
}

// client names the entry's client for refusal logs.
func (e *entry) client() string {
	switch {
	case e.Record != nil && e.Record.ClientMAC != "":
		return e.Record.ClientMAC
	case e.Record != nil:
		return e.Record.ClientIP
	case e.Lease != nil:
		return e.Lease.MAC
	}
	return ""
}

func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

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

// notCompleted: a fetch that moved no file, failed or probe.
func notCompleted(r *Record) bool {
	k := KindOf(r)
	return k == KindError || k == KindProbe
}
