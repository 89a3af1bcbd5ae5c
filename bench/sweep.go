package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
)

// driver runs one protocol's points on one target, and is named target
// then protocol: testbedHTTP, testbedTFTP and testbedStreams on a testbed
// (http_linux.go, tftp_linux.go, stream_linux.go), remoteHTTP and
// remoteStreams against a remote pxeperf serve (remote.go). The sweep
// around it is the same for all (sweep).
type driver interface {
	// point sets the target up for p, runs it and returns its record, not
	// yet stored (Outcome says whether it completed), with its interval
	// samples and the SO_RCVBUF read back (0: none). An error stops the
	// sweep: the target broke, or ctx ended.
	point(ctx context.Context, p Point) (rec *record.Record, ivs []record.Interval, rcvbuf int, err error)
	// verbose prints a stored result for --verbose.
	verbose(w io.Writer, res Result)
}

// Origin is who measured a bench run: the config's server.name and
// server.site, stamped on every record as serve stamps served fetches.
type Origin struct {
	Server, Site string
}

// sweepOptions are what the sweep needs of Options or RemoteOptions.
type sweepOptions struct {
	store    *record.Store
	runID    string
	by       Origin
	log      *slog.Logger
	progress func(Progress)
	verbose  io.Writer
	what     string // points in messages: "fetches", "runs"
	one      string // one point: "fetch", "run"
}

// NewRunID is a run ID from the time now (UTC): a sweep's LabelRun
// unless the caller names it.
func NewRunID() string { return time.Now().UTC().Format("20060102T150405Z") }

// fill checks and defaults what Run and RunRemote share, the one place
// for both: a store is required, the logger defaults to a discarding one,
// the run ID to the start time (UTC), and proto names the points in
// messages (streams are runs, the rest fetches).
func (o *sweepOptions) fill(proto string) error {
	if o.store == nil {
		return errors.New("bench: no record store (Options.Store)")
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.runID == "" {
		o.runID = NewRunID()
	}
	o.what, o.one = "fetches", "fetch"
	if proto == ProtoStream {
		o.what, o.one = "runs", "run"
	}
	return nil
}

// sweep runs every point in order through d, stores each record as it
// completes (so an interrupted sweep keeps what it measured), stops at the
// first error or when ctx ends, and reports progress with one ETA and,
// with --verbose, each result.
func sweep(ctx context.Context, o sweepOptions, pts []Point, d driver) ([]Result, error) {
	var results []Result
	start := time.Now()
	if o.progress != nil {
		o.progress(Progress{Total: len(pts)})
	}
	for i, p := range pts {
		if err := ctx.Err(); err != nil {
			return results, fmt.Errorf("bench: stopped after %d of %d %s: %w", i, len(pts), o.what, context.Cause(ctx))
		}
		rec, ivs, rcvbuf, err := d.point(ctx, p)
		if err != nil && ctx.Err() != nil {
			// Stopped mid-point: the teardown that follows a cancel can
			// break the fetch first (ENETUNREACH once the veth is gone),
			// so the cancel, not that symptom, is the error.
			return results, fmt.Errorf("bench: stopped during %s (%d of %d %s done; %v): %w", p.Key(), i, len(pts), o.what, err, context.Cause(ctx))
		}
		if err != nil {
			return results, fmt.Errorf("bench: %s: %w", p.Key(), err)
		}
		rec.Server, rec.Site = o.by.Server, o.by.Site
		id, err := o.store.Add(context.WithoutCancel(ctx), rec, ivs)
		if err != nil {
			return results, fmt.Errorf("bench: %s: storing the record: %w", p.Key(), err)
		}
		rec.ID = id
		if rec.Outcome != event.OutcomeOK {
			o.log.Warn("bench: "+o.one+" failed", "point", p.Key(), "rep", p.Rep, "outcome", rec.Outcome, "err", rec.Err)
		}
		results = append(results, Result{Point: p, Record: *rec, Intervals: ivs, Rcvbuf: rcvbuf})
		if o.verbose != nil {
			d.verbose(o.verbose, results[len(results)-1])
		}
		if o.progress != nil {
			el := time.Since(start)
			o.progress(Progress{Done: i + 1, Total: len(pts), Elapsed: el, ETA: estimate(pts, i+1, el), Last: &results[len(results)-1]})
		}
	}
	return results, nil
}
