package bench

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// Source is the record Source of bench fetches.
const Source = "bench"

// Label keys the bench puts on its records (besides rx_offload).
const (
	LabelRun   = "bench_run" // one sweep's ID: report --label bench_run=ID
	LabelDelay = "delay"     // one-way delay added each way (--delay), when the point has one
	// LabelDelayVia says what added it: "netem" where the kernel has
	// sch_netem, else "line" (netlab's own delay line).
	LabelDelayVia = "delay_via"
)

// Options configure Run.
type Options struct {
	Spec  Spec
	Store *record.Store // required: every fetch becomes a record here
	// RunID labels every record (LabelRun); default: the start time.
	RunID    string
	Registry *netlab.Registry // optional: Ctrl-C tears the testbed down through it
	Logger   *slog.Logger
	// Progress, when set, is called after every fetch (and once before the
	// first with done 0).
	Progress func(Progress)
	// Verbose, when set, gets each fetch's iperf3-style interval lines.
	Verbose io.Writer
	// TempDir holds the generated image; default os.TempDir().
	TempDir string
	// CrossCheck (TCP/UDP streams): also run iperf3 at every point, on
	// the same testbed and settings; its figure and the deviation go on
	// the record (Iperf3Mbps, Iperf3DevPct, Iperf3LostPct).
	CrossCheck bool
	// MeasuredBy is stamped on every record (server.name, server.site).
	MeasuredBy Origin
	// DelayCPUs pins netlab's delay line to these CPUs (--delay-cpu; nil:
	// any): on a busy host, a core kept free of other work for it.
	DelayCPUs []int
	// Events, when set, also gets every event of the testbed's servers
	// (HTTP, TFTP), as they sent it: a log, or a check of the records
	// against them.
	Events event.Sink
}

// Progress is where a sweep stands.
type Progress struct {
	Done, Total int
	Elapsed     time.Duration
	// ETA is the estimated time left: the time per fetch so far, weighted
	// by the bytes at the tbf rate of each remaining point; 0 before the
	// first fetch.
	ETA  time.Duration
	Last *Result // nil before the first fetch
}

// Result is one fetch of a sweep.
type Result struct {
	Point  Point
	Record record.Record // as stored, with its ID; Outcome says whether it completed
	// Intervals are the record's interval samples as stored (for
	// --verbose, without reading them back).
	Intervals []record.Interval
	// Rcvbuf is SO_RCVBUF read back before connect (0 for auto: the
	// kernel's default, read back too, so never 0 on Linux).
	Rcvbuf int
}

// etaWeight is a point's relative cost for the ETA: a stream's duration,
// a fetch's bytes over its rate (unlimited counts as 10 Gbit/s).
func etaWeight(p Point) float64 {
	if p.Duration > 0 { // a stream runs for its duration
		return p.Duration.Seconds()
	}
	r := float64(p.Rate)
	if r == 0 {
		r = 10e9
	}
	return float64(p.Size) * 8 / r
}

// estimate returns the ETA after done of pts took elapsed.
func estimate(pts []Point, done int, elapsed time.Duration) time.Duration {
	var spent, left float64
	for i, p := range pts {
		if i < done {
			spent += etaWeight(p)
		} else {
			left += etaWeight(p)
		}
	}
	if done == 0 || spent == 0 {
		return 0
	}
	return time.Duration(float64(elapsed) * left / spent)
}

