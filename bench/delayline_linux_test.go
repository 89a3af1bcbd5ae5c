package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/report"
)

// TestSweepDelayLineBehind: a sweep behind the delay line records what the
// line delivered at each fetch and says under its table where the line
// fell behind. Three points at 10 ms one way, the line pinned to one CPU;
// a real-time hog takes that CPU in 15 ms bursts from the third fetch on
// (the host too busy for the delay). The third fetch's record says the line
// fell behind (p99 past the asked delay + margin), as do the sweep's notes,
// naming that point, with what to do. One of the first two (other jobs on
// a busy host may hold the line up too) says it kept up, and the notes of
// a sweep of it alone say so and do not name it.
func TestSweepDelayLineBehind(t *testing.T) {
	nstest.RequireRoot(t)
	const delay, burst = 10 * time.Millisecond, 15 * time.Millisecond // as TestDelayLineReportsHog
	spec, err := ParseSpec(Flags{Window: "512K,1M,2M", Offload: "on", Delay: "10ms", Size: "8MiB", Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	cpu := nstest.LastCPU(t)
	var hog *nstest.Hog
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st := testStore(t)
	results, err := Run(ctx, Options{Spec: spec, Store: st, RunID: "line", Registry: netlab.NewRegistry(), TempDir: t.TempDir(),
		DelayCPUs: []int{cpu}, Progress: func(p Progress) {
			if p.Done == 2 {
				hog = nstest.CPUHog(t, cpu, burst, 10*time.Millisecond, 30*time.Second)
			}
		}})
	bursts := 0
	if hog != nil {
		bursts = hog.Stop()
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(results) != 3 || bursts == 0 {
		t.Fatalf("%d results, %d hog bursts: want 3 fetches, the third under the hog", len(results), bursts)
	}
	late := delay + netlab.LateMargin(delay)
	quiet := -1
	for i, r := range results {
		rec := r.Record
		t.Logf("fetch %d (%s): %.1f Mbit/s; line p50 %v p99 %v max %v, %d of %d late, behind %v", i+1, r.Point.Key(), rec.Mbps,
			rec.DelayP50, rec.DelayP99, rec.DelayMax, rec.DelayLate, rec.DelayFrames, rec.DelayBehind)
		if rec.Outcome != "ok" || rec.DelayAsked != delay || rec.DelayFrames == 0 || rec.DelayP50 < delay {
			t.Errorf("fetch %d: outcome %s (%s), asked %v, %d frames, p50 %v: want the line's report at %v", i+1,
				rec.Outcome, rec.Err, rec.DelayAsked, rec.DelayFrames, rec.DelayP50, delay)
		}
		stored, err := st.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.DelayBehind != rec.DelayBehind || stored.DelayFrames != rec.DelayFrames || stored.DelayP99 != rec.DelayP99.Truncate(time.Microsecond) {
			t.Errorf("fetch %d stored: behind %v, %d frames, p99 %v; ran: %v, %d, %v", i+1, stored.DelayBehind, stored.DelayFrames,
				stored.DelayP99, rec.DelayBehind, rec.DelayFrames, rec.DelayP99)
		}
		if i < 2 && quiet < 0 && !rec.DelayBehind && rec.DelayP99 <= late {
			quiet = i
		}
	}
	if quiet < 0 {
		t.Errorf("both fetches without the hog fell behind: want one on time (p99 <= %v)", late)
	}
	if busy := results[2].Record; !busy.DelayBehind || busy.DelayP99 <= late {
		t.Errorf("fetch 3 (hog): behind %v, p99 %v: want it behind, p99 > %v", busy.DelayBehind, busy.DelayP99, late)
	}

	notes := func(rs []Result) (string, [][]string) {
		tabs := Tables(rs, spec, "line", true)
		i := slices.IndexFunc(tabs, func(tb report.Table) bool { return tb.Name == "bench-summary" })
		if i < 0 {
			t.Fatalf("no bench-summary table among %d", len(tabs))
		}
		return strings.Join(tabs[i].Notes, "\n"), tabs[i].Rows
	}
	all, rows := notes(results)
	if !strings.Contains(all, "DELAY LINE FELL BEHIND at ") || !strings.Contains(all, results[2].Point.Key()) ||
		!strings.Contains(all, "too busy for a one-way delay of 10ms") {
		t.Errorf("sweep notes do not name the fetch the line fell behind in, with what to do:\n%s", all)
	}
	if len(rows) != 3 || rows[2][len(rows[2])-1] != "1" {
		t.Errorf("summary rows %q: want Line behind 1 in the third", rows)
	}
	if quiet >= 0 {
		if rows[quiet][len(rows[quiet])-1] != "0" {
			t.Errorf("summary row %d %q: want Line behind 0", quiet+1, rows[quiet])
		}
		one, _ := notes(results[quiet : quiet+1])
		if strings.Contains(one, "FELL BEHIND") || strings.Contains(one, results[quiet].Point.Key()) ||
			!strings.Contains(one, "Delay line: kept up at all 1 fetch") {
			t.Errorf("notes of fetch %d alone (no hog, line on time):\n%s", quiet+1, one)
		}
	}
}
