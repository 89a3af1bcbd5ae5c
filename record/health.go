package record

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Health is what the record sink tells /healthz and `pxeperf status`:
// whether the store takes records, how far behind it is, the journal
// against its cap, what was dropped and whether the disk is full.
// Problems names each trouble in a sentence; none: all is well.
type Health struct {
	Problems []string `json:"-"`
	// Store is "ok", "failing" (writes fail and are retried) or "off"
	// (no store: the journal keeps everything for the next start).
	Store      string  `json:"store"`
	FailingS   float64 `json:"failing_for_s,omitempty"`
	StoreError string  `json:"store_error,omitempty"`
	// LagS is the age of the oldest record waiting in memory.
	LagS         float64 `json:"lag_s"`
	Pending      int     `json:"pending"`
	PendingBytes int64   `json:"pending_bytes"`
	// Backlog counts records waiting in the journal only.
	Backlog         int64  `json:"journal_backlog"`
	JournalBytes    int64  `json:"journal_bytes"`
	JournalMaxBytes int64  `json:"journal_max_bytes"`
	JournalErrors   int64  `json:"journal_write_errors"`
	JournalError    string `json:"journal_error,omitempty"`
	Dropped         int64  `json:"dropped"`
	// DroppedBy counts dropped records by reason (RefuseJournalFull, ...).
	DroppedBy map[string]uint64 `json:"dropped_by,omitempty"`
	// DiskFull: the last journal or store write failed for want of space
	// (cleared by the next write that succeeds), or the data folder has
	// less than dataLow left.
	DiskFull bool `json:"disk_full"`
	// DataFreeBytes is the space left on the data folder's filesystem
	// (-1: not known).
	DataFreeBytes int64 `json:"data_free_bytes"`
}

// Health thresholds: a store this far behind, or a drop or journal error
// this recent, makes serve "degraded". A minute is far past a healthy
// store's commit delay (MaxLinger, 1 s) and long enough to be seen.
const (
	healthLag    = time.Minute
	healthRecent = 10 * time.Minute
)

// dataLow is the free space on the data folder below which Health says
// the disk is full before a write fails: a few seconds of a record flood
// (see DESIGN.md#the-journals-cap-and-what-a-failing-write-costs-issue-27-rows-11-and-12)
// or one SQLite checkpoint.
const dataLow = 16 << 20

// Health reports the sink's state now.
func (s *Sink) Health() Health {
	st := s.Stats()
	now := time.Now()
	h := Health{Store: "ok", Pending: st.Pending, PendingBytes: st.PendingBytes, Backlog: max(st.JournalOnly-st.Recovered, 0),
		JournalBytes: st.JournalBytes, JournalMaxBytes: st.JournalMaxBytes, JournalErrors: st.JournalErrors, Dropped: st.Dropped}
	for _, r := range []string{RefuseLost, RefuseJournalFull, RefuseJournalErrors} {
		if n := st.Refused[r]; n > 0 {
			if h.DroppedBy == nil {
				h.DroppedBy = map[string]uint64{}
			}
			h.DroppedBy[r] = n
		}
	}
	s.mu.Lock()
	if len(s.queue) > 0 {
		h.LagS = now.Sub(s.queue[0].queued).Seconds()
	}
	since, serr, full, dropAt, jerrAt, jerr := s.failingSince, s.storeErr, s.diskFullAt, s.droppedAt, s.journalErrAt, s.journalErr
	s.mu.Unlock()
	add := func(format string, a ...any) { h.Problems = append(h.Problems, fmt.Sprintf(format, a...)) }
	switch {
	case s.store == nil:
		h.Store = "off"
		add("no record store: records wait in the journal for the next start")
	case !since.IsZero():
		h.Store, h.FailingS, h.StoreError = "failing", now.Sub(since).Round(time.Second).Seconds(), serr
		add("record store failing for %s: %s", now.Sub(since).Round(time.Second), serr)
	}
	if lag := time.Duration(h.LagS * float64(time.Second)); lag > healthLag {
		add("record store %s behind (%d records waiting in memory, %d in the journal only)", lag.Round(time.Second), h.Pending, h.Backlog)
	}
	h.DataFreeBytes = -1
	if j := s.opt.Journal; j != nil {
		if free, ok := dataFree(filepath.Dir(j.Path())); ok {
			h.DataFreeBytes = free
		}
	}
	switch {
	case !full.IsZero():
		h.DiskFull = true
		add("disk full: a record write failed for want of space %s ago", now.Sub(full).Round(time.Second))
	case h.DataFreeBytes >= 0 && h.DataFreeBytes < dataLow:
		h.DiskFull = true
		add("disk full: the data folder %s has %d KiB left", filepath.Dir(s.opt.Journal.Path()), h.DataFreeBytes>>10)
	}
	if !jerrAt.IsZero() && now.Sub(jerrAt) < healthRecent {
		h.JournalError = jerr
		if !h.DiskFull {
			add("record journal write failed %s ago: %s", now.Sub(jerrAt).Round(time.Second), jerr)
		}
	}
	if h.JournalMaxBytes > 0 && h.JournalBytes > h.JournalMaxBytes/4*3 {
		add("record journal at %.1f of %.1f MiB (records.journal_max_mib): past three quarters failed fetches are dropped, at the cap every record",
			float64(h.JournalBytes)/(1<<20), float64(h.JournalMaxBytes)/(1<<20))
	}
	if !dropAt.IsZero() && now.Sub(dropAt) < healthRecent {
		add("%d records dropped, the last %s ago", h.Dropped, now.Sub(dropAt).Round(time.Second))
	}
	return h
}

// isDiskFull reports whether err says the disk (the data folder's, or
// the database server's) has no space left.
func isDiskFull(err error) bool {
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "disk is full") || strings.Contains(m, "no space left")
}