// SummaryRow is one point over its repeats; rows keep the sweep's order.
type SummaryRow struct {
	MTU int `json:"mtu"`
	// Rate is the tbf rate as --rate names it (1gbit, none); RateMbps the
	// same in Mbit/s (0: none).
	Rate     string  `json:"rate_name"`
	RateMbps float64 `json:"rate_mbps,omitempty"`
	// Delay is one way, each way (--delay) as named (100us); DelayUs the
	// same in microseconds.
	Delay     string  `json:"delay_name,omitempty"`
	DelayUs   float64 `json:"delay_us,omitempty"`
	RxOffload string  `json:"rx_offload"` // active, as read back
	// Window is the window asked as named (64K, auto); WindowBytes the
	// same in bytes, 0 with WindowAuto (not set: autotuned).
	Window      string  `json:"window_name"`
	WindowBytes int     `json:"window_requested"`
	WindowAuto  bool    `json:"window_auto,omitempty"`
	Rcvbuf      int     `json:"rcvbuf"`          // SO_RCVBUF read back
	Observed    uint32  `json:"window_observed"` // median WndMax the server saw
	N           int     `json:"n"`
	Median      float64 `json:"median_mbps"`
	Min         float64 `json:"min_mbps"`
	Max         float64 `json:"max_mbps"`
	MinRTT      float64 `json:"min_rtt_us"` // median over the repeats
	Model       float64 `json:"model_mbps"` // min(observed/RTT, rate x goodput) at the fitted RTT
	Failed      int     `json:"failed"`
	// Behind netlab's delay line: the largest p99 of the delay it added
	// per frame over the repeats, and how many repeats it fell behind in
	// (their RTT was the host's: DelayLineNotes).
	LineP99    float64 `json:"delay_p99_us,omitempty"`
	LineBehind int     `json:"delay_behind,omitempty"`
}

// byPoint gathers results into one G per point (Point.Key), in the order
// the points first ran: start makes a point's G from its first result, add
// puts each result, the first too, into it. The sweep summaries group so.
func byPoint[G any](results []Result, start func(Result) *G, add func(*G, Result)) []*G {
	at := map[string]int{}
	var out []*G
	for _, r := range results {
		k := r.Point.Key()
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, start(r))
		}
		add(out[i], r)
	}
	return out
}

// rateColumns are a bench table's Rate: text names it (1gbit, none), CSV
// gives Mbit/s (empty: no tbf) and the name beside it.
var rateColumns = []report.Column{{Name: "Rate", Key: "rate_name", TextOnly: true}, {Name: "Rate Mbit/s", Key: "rate_mbps", CSVOnly: true},
	{Name: "Rate name", Key: "rate_name", Left: true, CSVOnly: true}}

func rateCells(name string, mbps float64) []string {
	n := ""
	if mbps > 0 {
		n = strconv.FormatFloat(mbps, 'f', -1, 64)
	}
	return []string{name, n, name}
}

// spreadColumns are the min-max over repeats: one "a-b" cell in text,
// two numbers in CSV.
var spreadColumns = []report.Column{{Name: "min-max", Key: "spread_mbps", TextOnly: true},
	{Name: "min", Key: "min_mbps", CSVOnly: true}, {Name: "max", Key: "max_mbps", CSVOnly: true}}

func spreadCells(lo, hi float64) []string {
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	return []string{f1(lo) + "-" + f1(hi), f1(lo), f1(hi)}
}

// Summary is the sweep's own table: every point with the median and
// spread (min-max) over its repeats, the requested, read-back and observed
// windows, and the model at the fitted RTT.
func Summary(results []Result, fit Fit) report.Table {
	var rows []SummaryRow
	for _, g := range byPoint(results, newSummaryGroup, (*summaryGroup).add) {
		rows = append(rows, g.summarize(fit))
	}
	t := summaryTable()
	delayed := slices.ContainsFunc(rows, func(r SummaryRow) bool { return r.Delay != "" })
	if delayed {
		t.Columns = slices.Insert(t.Columns, 4, report.Column{Name: "Delay", Key: "delay_name", TextOnly: true},
			report.Column{Name: "Delay us", Key: "delay_us", CSVOnly: true})
		t.Notes = append(t.Notes, "Delay: one way, added each way (netem where the kernel has it, else netlab's delay line: label delay_via), so the RTT is twice it plus the veth and forwarding time.")
	}
	line := slices.ContainsFunc(rows, func(r SummaryRow) bool { return r.LineP99 > 0 })
	if line {
		t.Columns = append(t.Columns, report.Column{Name: "Line p99 us", Key: "delay_p99_us"}, report.Column{Name: "Line behind", Key: "delay_behind"})
		t.Notes = append(t.Notes, "Line p99 us: the 99th percentile of the delay netlab's delay line added per frame (kernel receive to sent on; the largest over the repeats); Line behind: repeats in which it fell behind (more than 1% of the frames held past the asked delay + max(50 us, half of it)).")
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, r.cells(delayed, line))
	}
	t.Data = rows
	if rows == nil {
		t.Data = []SummaryRow{}
	}
	return t
}

