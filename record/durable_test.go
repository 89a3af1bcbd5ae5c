package record

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// A torn last line (a write cut short: power loss, disk full) must not
// swallow the next record appended after it.
func TestJournalTornTailKeepsNextRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, JournalName), []byte(`{"uid":"torn","record":{"file":"x"`), 0o644); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, dir)
	journalOnly(t, j, func(s *Sink) { s.Fetch(testFetch(1)) })
	j.Close() // "kill -9": the record exists only in the journal

	j2 := openJournal(t, dir)
	store := openTest(t, dir)
	sink2 := NewSink(store, quiet, SinkOptions{Journal: j2})
	closeSink(t, sink2)
	if n := countRecords(t, store); n != 1 {
		t.Fatalf("%d records after restart, want 1 (the record after the torn line)", n)
	}
}

// A journal line longer than the reader's bound (16 MiB) must neither stop
// the import of the lines after it nor keep the journal from emptying; it
// is kept aside in a file the log names.
func TestJournalOverlongLineSkipped(t *testing.T) {
	dir := t.TempDir()
	j := openJournal(t, dir)
	journalOnly(t, j, func(s *Sink) { s.Fetch(testFetch(1)) })
	huge := append(bytes.Repeat([]byte("x"), maxLine+1024), '\n')
	if err := j.append(huge); err != nil {
		t.Fatal(err)
	}
	journalOnly(t, j, func(s *Sink) { s.Fetch(testFetch(2)) })
	j.Close()

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	j2 := openJournal(t, dir)
	store := openTest(t, dir)
	sink := NewSink(store, log, SinkOptions{Journal: j2, Retry: 5 * time.Millisecond})
	if !testenv.WaitFor(30*time.Second, func() bool { return countRecords(t, store) == 2 }) {
		t.Fatalf("%d records imported, want 2 (before and after the over-long line)", countRecords(t, store))
	}
	sink.Fetch(testFetch(3))
	closeSink(t, sink)
	if fi, err := os.Stat(j2.Path()); err != nil || fi.Size() != 0 {
		t.Errorf("journal not emptied after import: %v, %v bytes", err, fi.Size())
	}
	aside, err := os.ReadFile(j2.Path() + DamagedSuffix)
	if err != nil || !bytes.Contains(aside, huge[:1024]) || len(aside) < maxLine {
		t.Errorf("over-long line not kept aside: %v, %d bytes", err, len(aside))
	}
	if !strings.Contains(logs.String(), JournalName+DamagedSuffix) {
		t.Errorf("log does not name the damaged file:\n%.2000s", logs.String())
	}
}

// The memory queue is bounded by bytes as well as by count: records with
// huge labels go to the journal only (imported later), not to memory.
func TestSinkQueueBoundedByBytes(t *testing.T) {
	dir := t.TempDir()
	store := openTest(t, dir, WithBusyTimeout(20*time.Millisecond))
	j := openJournal(t, dir)
	release := lockStore(t, dir)
	sink := NewSink(store, quiet, SinkOptions{Journal: j, MaxPending: 100000, MaxPendingBytes: 1 << 20, Retry: 5 * time.Millisecond})
	big := strings.Repeat("v", 64<<10)
	for i := range 100 { // 100 × 64 KiB of labels = 6.4 MiB
		f := testFetch(i)
		f.Labels = map[string]string{"big": big}
		sink.Fetch(f)
	}
	st := sink.Stats()
	if st.PendingBytes > 1<<20 {
		t.Errorf("%d bytes pending in memory, bound is %d", st.PendingBytes, 1<<20)
	}
	if st.JournalOnly == 0 || st.Refused["record: queue full"] == 0 {
		t.Errorf("stats %+v: want journal-only entries and a counted refusal", st)
	}
	release()
	if !testenv.WaitFor(30*time.Second, func() bool { return countRecords(t, store) == 100 }) {
		t.Errorf("%d records stored after the store came back, want 100", countRecords(t, store))
	}
	closeSink(t, sink)
}

// A journal larger than the memory bounds is imported a bounded slice at a
// time, every entry once.
func TestSinkImportsLargeJournalInSlices(t *testing.T) {
	dir := t.TempDir()
	j := openJournal(t, dir)
	journalOnly(t, j, func(s *Sink) {
		for i := range 50 {
			s.Fetch(testFetch(i))
		}
		s.Lease(&event.Lease{Time: time.Unix(9, 0)})
	})
	// A damaged line near the end, past what fits in memory at start, is
	// kept aside too.
	if err := j.append([]byte("{damaged\n")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j2 := openJournal(t, dir)
	store := openTest(t, dir)
	sink := NewSink(store, quiet, SinkOptions{Journal: j2, MaxPending: 7, BatchSize: 3})
	if b, err := os.ReadFile(j2.Path() + DamagedSuffix); err != nil || !bytes.Contains(b, []byte("{damaged")) {
		t.Errorf("damaged line past the memory bound not kept aside at start: %v", err)
	}
	if st := sink.Stats(); st.Pending > 7 {
		t.Errorf("%d entries in memory at start, bound 7", st.Pending)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return countRecords(t, store) == 50 }) {
		t.Fatalf("%d records imported, want 50", countRecords(t, store))
	}
	closeSink(t, sink)
	if fi, err := os.Stat(j2.Path()); err != nil || fi.Size() != 0 {
		t.Errorf("journal not emptied after import")
	}
}
