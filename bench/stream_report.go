package bench

import (
	"slices"
	"strconv"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/report"
)

// StreamRow is one stream point over its repeats.
type StreamRow struct {
	Proto     string  `json:"proto"`
	Direction string  `json:"direction"`
	MTU       int     `json:"mtu"`
	Rate      string  `json:"rate_name"`           // tbf, as --rate names it (1gbit, none)
	RateMbps  float64 `json:"rate_mbps,omitempty"` // the same in Mbit/s
	Setting   string  `json:"setting"`             // window=... (TCP) or udp_rate=... (UDP)
	// Window is the TCP window set in bytes (0 and WindowAuto: autotuned);
	// UDPRateMbps the UDP rate asked (0 with UDPLine: at line rate).
	Window      int     `json:"window,omitempty"`
	WindowAuto  bool    `json:"window_auto,omitempty"`
	UDPRateMbps float64 `json:"udp_rate_mbps,omitempty"`
	UDPLine     bool    `json:"udp_line_rate,omitempty"`
	N           int     `json:"n"`
	Median      float64 `json:"median_mbps"`
	Min         float64 `json:"min_mbps"`
	Max         float64 `json:"max_mbps"`
	Retr        float64 `json:"retransmits_median"`
	LostPct     float64 `json:"udp_lost_pct_median"`
	JitterMs    float64 `json:"jitter_ms_median"`
	Failed      int     `json:"failed"`
}

// StreamSummary is the stream sweep by point: receiver Mbit/s median and
// min-max over repeats, median retransmits (TCP) or loss and jitter (UDP).
func StreamSummary(results []Result) report.Table {
	t := streamTable()
	rows := []StreamRow{}
	for _, g := range byPoint(results, newStreamGroup, (*streamGroup).add) {
		row, cells := g.summarize()
		rows = append(rows, row)
		t.Rows = append(t.Rows, cells)
	}
	t.Data = rows
	return t
}

// streamGroup gathers one stream point's repeats for StreamSummary.
type streamGroup struct {
	row                 StreamRow
	mbps, retr, lost, j []float64
}

// newStreamGroup starts a point's group from its first result: the
// protocol, direction and setting (a TCP window or a UDP rate).
func newStreamGroup(r Result) *streamGroup {
	p := r.Point
	row := StreamRow{Proto: p.Proto, Direction: p.Direction, MTU: p.MTU, Rate: FormatRate(p.Rate), RateMbps: float64(p.Rate) / 1e6,
		Setting: "window=" + FormatWindow(p.Window), Window: p.Window, WindowAuto: p.Window == WindowAuto}
	if p.Proto == ProtoUDP {
		row.Setting, row.Window, row.WindowAuto = "udp_rate="+FormatUDPRate(p.UDPRate), 0, false
		if row.UDPLine = p.UDPRate == UDPRateLine; !row.UDPLine {
			row.UDPRateMbps = float64(p.UDPRate) / 1e6
		}
	}
	return &streamGroup{row: row}
}

// add counts one repeat: a failure, or its figures for the medians.
func (g *streamGroup) add(r Result) {
	if r.Record.Outcome != event.OutcomeOK {
		g.row.Failed++
		return
	}
	g.mbps = append(g.mbps, r.Record.Mbps)
	g.retr = append(g.retr, float64(r.Record.Retransmits))
	if r.Record.Proto == ProtoUDP {
		g.lost, g.j = append(g.lost, r.Record.UDPLostPct), append(g.j, r.Record.JitterMs)
	}
}

// streamTable is StreamSummary's table before its rows.
func streamTable() report.Table {
	return report.Table{
		Name:  "bench-streams",
		Title: "Streams by point (receiver Mbit/s, median and min-max over repeats)",
		Columns: append(append(append([]report.Column{{Name: "Proto", Key: "proto", Left: true}, {Name: "Dir", Key: "direction", Left: true},
			{Name: "MTU", Key: "mtu"}}, rateColumns...), report.Column{Name: "Setting", Key: "setting", Left: true},
			report.Column{Name: "Window", Key: "window", CSVOnly: true}, report.Column{Name: "Window auto", Key: "window_auto", Left: true, CSVOnly: true},
			report.Column{Name: "UDP rate Mbit/s", Key: "udp_rate_mbps", CSVOnly: true}, report.Column{Name: "UDP line rate", Key: "udp_line_rate", Left: true, CSVOnly: true},
			report.Column{Name: "n", Key: "n"}, report.Column{Name: "Mbit/s", Key: "median_mbps"}), append(spreadColumns,
			report.Column{Name: "Retr", Key: "retransmits_median"}, report.Column{Name: "Lost %", Key: "udp_lost_pct_median"},
			report.Column{Name: "Jitter ms", Key: "jitter_ms_median"}, report.Column{Name: "Failed", Key: "failed"})...),
		Empty: "No runs.",
		Notes: []string{
			"Dir as seen from the board: tx = the client sends, rx = the server sends. Rate: tbf on both veth ends. UDP loss and jitter at the receiver, as iperf3 defines them.",
		},
	}
}

