package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

func TestGoodputFactor(t *testing.T) {
	if got, want := GoodputFactor(1500), 1448.0/1514; got != want {
		t.Errorf("GoodputFactor(1500) = %v, want %v", got, want)
	}
	if got, want := GoodputFactor(9000), 8948.0/9014; got != want {
		t.Errorf("GoodputFactor(9000) = %v, want %v", got, want)
	}
	if got := GoodputFactor(40); got != 0 {
		t.Errorf("GoodputFactor(40) = %v, want 0", got)
	}
}

func TestModelMbps(t *testing.T) {
	tests := map[string]struct {
		window uint32
		rtt    time.Duration
		rate   int64
		mtu    int
		want   float64
	}{
		"window-limited": {window: 4000, rtt: 100 * time.Microsecond, rate: 1e9, mtu: 1500, want: 320},
		"line rate":      {window: 65535, rtt: 100 * time.Microsecond, rate: 1e9, mtu: 1500, want: 1000 * 1448.0 / 1514},
		"no rate":        {window: 1000, rtt: time.Millisecond, mtu: 1500, want: 8},
		"no rtt":         {window: 1000, rate: 100e6, mtu: 1500, want: 100 * 1448.0 / 1514},
		"nothing":        {window: 1000, mtu: 1500, want: math.Inf(1)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := ModelMbps(tt.window, tt.rtt, tt.rate, tt.mtu)
			if math.Abs(got-tt.want) > 1e-9*max(1, math.Abs(tt.want)) && got != tt.want {
				t.Errorf("ModelMbps = %v, want %v", got, tt.want)
			}
		})
	}
}

// synth makes records that follow the model at rtt exactly, times (1+dev[i]).
func synth(rtt time.Duration, rate int64, windows []uint32, dev []float64) []record.Record {
	var recs []record.Record
	for i, w := range windows {
		m := ModelMbps(w, rtt, rate, 1500)
		if dev != nil {
			m *= 1 + dev[i]
		}
		recs = append(recs, record.Record{ID: int64(i + 1), Outcome: "ok", Bytes: 1 << 20, Mbps: m, WndMax: w,
			RateLimit: rate, MTU: 1500, MinRTT: rtt / 2})
	}
	return recs
}

func TestFitModel(t *testing.T) {
	windows := []uint32{2048, 4096, 8192, 16384, 32768, 65535}
	t.Run("recovers the RTT", func(t *testing.T) {
		// At 200 µs, 1gbit: windows up to ~24 KB are window-limited.
		f := FitModel(synth(200*time.Microsecond, 1e9, windows, nil))
		if !f.Identified {
			t.Fatal("not identified although windows limit the flow")
		}
		if d := math.Abs(float64(f.RTT-200*time.Microsecond)) / float64(200*time.Microsecond); d > 0.005 {
			t.Errorf("fitted RTT %v, want 200µs within 0.5%%", f.RTT)
		}
		if math.Abs(f.Worst.Dev) > 0.005 {
			t.Errorf("worst deviation %v on exact data", f.Worst.Dev)
		}
		if f.MeasuredRTT != 100*time.Microsecond {
			t.Errorf("measured RTT %v, want the median MinRTT 100µs", f.MeasuredRTT)
		}
		// At half the RTT every window-limited point is off by half.
		if f.WorstMeasured < 0.49 {
			t.Errorf("worst deviation at the measured RTT %v, want about 0.5", f.WorstMeasured)
		}
	})
	t.Run("names the worst point", func(t *testing.T) {
		dev := []float64{0, 0.01, -0.2, 0, 0, 0.02}
		f := FitModel(synth(200*time.Microsecond, 1e9, windows, dev))
		if f.Worst.Window != 8192 || f.Worst.Dev > -0.1 {
			t.Errorf("worst %+v, want window 8192 at about -20%%", f.Worst)
		}
	})
	t.Run("line rate only bounds the RTT", func(t *testing.T) {
		// At 10 µs even 2048 bytes fill 1gbit: the RTT is not identifiable.
		f := FitModel(synth(10*time.Microsecond, 1e9, windows, nil))
		if f.Identified {
			t.Error("identified although every point is at line rate")
		}
		bound := time.Duration(2048 * 8 / (1e9 * GoodputFactor(1500)) * 1e9)
		if f.RTT > bound || f.RTT < bound*9/10 {
			t.Errorf("RTT bound %v, want just under %v", f.RTT, bound)
		}
		if math.Abs(f.Worst.Dev) > 1e-6 {
			t.Errorf("worst deviation %v on exact line-rate data", f.Worst.Dev)
		}
		if lines := FitLines(f); !strings.Contains(strings.Join(lines, " "), "only bound the RTT") {
			t.Errorf("FitLines does not say the RTT is only bounded: %q", lines)
		}
	})
	t.Run("skips what the model does not cover", func(t *testing.T) {
		recs := synth(200*time.Microsecond, 1e9, windows, nil)
		recs = append(recs,
			record.Record{ID: 90, Outcome: "ok", Mbps: 20000, WndMax: 65535, MTU: 1500},                        // unlimited: CPU-bound
			record.Record{ID: 91, Outcome: "error", Mbps: 1, WndMax: 65535, MTU: 1500, RateLimit: 1e9},         // failed
			record.Record{ID: 92, Outcome: "ok", Mbps: 1, MTU: 1500, RateLimit: 1e9},                           // no window
			record.Record{ID: 93, Outcome: "ok", Mbps: math.Inf(1), WndMax: 1, MTU: 1500, RateLimit: 1e9},      // no duration
			record.Record{ID: 94, Outcome: "ok", Mbps: 500, WndMax: 739, MSS: 1448, MTU: 1500, RateLimit: 1e9}) // window < MSS
		f := FitModel(recs)
		if len(f.Points) != len(windows) || f.SubMSS != 1 {
			t.Errorf("fit over %d points (%d below one MSS), want %d (1)", len(f.Points), f.SubMSS, len(windows))
		}
	})
	t.Run("empty", func(t *testing.T) {
		f := FitModel(nil)
		if len(f.Points) != 0 || f.RTT != 0 {
			t.Errorf("FitModel(nil) = %+v", f)
		}
		if lines := FitLines(f); len(lines) != 1 {
			t.Errorf("FitLines(empty) = %q", lines)
		}
	})
}

