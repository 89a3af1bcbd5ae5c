package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// ownNamespaces lists the netlab namespaces this process has under
// /run/netns (other processes' testbeds are not ours to judge).
func ownNamespaces(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var own []string
	prefix := fmt.Sprintf("%s%d-", netlab.Prefix, os.Getpid())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			own = append(own, e.Name())
		}
	}
	return own
}

// testStore opens a record store in a temp folder, closed when the test ends.
func testStore(t *testing.T) *record.Store {
	t.Helper()
	st, err := record.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sweepRun is what a test sweep produced.
type sweepRun struct {
	results  []Result
	progress []Progress
	verbose  string
	store    *record.Store
	runID    string
}

// stored is the bench records of the sweep's run in the store; it fails t
// unless there are want of them.
func (r sweepRun) stored(t *testing.T, want int) []record.Record {
	t.Helper()
	recs, err := r.store.Query(t.Context(), record.Filter{Source: Source, Labels: map[string]string{LabelRun: r.runID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != want {
		t.Fatalf("%d bench records in the store, want %d", len(recs), want)
	}
	return recs
}

// runSweep runs the sweep f on a fresh testbed (two minutes at most) with
// opt's RunID and CrossCheck, capturing progress and --verbose output, and
// fails unless it succeeds and leaves no namespace behind.
func runSweep(t *testing.T, f Flags, opt Options) sweepRun {
	t.Helper()
	spec, err := ParseSpec(f)
	if err != nil {
		t.Fatal(err)
	}
	r := sweepRun{store: testStore(t), runID: opt.RunID}
	var verbose strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	opt.Spec, opt.Store, opt.Registry, opt.TempDir, opt.Verbose = spec, r.store, netlab.NewRegistry(), t.TempDir(), &verbose
	opt.Progress = func(p Progress) { r.progress = append(r.progress, p) }
	r.results, err = Run(ctx, opt)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if own := ownNamespaces(t); len(own) > 0 {
		t.Errorf("namespaces left after the sweep: %v", own)
	}
	r.verbose = verbose.String()
	return r
}

// runInterrupted runs the sweep f and ends its context `after` into the
// first run, as Ctrl-C would. It checks that Run returns an error, that no
// testbed stays registered and no namespace is left, and returns what
// completed and the error.
func runInterrupted(t *testing.T, f Flags, after time.Duration) ([]Result, error) {
	t.Helper()
	spec, err := ParseSpec(f)
	if err != nil {
		t.Fatal(err)
	}
	reg := netlab.NewRegistry()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = reg.CloseAll() })
	defer stop()
	progress := func(p Progress) {
		if p.Done == 0 {
			time.AfterFunc(after, cancel)
		}
	}
	results, err := Run(ctx, Options{Spec: spec, Store: testStore(t), Registry: reg, TempDir: t.TempDir(), Progress: progress})
	if err == nil {
		t.Fatalf("Run returned no error after the interrupt (%d results)", len(results))
	}
	if reg.Len() != 0 {
		t.Errorf("%d testbeds still registered", reg.Len())
	}
	if own := ownNamespaces(t); len(own) > 0 {
		t.Errorf("namespaces left after the interrupt: %v", own)
	}
	return results, err
}

// TestRunSweep runs a small real sweep: pxeperf's httpboot server in one
// namespace, the SO_RCVBUF client in the other, a 100mbit tbf between.
func TestRunSweep(t *testing.T) {
	nstest.RequireRoot(t)
	run := runSweep(t, Flags{Window: "4K,64K", Offload: "on,off", Rate: "100mbit", Size: "8MiB", Repeat: 1}, Options{RunID: "t1"})
	results, progress, verbose := run.results, run.progress, run.verbose
	if len(results) != 4 {
		t.Fatalf("%d results, want 4", len(results))
	}
	if len(progress) != 5 || progress[0].Done != 0 || progress[4].Done != 4 || progress[4].Total != 4 {
		t.Errorf("progress calls %+v, want done 0..4 of 4", progress)
	}
	if !strings.Contains(verbose, "receiver") {
		t.Errorf("no interval lines with Verbose:\n%s", verbose)
	}

	recs := run.stored(t, 4)
	seen := map[string]record.Record{}
	for _, r := range recs {
		if r.Outcome != "ok" || r.Bytes != 8<<20 || r.Direction != "rx" || r.Proto != "http" {
			t.Errorf("record %d: outcome %s (%s), %d bytes, %s %s", r.ID, r.Outcome, r.Err, r.Bytes, r.Direction, r.Proto)
		}
		if r.RateLimit != 100e6 || r.MTU != 1500 {
			t.Errorf("record %d: rate %d, MTU %d; want 100mbit, 1500", r.ID, r.RateLimit, r.MTU)
		}
		// Under a 100mbit tbf the payload cannot beat the line rate.
		if r.Mbps > 100 || r.Mbps <= 0 {
			t.Errorf("record %d: %.1f Mbit/s under a 100mbit tbf", r.ID, r.Mbps)
		}
		if r.RxCsum != record.Offload(r.Labels["rx_offload"]) || r.RxCsum == record.OffloadUnknown {
			t.Errorf("record %d: rx_csum %q, label rx_offload %q", r.ID, r.RxCsum, r.Labels["rx_offload"])
		}
		if r.Rcvbuf != 2*int(r.WndRequested) {
			t.Errorf("record %d: SO_RCVBUF read back %d for %d asked; the kernel doubles it", r.ID, r.Rcvbuf, r.WndRequested)
		}
		if r.WndMax == 0 || r.MinRTT <= 0 {
			t.Errorf("record %d: no TCP_INFO (window %d, min RTT %v)", r.ID, r.WndMax, r.MinRTT)
		}
		seen[fmt.Sprintf("%s/%d", r.RxCsum, r.WndRequested)] = r
	}
	for _, res := range results {
		want := record.Offload(onOff(res.Point.Offload))
		if res.Record.RxCsum != want {
			t.Errorf("%s: client rx checksum read back %q", res.Point.Key(), res.Record.RxCsum)
		}
	}
	for _, off := range []string{"on", "off"} {
		small, large := seen[off+"/4096"], seen[off+"/65536"]
		if small.ID == 0 || large.ID == 0 {
			t.Fatalf("rx %s: missing a window: %v", off, seen)
		}
		if large.WndMax <= small.WndMax {
			t.Errorf("rx %s: window seen %d at 64K asked, not above %d at 4K", off, large.WndMax, small.WndMax)
		}
	}

	var b strings.Builder
	if err := report.Render(&b, report.WindowOffload(recs), report.Text); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "RX csum off") || !strings.Contains(out, "RX csum on") || strings.Contains(out, "No completed") {
		t.Errorf("window-offload table:\n%s", out)
	}
	b.Reset()
	if err := report.Render(&b, Summary(results, FitModel(recs)), report.Text); err != nil || !strings.Contains(b.String(), "100mbit") {
		t.Errorf("summary table (%v):\n%s", err, b.String())
	}
}

// TestRunCancel: ending the context mid-fetch (Ctrl-C) stops the sweep and
// leaves no namespace behind.
func TestRunCancel(t *testing.T) {
	nstest.RequireRoot(t)
	// The first fetch takes about 7 s at 10mbit: interrupt it.
	results, _ := runInterrupted(t, Flags{Window: "auto", Offload: "on", Rate: "10mbit", Size: "8MiB", Repeat: 3}, 500*time.Millisecond)
	if len(results) > 1 {
		t.Errorf("%d fetches ran after the interrupt", len(results))
	}
}