// summarize is the group's row (medians over the completed repeats) and
// its table cells.
func (g *streamGroup) summarize() (StreamRow, []string) {
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row := g.row
	row.N = len(g.mbps)
	win, auto, udp, line := "", "", "", ""
	switch {
	case row.Proto == ProtoUDP && row.UDPLine:
		line = "line"
	case row.Proto == ProtoUDP:
		udp = strconv.FormatFloat(row.UDPRateMbps, 'f', -1, 64)
	case row.WindowAuto:
		auto = "auto"
	default:
		win = strconv.Itoa(row.Window)
	}
	cells := append(append([]string{row.Proto, row.Direction, strconv.Itoa(row.MTU)}, rateCells(row.Rate, row.RateMbps)...),
		row.Setting, win, auto, udp, line, strconv.Itoa(row.N), "", "", "", "", "", "", "", strconv.Itoa(row.Failed))
	const med = 12 // cells[med]: the median, then min-max, min, max, Retr, Lost %, Jitter
	if row.N > 0 {
		row.Median, row.Min, row.Max = measure.Median(g.mbps), slices.Min(g.mbps), slices.Max(g.mbps)
		cells[med] = f1(row.Median)
		copy(cells[med+1:med+4], spreadCells(row.Min, row.Max))
		if row.Proto == ProtoTCP {
			row.Retr = measure.Median(g.retr)
			cells[med+4] = strconv.FormatFloat(row.Retr, 'f', 0, 64)
		}
	}
	if len(g.lost) > 0 {
		row.LostPct = measure.Median(g.lost)
		cells[med+5] = strconv.FormatFloat(row.LostPct, 'f', 2, 64)
	}
	if len(g.j) > 0 {
		row.JitterMs = measure.Median(g.j)
		cells[med+6] = strconv.FormatFloat(row.JitterMs, 'f', 3, 64)
	}
	return row, cells
}

// CrossCheckPair is one run next to iperf3's at the same point.
type CrossCheckPair struct {
	Point     string   `json:"point"`
	Rep       int      `json:"rep"`
	Ours      float64  `json:"pxeperf_mbps"`
	Iperf     float64  `json:"iperf3_mbps"`
	DevPct    float64  `json:"deviation_pct"`
	Flagged   bool     `json:"over_bound"`
	OursLost  *float64 `json:"pxeperf_udp_lost_pct,omitempty"` // UDP only
	IperfLost *float64 `json:"iperf3_udp_lost_pct,omitempty"`
	Err       string   `json:"err,omitempty"`
}

// CrossCheck pairs every run with iperf3's figure from --cross-check and
// flags deviations over CrossCheckBound; it also returns how many are
// flagged and how many pairs there are.
func CrossCheck(results []Result) (report.Table, int, int) {
	t := report.Table{
		Name:  "bench-crosscheck",
		Title: "Cross-check against iperf3 (receiver Mbit/s, same testbed and settings, run back to back)",
		Columns: []report.Column{{Name: "Point", Key: "point", Left: true}, {Name: "Rep", Key: "rep"},
			{Name: "pxeperf", Key: "pxeperf_mbps"}, {Name: "iperf3", Key: "iperf3_mbps"}, {Name: "Dev %", Key: "deviation_pct"},
			{Name: "", Key: "mark", Left: true, TextOnly: true}, {Name: "Over bound", Key: "over_bound", Left: true, CSVOnly: true},
			{Name: "iperf3 error", Key: "err", Left: true, CSVOnly: true},
			{Name: "Lost % ours", Key: "pxeperf_udp_lost_pct"}, {Name: "Lost % iperf3", Key: "iperf3_udp_lost_pct"}},
		Empty: "No cross-checked runs.",
	}
	pairs := []CrossCheckPair{}
	flagged := 0
	for _, r := range results {
		rec := r.Record
		pair := CrossCheckPair{Point: r.Point.Key(), Rep: r.Point.Rep, Ours: rec.Mbps, Err: rec.Iperf3Err,
			Iperf: rec.Iperf3Mbps, DevPct: rec.Iperf3DevPct}
		if pair.Iperf == 0 && pair.Err == "" {
			continue
		}
		lost := []string{"", ""}
		if rec.Proto == ProtoUDP {
			ours, theirs := rec.UDPLostPct, rec.Iperf3LostPct
			pair.OursLost, pair.IperfLost = &ours, &theirs
			lost = []string{strconv.FormatFloat(ours, 'f', 3, 64), strconv.FormatFloat(theirs, 'f', 3, 64)}
		}
		mark := ""
		if pair.Err != "" {
			mark = "iperf3 failed"
		} else if pair.DevPct > CrossCheckBound*100 {
			pair.Flagged, mark = true, "> 5%"
			flagged++
		}
		pairs = append(pairs, pair)
		t.Rows = append(t.Rows, []string{pair.Point, strconv.Itoa(pair.Rep), strconv.FormatFloat(pair.Ours, 'f', 1, 64),
			strconv.FormatFloat(pair.Iperf, 'f', 1, 64), strconv.FormatFloat(pair.DevPct, 'f', 1, 64), mark, strconv.FormatBool(pair.Flagged),
			pair.Err, lost[0], lost[1]})
	}
	t.Data = pairs
	t.Notes = []string{"Dev %: |pxeperf - iperf3| / iperf3 of the receivers' bitrates; runs over 5% are marked. iperf3 runs with the same -w (both ends), -b, -l, -t and -R."}
	if len(pairs) > 0 {
		t.Notes = append(t.Notes, strconv.Itoa(flagged)+" of "+strconv.Itoa(len(pairs))+" pairs deviate by more than 5%.")
	}
	return t, flagged, len(pairs)
}