// TestByPoint: results are grouped by point, repeats together however
// they interleave, in the order the points first ran, and each group
// starts from its point's first result.
func TestByPoint(t *testing.T) {
	pt := func(w, rep int) Point { return Point{Proto: "http", Window: w, MTU: 1500, Rep: rep} }
	results := []Result{{Point: pt(8192, 1)}, {Point: pt(4096, 1)}, {Point: pt(8192, 2)}, {Point: pt(65536, 1)}, {Point: pt(4096, 2)}}
	type group struct {
		first int   // the window of the result start saw
		reps  []int // what add saw
	}
	got := byPoint(results, func(r Result) *group { return &group{first: r.Point.Window} },
		func(g *group, r Result) { g.reps = append(g.reps, r.Point.Window*10+r.Point.Rep) })
	want := []*group{{8192, []int{81921, 81922}}, {4096, []int{40961, 40962}}, {65536, []int{655361}}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(group{})); diff != "" {
		t.Errorf("byPoint (-want +got):\n%s", diff)
	}
	if got := byPoint(nil, func(Result) *group { return nil }, func(*group, Result) {}); len(got) != 0 {
		t.Errorf("byPoint(nil) = %v", got)
	}
}

func TestSummary(t *testing.T) {
	pt := func(w int, off bool, rep int) Point {
		return Point{Proto: "http", Window: w, Offload: off, MTU: 1500, Rate: 100e6, Size: 1 << 20, Rep: rep}
	}
	res := func(p Point, mbps float64, wnd uint32, outcome string, rx record.Offload) Result {
		return Result{Point: p, Rcvbuf: 2 * p.Window, Record: record.Record{Outcome: outcome, Mbps: mbps, WndMax: wnd,
			MinRTT: 20 * time.Microsecond, RxCsum: rx, RateLimit: int64(p.Rate), MTU: 1500}}
	}
	results := []Result{
		res(pt(4096, true, 1), 90, 2896, "ok", "on"),
		res(pt(4096, true, 2), 96, 2896, "ok", "on"),
		res(pt(4096, true, 3), 93, 2896, "ok", "on"),
		res(pt(65536, false, 1), 95, 108000, "ok", "off"),
		res(pt(65536, false, 2), 0, 0, "error", "off"),
	}
	tab := Summary(results, Fit{RTT: 20 * time.Microsecond})
	want := [][]string{
		// MTU, Rate (text; CSV's Mbit/s and name), RX csum, Window asked (text; CSV's bytes, auto),
		// SO_RCVBUF, Window seen, n, Mbit/s, min-max (text; CSV's min, max), MinRTT, Model, Failed.
		{"1500", "100mbit", "100", "100mbit", "on", "4K", "4096", "", "8192", "2896", "3", "93.0", "90.0-96.0", "90.0", "96.0", "20", "95.6", "0"},
		{"1500", "100mbit", "100", "100mbit", "off", "64K", "65536", "", "131072", "108000", "1", "95.0", "95.0-95.0", "95.0", "95.0", "20", "95.6", "1"},
	}
	if len(tab.Rows) != len(want) {
		t.Fatalf("rows %q", tab.Rows)
	}
	for i := range want {
		if strings.Join(tab.Rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d:\n got %q\nwant %q", i, tab.Rows[i], want[i])
		}
	}
	var b strings.Builder
	if err := report.Render(&b, tab, report.Text); err != nil || !strings.Contains(b.String(), "90.0-96.0") {
		t.Errorf("render: %v\n%s", err, b.String())
	}
}

func TestEstimate(t *testing.T) {
	pts := []Point{{Size: 1e6, Rate: 1e6}, {Size: 1e6, Rate: 1e6}, {Size: 2e6, Rate: 1e6}}
	if got := estimate(pts, 0, time.Second); got != 0 {
		t.Errorf("ETA before the first fetch %v, want 0", got)
	}
	// One of four cost units took 10 s: three more to go.
	if got := estimate(pts, 1, 10*time.Second); got != 30*time.Second {
		t.Errorf("ETA %v, want 30s", got)
	}
	if got := estimate(pts, 3, 40*time.Second); got != 0 {
		t.Errorf("ETA at the end %v, want 0", got)
	}
}

func TestRowFitLine(t *testing.T) {
	rows := []SummaryRow{
		{Window: "4K", RxOffload: "on", N: 3, Median: 90, Model: 95.6},  // -5.9%
		{Window: "8K", RxOffload: "off", N: 5, Median: 170, Model: 200}, // -15%
		{Window: "64K", RxOffload: "on", N: 3, Median: 108, Model: 100}, // +8%
		{Window: "auto", RxOffload: "on", N: 2, Median: 900, Model: 0},  // no model: not counted
		{Window: "16K", RxOffload: "on", N: 0, Median: 0, Model: 300},   // every repeat failed
	}
	got := RowFitLine(rows)
	want := "Row medians against the model: 2 of 3 within 10%; worst -15.0% (window 8K, RX csum off, 5 repeats)."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if l := RowFitLine(rows[3:4]); l != "" {
		t.Errorf("no modelled row: %q", l)
	}
}