// summaryGroup gathers one point's repeats for Summary.
type summaryGroup struct {
	row  SummaryRow
	mbps []float64
	obs  []float64
	rtt  []float64
}

// newSummaryGroup starts a point's group from its first result: the
// point's settings as named and in numbers.
func newSummaryGroup(r Result) *summaryGroup {
	g := &summaryGroup{row: SummaryRow{MTU: r.Point.MTU, Rate: FormatRate(r.Point.Rate), RateMbps: float64(r.Point.Rate) / 1e6,
		Window: FormatWindow(r.Point.Window), WindowBytes: r.Point.Window, WindowAuto: r.Point.Window == WindowAuto,
		RxOffload: string(r.Record.RxCsum)}}
	if r.Point.Delay > 0 {
		g.row.Delay, g.row.DelayUs = FormatDelay(r.Point.Delay), float64(r.Point.Delay)/float64(time.Microsecond)
	}
	return g
}

// add counts one repeat: a failure, or its figures for the medians.
func (g *summaryGroup) add(r Result) {
	g.row.Rcvbuf = r.Rcvbuf
	if r.Record.DelayFrames > 0 {
		g.row.LineP99 = max(g.row.LineP99, float64(r.Record.DelayP99.Microseconds()))
		if r.Record.DelayBehind {
			g.row.LineBehind++
		}
	}
	if r.Record.Outcome != "ok" {
		g.row.Failed++
		return
	}
	g.mbps = append(g.mbps, r.Record.Mbps)
	g.obs = append(g.obs, float64(r.Record.WndMax))
	if r.Record.MinRTT > 0 {
		g.rtt = append(g.rtt, float64(r.Record.MinRTT.Microseconds()))
	}
}

// summarize is the group's row: medians and spread over the completed
// repeats, and the model at the fitted RTT.
func (g *summaryGroup) summarize(fit Fit) SummaryRow {
	row := g.row
	row.N = len(g.mbps)
	if row.N > 0 {
		row.Median, row.Min, row.Max = measure.Median(g.mbps), slices.Min(g.mbps), slices.Max(g.mbps)
		row.Observed = uint32(measure.Median(g.obs))
	}
	if len(g.rtt) > 0 {
		row.MinRTT = measure.Median(g.rtt)
	}
	if rate := row.RateMbps * 1e6; row.Observed > 0 && fit.RTT > 0 && rate > 0 {
		row.Model = ModelMbps(row.Observed, fit.RTT, int64(rate), row.MTU)
	}
	return row
}

// summaryTable is Summary's table before its rows and optional columns.
func summaryTable() report.Table {
	return report.Table{
		Name:  "bench-summary",
		Title: "Sweep by point (median and min-max over repeats)",
		Columns: append(append([]report.Column{{Name: "MTU", Key: "mtu"}}, rateColumns...), report.Column{Name: "RX csum", Key: "rx_offload"},
			report.Column{Name: "Window asked", Key: "window_name", TextOnly: true}, report.Column{Name: "Window asked", Key: "window_requested", CSVOnly: true},
			report.Column{Name: "Window auto", Key: "window_auto", Left: true, CSVOnly: true}, report.Column{Name: "SO_RCVBUF", Key: "rcvbuf"},
			report.Column{Name: "Window seen", Key: "window_observed"}, report.Column{Name: "n", Key: "n"}, report.Column{Name: "Mbit/s", Key: "median_mbps"},
			spreadColumns[0], spreadColumns[1], spreadColumns[2], report.Column{Name: "MinRTT us", Key: "min_rtt_us"}, report.Column{Name: "Model", Key: "model_mbps"},
			report.Column{Name: "Failed", Key: "failed"}),
		Empty: "No fetches ran.",
		Notes: []string{
			"Window asked: the SO_RCVBUF the client set before connect (auto: not set, autotuned); SO_RCVBUF: read back (the kernel doubles it); Window seen: the largest window the server saw the client advertise (TCP_INFO).",
			"Model: min(window seen / RTT, rate x 1448/1514 at MTU 1500) at the fitted RTT.",
		},
	}
}

