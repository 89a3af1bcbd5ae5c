package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
)

func newHostsWaitCmd(f *hostsFlags) *cobra.Command {
	var booted bool
	var timeout, poll time.Duration
	cmd := &cobra.Command{
		Use:   "wait MAC --booted [--timeout 5m]",
		Short: "Wait until a board has fetched the kernel it was told to boot; print its record",
		Long: `Wait until the board has fetched the kernel it was told to boot (the
milestone kernel-fetched: its fetch ended ok), then print that fetch's
record as JSON (mbps, bytes, duration, proto, ...), for jq.

It counts the first kernel fetch after the board's latest next boot was
set (pxeperf hosts next-boot), so a board that boots before wait starts
is still seen; a board with no next boot set counts from the newest
milestone it had when wait started. It reads the records of kind event
(GET /api/fetches?kind=event&mac=MAC), every --poll. After --timeout it
gives up with exit status 1.`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&booted, "booted", false, "wait for the kernel fetch (the only thing wait waits for)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long (exit status 1)")
	cmd.Flags().DurationVar(&poll, "poll", time.Second, "how often to ask")
	cmd.RunE = hostsRun(f, func(ctx context.Context, c *hostsAPI, mac string) error {
		if !booted {
			return usageErrorf("say what to wait for: --booted (the kernel the board was told to boot was fetched)")
		}
		if timeout <= 0 || poll <= 0 {
			return usageErrorf("--timeout and --poll must be positive, e.g. --timeout 5m")
		}
		w := &bootWait{c: c, mac: mac, poll: poll}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return w.run(ctx, timeout)
	})
	return cmd
}

// bootWait follows one board's milestones until its kernel is fetched.
type bootWait struct {
	c    *hostsAPI
	mac  string
	poll time.Duration
	// from: only milestones after it count; what says which it is.
	from time.Time
	what string
	seen *record.Record // the kernel-fetched milestone, once seen
}

// run waits and prints the record.
func (w *bootWait) run(ctx context.Context, timeout time.Duration) error {
	if err := w.c.getJSON(ctx, hostPath(w.mac), &hostEntry{}); err != nil {
		return err // 404: no host entry to wait for
	}
	if err := w.baseline(ctx); err != nil {
		return err
	}
	for {
		rec, err := w.step(ctx)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if rec != nil {
			b, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			return w.c.printJSON(b)
		}
		select {
		case <-ctx.Done():
			return w.timedOut(timeout)
		case <-time.After(w.poll):
		}
	}
}

// timedOut says what was waited for and what came.
func (w *bootWait) timedOut(timeout time.Duration) error {
	if w.seen != nil {
		return fmt.Errorf("hosts wait %s --booted: the milestone kernel-fetched came (%s at %s) but its fetch's record did not reach the store within %s; see pxeperf status",
			w.mac, w.seen.Labels["file"], w.seen.Time.Format(time.RFC3339), timeout)
	}
	return fmt.Errorf("hosts wait %s --booted: no kernel fetch within %s (waited for the milestone kernel-fetched after %s); is the board powered on and does it boot from the network? see pxeperf hosts show %s",
		w.mac, timeout, w.what, w.mac)
}

// events lists the board's milestones since t (zero: all), newest first.
func (w *bootWait) events(ctx context.Context, since time.Time, limit int) ([]record.Record, error) {
	q := url.Values{"kind": {record.KindEvent}, "mac": {w.mac}, "limit": {strconv.Itoa(limit)}}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	var recs []record.Record
	err := w.c.getJSON(ctx, "/api/fetches?"+q.Encode(), &recs)
	return recs, err
}

// baseline finds where counting starts: the newest next-boot-set of the
// board, else its newest milestone, else the beginning.
func (w *bootWait) baseline(ctx context.Context) error {
	recs, err := w.events(ctx, time.Time{}, 1000)
	if err != nil {
		return err
	}
	w.what = "the start (the board had no milestone yet)"
	if len(recs) > 0 {
		w.from = recs[0].Time
		w.what = fmt.Sprintf("its newest milestone when wait started (%s at %s)", recs[0].File, recs[0].Time.Format(time.RFC3339Nano))
	}
	if i := slices.IndexFunc(recs, func(r record.Record) bool { return r.File == event.MilestoneNextBootSet }); i >= 0 {
		w.from = recs[i].Time
		w.what = "its next boot was set at " + recs[i].Time.Format(time.RFC3339Nano)
	}
	return nil
}

// step looks once: the kernel fetch's record when the milestone and the
// record are there, nil while not.
func (w *bootWait) step(ctx context.Context) (*record.Record, error) {
	if w.seen == nil {
		recs, err := w.events(ctx, w.from, 1000)
		if err != nil {
			return nil, err
		}
		// The oldest kernel fetch after the baseline: the boot waited for.
		for i := len(recs) - 1; i >= 0; i-- {
			if r := recs[i]; r.File == event.MilestoneKernelFetched && r.Time.After(w.from) {
				w.seen = &r
				break
			}
		}
		if w.seen == nil {
			return nil, nil
		}
	}
	return w.fetchRecord(ctx)
}

// fetchRecord reads the record of the kernel fetch the milestone names:
// by its id when the milestone has it, else the board's newest ok fetch
// of that file since the baseline that began by the milestone's time.
func (w *bootWait) fetchRecord(ctx context.Context) (*record.Record, error) {
	if id := w.seen.Labels["record"]; id != "" {
		var r record.Record
		err := w.c.getJSON(ctx, "/api/fetches/"+url.PathEscape(id), &r)
		if statusOf(err) == http.StatusNotFound {
			return nil, nil // not in the store yet
		}
		return &r, err
	}
	q := url.Values{"mac": {w.mac}, "file": {w.seen.Labels["file"]}, "limit": {"20"}}
	if !w.from.IsZero() {
		q.Set("since", w.from.UTC().Format(time.RFC3339Nano))
	}
	var recs []record.Record
	if err := w.c.getJSON(ctx, "/api/fetches?"+q.Encode(), &recs); err != nil {
		return nil, err
	}
	// Newest first: the first ok fetch that began by the milestone's time
	// (a second of slack for the clock's rounding) is the one it speaks of,
	// not a later boot's.
	for i := range recs {
		if recs[i].Outcome == event.OutcomeOK && !recs[i].Time.After(w.seen.Time.Add(time.Second)) {
			return &recs[i], nil
		}
	}
	return nil, nil
}
