package bench

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/stream"
)

// streamRecord is the record of one stream run (without the testbed's
// fields): the receiver's bytes and rate, the sender's retransmits and
// RTT, UDP loss and jitter as labels. A run that failed (err) is a record
// with outcome error.
func streamRecord(p Point, res stream.Result, err error, begin time.Time) *record.Record {
	recv := res.Receiver
	rec := &record.Record{
		Time: begin.UTC(), Source: Source, Proto: p.Proto, Direction: p.Direction,
		// A stream has no file; this name lets `report --file 'stream/*'` select runs.
		File:  "stream/" + p.Proto + "-" + p.Direction,
		Bytes: recv.Bytes, Duration: recv.End - recv.Start, Mbps: recv.BitsPerSecond / 1e6,
		Outcome: event.OutcomeOK, WndRequested: uint32(p.Window),
		Retransmits: res.Sender.Retransmits, RTT: res.Sender.RTT,
		Labels: map[string]string{
			"rate":          FormatRate(p.Rate),
			LabelSenderMbps: strconv.FormatFloat(res.Sender.BitsPerSecond/1e6, 'f', 2, 64),
		},
	}
	if p.Proto == ProtoUDP {
		rec.Labels[LabelUDPRate] = FormatUDPRate(p.UDPRate)
		rec.Labels[LabelUDPLostPct] = strconv.FormatFloat(recv.LostPercent, 'f', 3, 64)
		rec.Labels[LabelJitterMs] = strconv.FormatFloat(recv.JitterMs, 'f', 3, 64)
		rec.Datagrams = res.Sender.Packets
		rec.Retransmits = 0
	} else {
		rec.Labels["window"] = FormatWindow(p.Window)
	}
	if err != nil {
		rec.Outcome, rec.Err = event.OutcomeError, err.Error()
	}
	return rec
}

// streamIntervals are a run's interval lines (the client's view, with the
// sender's retransmits, cwnd and RTT) as record intervals.
func streamIntervals(res stream.Result) []record.Interval {
	var ivs []record.Interval
	for _, s := range res.Intervals {
		ivs = append(ivs, record.Interval{Start: s.Start, End: s.End, Bytes: s.Bytes,
			Retransmits: uint32(max(s.Retransmits, 0)), Cwnd: uint32(max(s.SndCwnd, 0)), RTT: s.RTT})
	}
	return ivs
}

func labelFloat(r record.Record, key string) (float64, bool) {
	v, ok := r.Labels[key]
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil && !math.IsNaN(f)
}

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
		if v, ok := labelFloat(r.Record, LabelUDPLostPct); ok {
			g.lost = append(g.lost, v)
		}
		if v, ok := labelFloat(r.Record, LabelJitterMs); ok {
			g.j = append(g.j, v)
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
		pair := CrossCheckPair{Point: r.Point.Key(), Rep: r.Point.Rep, Ours: rec.Mbps, Err: rec.Labels["iperf3_err"],
			OursLost: rec.Labels[LabelUDPLostPct], IperfLost: rec.Labels[LabelIperfLostPct]}
		iv, ok := labelFloat(rec, LabelIperfMbps)
		if !ok && pair.Err == "" {
			continue
		}
		pair.Iperf = iv
		pair.DevPct, _ = labelFloat(rec, LabelIperfDevPct)
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
