package bench

import (
	"slices"
	"strconv"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/report"
)

// StreamRow is one stream point over its repeats.
type StreamRow struct {
	Proto     string  `json:"proto"`
	Direction string  `json:"direction"`
	MTU       int     `json:"mtu"`
	Rate      string  `json:"rate"`
	Setting   string  `json:"setting"` // window=... (TCP) or udp_rate=... (UDP)
	N         int     `json:"n"`
	Median    float64 `json:"median_mbps"`
	Min       float64 `json:"min_mbps"`
	Max       float64 `json:"max_mbps"`
	Retr      float64 `json:"retransmits_median"`
	LostPct   float64 `json:"udp_lost_pct_median"`
	JitterMs  float64 `json:"jitter_ms_median"`
	Failed    int     `json:"failed"`
}

// StreamSummary is the stream sweep by point: receiver Mbit/s median and
// min-max over repeats, median retransmits (TCP) or loss and jitter (UDP).
func StreamSummary(results []Result) report.Table {
	type group struct {
		row                 StreamRow
		mbps, retr, lost, j []float64
	}
	groups := byPoint(results, func(r Result) *group {
		p := r.Point
		set := "window=" + FormatWindow(p.Window)
		if p.Proto == ProtoUDP {
			set = "udp_rate=" + FormatUDPRate(p.UDPRate)
		}
		return &group{row: StreamRow{Proto: p.Proto, Direction: p.Direction, MTU: p.MTU, Rate: FormatRate(p.Rate), Setting: set}}
	}, func(g *group, r Result) {
		if r.Record.Outcome != event.OutcomeOK {
			g.row.Failed++
			return
		}
		g.mbps = append(g.mbps, r.Record.Mbps)
		g.retr = append(g.retr, float64(r.Record.Retransmits))
		if r.Record.Proto == ProtoUDP {
			g.lost, g.j = append(g.lost, r.Record.UDPLostPct), append(g.j, r.Record.JitterMs)
		}
	})
	t := report.Table{
		Name:  "bench-streams",
		Title: "Streams by point (receiver Mbit/s, median and min-max over repeats)",
		Columns: []report.Column{{Name: "Proto", Key: "proto", Left: true}, {Name: "Dir", Key: "direction", Left: true},
			{Name: "MTU", Key: "mtu"}, {Name: "Rate", Key: "rate"}, {Name: "Setting", Key: "setting", Left: true},
			{Name: "n", Key: "n"}, {Name: "Mbit/s", Key: "median_mbps"}, {Name: "min-max", Key: "spread_mbps"},
			{Name: "Retr", Key: "retransmits_median"}, {Name: "Lost %", Key: "udp_lost_pct_median"},
			{Name: "Jitter ms", Key: "jitter_ms_median"}, {Name: "Failed", Key: "failed"}},
		Empty: "No runs.",
		Notes: []string{
			"Dir as seen from the board: tx = the client sends, rx = the server sends. Rate: tbf on both veth ends. UDP loss and jitter at the receiver, as iperf3 defines them.",
		},
	}
	rows := []StreamRow{}
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for _, g := range groups {
		row := g.row
		row.N = len(g.mbps)
		cells := []string{row.Proto, row.Direction, strconv.Itoa(row.MTU), row.Rate, row.Setting, strconv.Itoa(row.N), "", "", "", "", "", strconv.Itoa(row.Failed)}
		if row.N > 0 {
			row.Median, row.Min, row.Max = report.Median(g.mbps), slices.Min(g.mbps), slices.Max(g.mbps)
			cells[6], cells[7] = f1(row.Median), f1(row.Min)+"-"+f1(row.Max)
			if row.Proto == ProtoTCP {
				row.Retr = report.Median(g.retr)
				cells[8] = strconv.FormatFloat(row.Retr, 'f', 0, 64)
			}
		}
		if len(g.lost) > 0 {
			row.LostPct = report.Median(g.lost)
			cells[9] = strconv.FormatFloat(row.LostPct, 'f', 2, 64)
		}
		if len(g.j) > 0 {
			row.JitterMs = report.Median(g.j)
			cells[10] = strconv.FormatFloat(row.JitterMs, 'f', 3, 64)
		}
		rows = append(rows, row)
		t.Rows = append(t.Rows, cells)
	}
	t.Data = rows
	return t
}

// CrossCheckPair is one run next to iperf3's at the same point.
type CrossCheckPair struct {
	Point     string  `json:"point"`
	Rep       int     `json:"rep"`
	Ours      float64 `json:"pxeperf_mbps"`
	Iperf     float64 `json:"iperf3_mbps"`
	DevPct    float64 `json:"deviation_pct"`
	Flagged   bool    `json:"over_bound"`
	OursLost  string  `json:"pxeperf_udp_lost_pct,omitempty"`
	IperfLost string  `json:"iperf3_udp_lost_pct,omitempty"`
	Err       string  `json:"err,omitempty"`
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
			{Name: "", Key: "over_bound", Left: true}, {Name: "Lost % ours", Key: "pxeperf_udp_lost_pct"},
			{Name: "Lost % iperf3", Key: "iperf3_udp_lost_pct"}},
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
		if rec.Proto == ProtoUDP {
			pair.OursLost = strconv.FormatFloat(rec.UDPLostPct, 'f', 3, 64)
			pair.IperfLost = strconv.FormatFloat(rec.Iperf3LostPct, 'f', 3, 64)
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
			strconv.FormatFloat(pair.Iperf, 'f', 1, 64), strconv.FormatFloat(pair.DevPct, 'f', 1, 64), mark, pair.OursLost, pair.IperfLost})
	}
	t.Data = pairs
	t.Notes = []string{"Dev %: |pxeperf - iperf3| / iperf3 of the receivers' bitrates; runs over 5% are marked. iperf3 runs with the same -w (both ends), -b, -l, -t and -R."}
	if len(pairs) > 0 {
		t.Notes = append(t.Notes, strconv.Itoa(flagged)+" of "+strconv.Itoa(len(pairs))+" pairs deviate by more than 5%.")
	}
	return t, flagged, len(pairs)
}
