package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/record"
)

func TestParseCPUs(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "1": {1}, " 2, 3,2 ": {2, 3}} {
		got, err := ParseCPUs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "-1", "1-2"} {
		if _, err := ParseCPUs(bad); err == nil {
			t.Errorf("ParseCPUs(%q): no error", bad)
		}
	}
}

// TestDelayLineNotes: the notes under a sweep's table name the points
// whose line fell behind, the worst p99 and the delays that were too
// short for the host; none without line records; "kept up" otherwise.
func TestDelayLineNotes(t *testing.T) {
	res := func(w int, p99 time.Duration, late int64, behind bool) Result {
		return Result{Point: Point{Proto: "http", Window: w, MTU: 1500, Rate: 1e9, Delay: 120 * time.Microsecond},
			Record: record.Record{Outcome: "ok", DelayAsked: 120 * time.Microsecond, DelayP50: 125 * time.Microsecond,
				DelayP99: p99, DelayMax: 2 * p99, DelayFrames: 1000, DelayLate: late, DelayBehind: behind}}
	}
	if n := DelayLineNotes([]Result{{Record: record.Record{Outcome: "ok"}}}); n != nil {
		t.Errorf("notes without line records: %q", n)
	}
	kept := strings.Join(DelayLineNotes([]Result{res(8192, 150*time.Microsecond, 2, false), res(16384, 170*time.Microsecond, 5, false)}), "\n")
	if !strings.Contains(kept, "kept up at all 2 fetches") || !strings.Contains(kept, "at most 50 us beyond") || strings.Contains(kept, "BEHIND") {
		t.Errorf("kept up:\n%s", kept)
	}
	rs := []Result{res(8192, 150*time.Microsecond, 2, false), res(16384, 900*time.Microsecond, 40, true), res(65536, 400*time.Microsecond, 20, true)}
	behind := strings.Join(DelayLineNotes(rs), "\n")
	for _, want := range []string{"FELL BEHIND at 2 of 3 fetches (2 of 3 points)", "worst p99 900 us against 120 us asked", "40 of 1000 frames late",
		rs[1].Point.Key(), rs[2].Point.Key(), "too busy for a one-way delay of 120us", "--delay-cpu", "larger --delay (e.g. 1ms"} {
		if !strings.Contains(behind, want) {
			t.Errorf("behind: no %q in\n%s", want, behind)
		}
	}
	if strings.Contains(behind, rs[0].Point.Key()) {
		t.Errorf("behind names the point that kept up:\n%s", behind)
	}
}

// TestRowFitLineBehind: rows whose delay line fell behind are counted
// apart, with how many of the rest fit.
func TestRowFitLineBehind(t *testing.T) {
	rows := []SummaryRow{
		{Window: "8K", RxOffload: "on", N: 1, Median: 190, Model: 180},                // +5.6%
		{Window: "9K", RxOffload: "on", N: 1, Median: 137, Model: 180, LineBehind: 1}, // -24%
		{Window: "16K", RxOffload: "on", N: 1, Median: 340, Model: 390},               // -12.8%
	}
	want := "Row medians against the model: 1 of 3 within 10%; worst -23.9% (window 9K, RX csum on, 1 repeats)." +
		" The delay line fell behind in 1 of these rows (Line behind); of the 2 where it kept up, 1 are within 10%."
	if got := RowFitLine(rows); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
