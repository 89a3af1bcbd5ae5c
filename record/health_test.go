package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// TestJournalCap: with the store locked, the journal stops at
// JournalMaxBytes: past three quarters failed fetches are dropped and
// completed ones still kept; at the cap every record is dropped. Each is
// counted by reason and said by Health, and once the store is back every
// record journaled is stored.
func TestJournalCap(t *testing.T) {
	dir := t.TempDir()
	store := openTest(t, dir, WithBusyTimeout(10*time.Millisecond))
	j := openJournal(t, dir)
	release := lockStore(t, dir)
	const limit = 64 << 10
	sink := NewSink(store, quiet, SinkOptions{Journal: j, MaxPending: 16, JournalMaxBytes: limit, Retry: 5 * time.Millisecond})
	failed := func(i int) *event.Fetch {
		f := testFetch(i)
		f.Outcome, f.Bytes = event.OutcomeError, 0
		return f
	}
	// Fill to just past three quarters with completed fetches.
	n := 0
	for ; j.n <= limit/4*3; n++ {
		sink.Fetch(testFetch(n))
	}
	kept := n
	// Failed fetches are no longer journaled; completed ones still are.
	for i := range 7 {
		sink.Fetch(failed(1000 + i))
	}
	// Nor probes: no failure in the tables, but no file moved either.
	for i := range 3 {
		f := testFetch(2000 + i)
		f.Outcome, f.Bytes, f.File = event.OutcomeNotFound, 0, "pxelinux.cfg/0A0002"
		sink.Fetch(f)
	}
	st := sink.Stats()
	if st.Refused[RefuseJournalErrors] != 10 || st.Dropped != 10 {
		t.Fatalf("failed fetches and probes past 3/4: %+v, want 10 dropped as %q", st, RefuseJournalErrors)
	}
	for ; j.n+1024 < limit; n++ {
		sink.Fetch(testFetch(n))
	}
	kept = n
	// At the cap, nothing more.
	for i := range 50 {
		sink.Fetch(testFetch(5000 + i))
	}
	st = sink.Stats()
	full := st.Refused[RefuseJournalFull]
	if full == 0 || st.JournalBytes > limit || st.Dropped != int64(10+full) {
		t.Fatalf("at the cap: %+v, want the journal within %d bytes and the rest dropped", st, limit)
	}
	if fi, _ := os.Stat(j.Path()); fi.Size() > limit {
		t.Fatalf("journal file %d bytes, cap %d", fi.Size(), limit)
	}
	testenv.WaitFor(30*time.Second, func() bool { return sink.Health().Store == "failing" })
	h := sink.Health()
	all := strings.Join(h.Problems, "; ")
	if h.Store != "failing" || !strings.Contains(all, "record journal at") || !strings.Contains(all, "records dropped") ||
		h.DroppedBy[RefuseJournalFull] != full || h.DroppedBy[RefuseJournalErrors] != 10 {
		t.Errorf("Health at the cap: %+v", h)
	}
	// The store is back: everything journaled reaches it.
	release()
	stored := kept + int(50-full)
	if !testenv.WaitFor(30*time.Second, func() bool { return countRecords(t, store) == stored }) {
		t.Fatalf("store has %d records, want %d; %+v", countRecords(t, store), stored, sink.Stats())
	}
	closeSink(t, sink)
	if h := sink.Health(); h.Store != "ok" {
		t.Errorf("Health once stored: %+v", h)
	}
}

// TestJournalWriteFailureLogsOnce: a journal whose every write fails (a
// full disk) is logged once, not per record, and Health says disk full.
func TestJournalWriteFailureLogsOnce(t *testing.T) {
	dir := t.TempDir()
	j := openJournal(t, dir)
	j.f.Close()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("needs /dev/full")
	}
	j.f = full
	var log bytes.Buffer
	sink := NewSink(nil, slog.New(slog.NewTextHandler(&log, nil)), SinkOptions{Journal: j})
	for i := range 500 {
		sink.Fetch(testFetch(i))
	}
	if n := strings.Count(log.String(), "record journal write failed"); n != 1 {
		t.Errorf("%d log lines for 500 failed journal writes, want 1:\n%s", n, log.String())
	}
	h := sink.Health()
	if !h.DiskFull || h.JournalErrors != 500 || h.Dropped != 500 || !strings.Contains(strings.Join(h.Problems, "; "), "disk full") {
		t.Errorf("Health: %+v", h)
	}
	_ = sink.Close(context.Background())
}

func TestThrottle(t *testing.T) {
	var th throttle
	t0 := time.Unix(0, 0)
	var got []string
	for i := range 5 {
		if n, ok := th.due(t0.Add(time.Duration(i) * 20 * time.Second)); ok {
			got = append(got, fmt.Sprint(i, ":", n))
		}
	}
	if strings.Join(got, " ") != "0:0 3:2" {
		t.Errorf("logged at %v, want 0 (none missed) and 3 (2 missed)", got)
	}
}

func TestIsDiskFull(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("write: %w", syscall.ENOSPC):                      true,
		errors.New("database or disk is full (13)"):                  true,
		errors.New("could not extend file: No space left on device"): true,
		errors.New("database is locked"):                             false,
	} {
		if isDiskFull(err) != want {
			t.Errorf("isDiskFull(%v) = %v", err, !want)
		}
	}
}