// cells are the row's table cells; delayed and line add the optional
// Delay and delay-line columns.
func (r SummaryRow) cells(delayed, line bool) []string {
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	win, auto := strconv.Itoa(r.WindowBytes), ""
	if r.WindowAuto {
		win, auto = "", "auto"
	}
	cells := append(append([]string{strconv.Itoa(r.MTU)}, rateCells(r.Rate, r.RateMbps)...), r.RxOffload, r.Window, win, auto,
		strconv.Itoa(r.Rcvbuf), "", strconv.Itoa(r.N), "", "", "", "", "", "", strconv.Itoa(r.Failed))
	if r.N > 0 {
		cells[9] = strconv.FormatUint(uint64(r.Observed), 10)
		cells[11] = f1(r.Median)
		copy(cells[12:15], spreadCells(r.Min, r.Max))
	}
	if r.MinRTT > 0 {
		cells[15] = strconv.FormatFloat(r.MinRTT, 'f', 0, 64)
	}
	if r.Model > 0 && !math.IsInf(r.Model, 0) {
		cells[16] = f1(r.Model)
	}
	if delayed {
		d, us := r.Delay, strconv.FormatFloat(r.DelayUs, 'f', -1, 64)
		if d == "" {
			d, us = "none", "0"
		}
		cells = slices.Insert(cells, 4, d, us)
	}
	if line {
		cells = append(cells, "", strconv.Itoa(r.LineBehind))
		if r.LineP99 > 0 {
			cells[len(cells)-2] = strconv.FormatFloat(r.LineP99, 'f', 0, 64)
		}
	}
	return cells
}

// FitLines say how the sweep fits min(window/RTT, line rate), for under the
// tables.
func FitLines(f Fit) []string {
	if len(f.Points) == 0 {
		return []string{"Model fit: no completed fetch under a rate limit (--rate) to fit; unlimited veth fetches are bound by CPU, not by min(window/RTT, rate)."}
	}
	w := f.Worst
	lines := []string{fmt.Sprintf("Model fit over %d rate-limited fetches: min(window/RTT, rate x goodput factor); measured RTT (median TCP_INFO min_rtt) %v.",
		len(f.Points), f.MeasuredRTT.Round(time.Microsecond))}
	if f.Identified {
		lines = append(lines, fmt.Sprintf("Fitted RTT %v; worst deviation %+.1f%% (fetch %d: window %d, %s, %.1f Mbit/s measured vs %.1f model).",
			f.RTT.Round(100*time.Nanosecond), w.Dev*100, w.ID, w.Window, FormatRate(uint64(w.RateBps)), w.Measured, w.Model))
	} else {
		lines = append(lines, fmt.Sprintf("Every fetch ran at line rate, so the window never limited it: the data only bound the RTT (<= %v). Worst deviation from the line rate %+.1f%% (fetch %d: window %d, %s, %.1f Mbit/s vs %.1f).",
			f.RTT.Round(100*time.Nanosecond), w.Dev*100, w.ID, w.Window, FormatRate(uint64(w.RateBps)), w.Measured, w.Model))
	}
	if f.SubMSS > 0 {
		lines = append(lines, fmt.Sprintf("%d fetch(es) with a window below one MSS left out of the fit.", f.SubMSS))
	}
	if f.MeasuredRTT > 0 {
		lines = append(lines, fmt.Sprintf("With the measured RTT instead, the worst deviation is %.1f%%.", f.WorstMeasured*100))
	}
	return lines
}
