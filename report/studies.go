package report

import (
	"bytes"
	"embed"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/record"
)

// The published studies the bench presets reproduce, as copied from their
// write-ups (studies/README.md says what each is and where it is odd).
//
//go:embed studies/*.csv studies/README.md
var studyFS embed.FS

// Study is one published study that `report --compare KEY` prints beside
// the measured records.
type Study struct {
	Key    string // --compare KEY
	File   string // under studies/
	Title  string
	Preset string // the bench preset that runs its grid
	// Conditions are the study's, as published, for the notes.
	Conditions string
	compare    func(Study, [][]string, []record.Record, splitter) Table
	// axes are the split keys its rows already fix (xilinx matches the
	// MTU, linkspeed the rate): no column of their own.
	axes []string
}

// Studies lists the published studies by key.
var Studies = []Study{
	{Key: "gpxe-2010", File: "gpxe-2010-window-offload.csv", Preset: "gpxe",
		Title:      "gPXE 2010: HTTP imgfetch Mbit/s by TCP window and RX checksum offload, published vs measured",
		Conditions: "Published: gPXE imgfetch of a 500 MB image over HTTP, two PCs on a Cat 6 cable (GigE, Marvell 88E8056 server, JMicron JMC250 client), lighttpd 1.4.26, Linux 2.6.33.3; MTU, RTT and repeats not stated.",
		compare:    compareGPXE},
	{Key: "xilinx", File: "xilinx-iperf-direction-mtu.csv", Preset: "xilinx",
		Title:      "Xilinx Treck demo: iperf Mbit/s by protocol, direction and MTU (12 board sections), published vs measured",
		Conditions: "Published: Treck TCP/IP demo on ML605/SP605/ML507 against a Windows XP or Fedora PC, iperf 1.7.0/2.0.4, 1 Gbit/s; durations not given. Published cells are the median and range over the sections that print a figure.",
		compare:    compareXilinx, axes: []string{SplitMTU}},
	{Key: "linkspeed", File: "critical-link-linkspeed.csv", Preset: "linkspeed",
		Title:      "Critical Link MitySOM-5CSx: Mbit/s by link speed, protocol and direction, published vs measured",
		Conditions: "Published: iperf 3 and iperf 2.0.4 summaries, stmmac RGMII port, 1 Gbit/s full duplex, 100 and 10 Mbit/s through a hub at half duplex; OUT = the board sends (tx).",
		compare:    compareLinkSpeed, axes: []string{SplitSpeed}},
	{Key: "netperf-2008", File: "netperf-tcp-stream.csv", Preset: "netperf",
		Title:      "MicroBlaze uClinux: netperf TCP_STREAM Mbit/s (board sends), published vs measured",
		Conditions: "Published: netperf -l 60 (8192-byte receive, 16384-byte send sockets) from a 96 MHz MicroBlaze, xilinx_emac on OPB, no checksum offload; link speed and MTU not stated.",
		compare:    compareNetperf},
	{Key: "zynq-iperf3", File: "zynq-iperf3-intervals.csv", Preset: "zynq",
		Title:      "Zynq z-turn: iperf3 TCP Mbit/s each way, published vs measured",
		Conditions: "Published: iperf 3.1.3 defaults (10 s) between a z-turn Zynq (3.15 kernel) and an Ubuntu VM; link not stated (gigabit port).",
		compare:    compareZynq},
}

// StudyKeys are the --compare keys.
func StudyKeys() []string {
	var k []string
	for _, s := range Studies {
		k = append(k, s.Key)
	}
	return k
}

// StudyCSV returns a study's embedded CSV: header and rows.
func StudyCSV(file string) ([][]string, error) {
	b, err := studyFS.ReadFile("studies/" + file)
	if err != nil {
		return nil, err
	}
	return csv.NewReader(bytes.NewReader(b)).ReadAll()
}

// Compare prints the published figures of the study KEY beside the
// measured records (bench records of its preset's grid, or served fetches
// that match), with the conditions of each.
func Compare(key string, recs []record.Record) (Table, error) {
	return CompareWith(key, recs, Options{})
}

// CompareWith is Compare with o's Merge: a published row gets one row per
// Setup of the measured records that match it (source, iface, MTU, link,
// like the other tables), so no measured cell mixes served fetches, the
// bench and iperf, or two links; a published row nothing matches keeps
// one row with empty measured cells.
func CompareWith(key string, recs []record.Record, o Options) (Table, error) {
	for _, s := range Studies {
		if s.Key == key {
			rows, err := StudyCSV(s.File)
			if err != nil {
				return Table{}, fmt.Errorf("study %s: %w", key, err)
			}
			sp := newSplitter(o, s.axes...)
			t := s.compare(s, rows, recs, sp)
			t.Name, t.Title = "compare-"+s.Key, s.Title
			t.Notes = append([]string{s.Conditions, measuredConditions(recs)}, t.Notes...)
			addSplitNote(&t, sp, slices.ContainsFunc(recs, measured))
			t.Notes = append(t.Notes, fmt.Sprintf("Run the grid with: pxeperf bench --preset %s; select a run with --label bench_run=ID.", s.Preset))
			return t, nil
		}
	}
	return Table{}, fmt.Errorf("unknown study %q: use %s", key, strings.Join(StudyKeys(), ", "))
}

// byHeader indexes CSV rows by column name.
func byHeader(rows [][]string) []map[string]string {
	if len(rows) == 0 {
		return nil
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			if i < len(r) {
				m[h] = r[i]
			}
		}
		out = append(out, m)
	}
	return out
}

// measuredConditions says under what the measured records ran.
func measuredConditions(recs []record.Record) string {
	var mtus, rates, delays, sizes []string
	var rtts []float64
	add := func(list *[]string, v string) {
		if v != "" && !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	n := 0
	for _, r := range recs {
		if !measured(r) {
			continue
		}
		n++
		add(&mtus, strconv.Itoa(r.MTU))
		rate := "unlimited"
		if r.RateLimit > 0 {
			rate = LinkName(r.RateLimit)
		}
		add(&rates, rate)
		d := r.Labels["delay"]
		if d == "" {
			d = "none"
		}
		add(&delays, d)
		if r.Size > 0 {
			add(&sizes, strconv.FormatInt(r.Size>>20, 10)+" MiB")
		}
		if r.MinRTT > 0 {
			rtts = append(rtts, float64(r.MinRTT.Microseconds()))
		}
	}
	if n == 0 {
		return "Measured: no records match (run the preset, or widen --label/--since)."
	}
	s := fmt.Sprintf("Measured: %d records on pxeperf's testbed (veth pair in two namespaces, tbf rate on egress); MTU %s; rate %s; added one-way delay %s",
		n, strings.Join(mtus, ","), strings.Join(rates, ","), strings.Join(delays, ","))
	if len(sizes) > 0 {
		s += "; image " + strings.Join(sizes, ",")
	}
	if len(rtts) > 0 {
		s += fmt.Sprintf("; median TCP min RTT %v", time.Duration(measure.Median(rtts))*time.Microsecond)
	}
	return s + "."
}

func medianCell(xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	return mbps(measure.Median(xs))
}

// ratioCell is measured / published as a percentage (its column's Unit
// puts the % after it in text).
func ratioCell(meas []float64, pub string) string {
	p, err := strconv.ParseFloat(pub, 64)
	if len(meas) == 0 || err != nil || p <= 0 {
		return ""
	}
	return strconv.FormatFloat(measure.Median(meas)/p*100, 'f', 0, 64)
}

// GPXERow is one window of the gPXE comparison.
type GPXERow struct {
	Window       int    `json:"window"`
	AsPrinted    string `json:"window_as_printed"`
	PublishedOff string `json:"-"` // as published; "" where the source has no figure
	PublishedOn  string `json:"-"`
	// The published figures as numbers (null where the source has none).
	PubOff *float64 `json:"published_off_mbps"`
	PubOn  *float64 `json:"published_on_mbps"`
	Setup
	MeasuredOff float64 `json:"measured_off_mbps,omitempty"`
	MeasuredOn  float64 `json:"measured_on_mbps,omitempty"`
	NOff        int     `json:"n_off"`
	NOn         int     `json:"n_on"`
}

// compareGPXE is the gPXE study's table: a row per published window and
// Setup of the records measured at it, published beside measured, for
// RX checksum offload off and on.
func compareGPXE(_ Study, rows [][]string, recs []record.Record, sp splitter) Table {
	meas := gpxeMeasured(recs, sp)
	t := gpxeTable(sp)
	var data []GPXERow
	for _, pub := range gpxePublished(rows) {
		sts := meas.setups[pub.Window]
		slices.SortFunc(sts, compareSetups)
		if len(sts) == 0 {
			sts = []Setup{{}} // published only
		}
		for _, st := range sts {
			m := meas.mbps[gpxeKey{pub.Window, st}]
			r, cells := gpxeRow(pub, st, m, sp)
			t.Rows = append(t.Rows, cells)
			data = append(data, r)
		}
	}
	t.Data = data
	return t
}

// gpxePublished is the study's CSV as a row per window, in its order, with
// both offload settings' figures; the two misprinted windows stand as the
// 1024-byte steps they mean.
func gpxePublished(rows [][]string) []GPXERow {
	typo := map[string]int{"6114": 6144, "14436": 14336}
	var out []GPXERow
	idx := map[int]int{}
	for _, r := range byHeader(rows) {
		w, ok := typo[r["window_bytes"]]
		if !ok {
			w, _ = strconv.Atoi(r["window_bytes"])
		}
		i, seen := idx[w]
		if !seen {
			i = len(out)
			idx[w] = i
			out = append(out, GPXERow{Window: w, AsPrinted: r["window_bytes"]})
		}
		if r["rx_checksum_offload"] == "with" {
			out[i].PublishedOn = r["mbit_s"]
		} else {
			out[i].PublishedOff = r["mbit_s"]
		}
	}
	return out
}

// gpxeKey is a window the client asked for and the Setup it ran in.
type gpxeKey struct {
	w  int
	st Setup
}

// gpxeFetches are the completed HTTP fetches with a window asked: their
// Mbit/s by window, Setup and RX offload, and each window's Setups in the
// order first seen.
type gpxeFetches struct {
	mbps   map[gpxeKey]map[record.Offload][]float64
	setups map[int][]Setup
}

func gpxeMeasured(recs []record.Record, sp splitter) gpxeFetches {
	f := gpxeFetches{mbps: map[gpxeKey]map[record.Offload][]float64{}, setups: map[int][]Setup{}}
	for _, r := range recs {
		if !measured(r) || r.Proto != "http" || r.WndRequested == 0 {
			continue
		}
		k := gpxeKey{int(r.WndRequested), sp.of(&r)}
		if f.mbps[k] == nil {
			f.mbps[k] = map[record.Offload][]float64{}
			f.setups[k.w] = append(f.setups[k.w], k.st)
		}
		o := RxOffload(r)
		f.mbps[k][o] = append(f.mbps[k][o], r.Mbps)
	}
	return f
}

// gpxeTable is the comparison's columns and notes, without rows.
func gpxeTable(sp splitter) Table {
	return Table{
		Columns: append(append([]Column{{Name: "Window", Key: "window_text", TextOnly: true}, {Name: "Window", Key: "window", CSVOnly: true},
			{Name: "As printed", Key: "window_as_printed", CSVOnly: true, Left: true}}, sp.columns()...),
			Column{Name: "Published off", Key: "published_off_mbps"}, Column{Name: "Measured off", Key: "measured_off_mbps"},
			Column{Name: "n", Key: "n_off"}, Column{Name: "off %", Key: "off_ratio", Unit: "%"},
			Column{Name: "Published on", Key: "published_on_mbps"}, Column{Name: "Measured on", Key: "measured_on_mbps"}, Column{Name: "n", Key: "n_on"}, Column{Name: "on %", Key: "on_ratio", Unit: "%"}),
		Notes: []string{"Window: gPXE's TCP_MAX_WINDOW_SIZE, measured as the client's SO_RCVBUF asked (the bench's --window); the two misprinted windows (6114, 14436) are shown as the 1024-byte steps they stand in. Published cells empty in the source stay empty. %: measured median / published.",
			"The published RTT is not stated: its 4096-byte row (136 Mbit/s) implies about 240 us per window; compare a run with --delay near half that."},
	}
}

// gpxeRow is published row pub beside m, the Mbit/s measured at its window
// in Setup st (nil: nothing matched), as data and as cells.
func gpxeRow(pub GPXERow, st Setup, m map[record.Offload][]float64, sp splitter) (GPXERow, []string) {
	r := pub
	r.Setup = st
	r.PubOff, r.PubOn = pubNumber(r.PublishedOff), pubNumber(r.PublishedOn)
	off, on := m[record.OffloadOff], m[record.OffloadOn]
	r.MeasuredOff, r.MeasuredOn = measure.Median(off), measure.Median(on) // 0 (omitted) when none
	r.NOff, r.NOn = len(off), len(on)
	wname := strconv.Itoa(r.Window)
	if r.AsPrinted != wname {
		wname += " (" + r.AsPrinted + ")"
	}
	cells := append([]string{wname, strconv.Itoa(r.Window), r.AsPrinted}, setupCells(sp, st, m != nil)...)
	return r, append(cells, r.PublishedOff, medianCell(off), countCell(len(off)), ratioCell(off, r.PublishedOff),
		r.PublishedOn, medianCell(on), countCell(len(on)), ratioCell(on, r.PublishedOn))
}

// setupCells are st's cells, or empty ones for a published row nothing
// measured matches.
func setupCells(sp splitter, st Setup, matched bool) []string {
	c := sp.cells(st)
	if !matched {
		for i := range c {
			c[i] = ""
		}
	}
	return c
}

// pubNumber is a published figure as a JSON number, nil when there is none.
func pubNumber(s string) *float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil
	}
	return &v
}

func countCell(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// StreamCompareRow is one published figure of a stream study beside the
// measured median of the matching records.
type StreamCompareRow struct {
	Setting string `json:"setting"`
	Setup
	Published string   `json:"-"`              // as printed
	PubMbps   *float64 `json:"published_mbps"` // the same, a number (null when none)
	Range     string   `json:"published_range,omitempty"`
	Min       float64  `json:"published_min_mbps,omitempty"` // the range's ends
	Max       float64  `json:"published_max_mbps,omitempty"`
	Measured  float64  `json:"measured_mbps,omitempty"`
	N         int      `json:"n"`
}

// streamMatch selects measured records of a stream study's row.
type streamMatch struct {
	setting   string
	proto     string // tcp, udp
	direction string // tx, rx (board's view)
	mtu       int    // 0: any
	rate      int64  // 0: any
	published []float64
	as        string // published figure, when one
}

func streamTable(matches []streamMatch, recs []record.Record, sp splitter) Table {
	t := Table{Columns: append(append([]Column{{Name: "Setting", Key: "setting", Left: true}}, sp.columns()...),
		Column{Name: "Published", Key: "published_mbps"},
		Column{Name: "range", Key: "published_range", TextOnly: true}, Column{Name: "min", Key: "published_min_mbps", CSVOnly: true},
		Column{Name: "max", Key: "published_max_mbps", CSVOnly: true},
		Column{Name: "Measured", Key: "measured_mbps"}, Column{Name: "n", Key: "n"}, Column{Name: "%", Key: "ratio", Unit: "%"})}
	var data []StreamCompareRow
	for _, m := range matches {
		bySetup := map[Setup][]float64{}
		var sts []Setup
		for _, r := range recs {
			if !measured(r) || r.Proto != m.proto || r.Direction != m.direction || (m.mtu != 0 && r.MTU != m.mtu) || (m.rate != 0 && r.RateLimit != m.rate) {
				continue
			}
			st := sp.of(&r)
			if _, ok := bySetup[st]; !ok {
				sts = append(sts, st)
			}
			bySetup[st] = append(bySetup[st], r.Mbps)
		}
		slices.SortFunc(sts, compareSetups)
		if len(sts) == 0 {
			sts = []Setup{{}} // published only
		}
		for _, st := range sts {
			row, cells := streamRow(m, st, bySetup[st], sp)
			data = append(data, row)
			t.Rows = append(t.Rows, cells)
		}
	}
	t.Data = data
	return t
}

// streamRow is m's published figure beside the median of xs, the measured
// records of one Setup.
func streamRow(m streamMatch, st Setup, xs []float64, sp splitter) (StreamCompareRow, []string) {
	row := StreamCompareRow{Setting: m.setting, Setup: st, N: len(xs)}
	pub := m.as
	if len(m.published) > 0 {
		pub = mbps(measure.Median(m.published))
		if len(m.published) > 1 {
			row.Min, row.Max = slices.Min(m.published), slices.Max(m.published)
			row.Range = mbps(row.Min) + "-" + mbps(row.Max)
		}
	}
	row.Published, row.PubMbps = pub, pubNumber(pub)
	if len(xs) > 0 {
		row.Measured = measure.Median(xs)
	}
	lo, hi := "", ""
	if row.Range != "" {
		lo, hi = mbps(row.Min), mbps(row.Max)
	}
	cells := append(append([]string{m.setting}, setupCells(sp, st, len(xs) > 0)...), pub, row.Range, lo, hi, medianCell(xs), countCell(len(xs)), ratioCell(xs, pub))
	return row, cells
}

func compareXilinx(_ Study, rows [][]string, recs []record.Record, sp splitter) Table {
	type k struct {
		proto, dir string
		mtu        int
	}
	pub := map[k][]float64{}
	var order []k
	for _, r := range byHeader(rows) {
		mtu, _ := strconv.Atoi(r["mtu"])
		key := k{strings.ToLower(r["protocol"]), strings.ToLower(r["direction"]), mtu}
		if _, ok := pub[key]; !ok {
			order = append(order, key)
			pub[key] = nil
		}
		if v, err := strconv.ParseFloat(r["mbit_s"], 64); err == nil {
			pub[key] = append(pub[key], v)
		}
	}
	var ms []streamMatch
	for _, key := range order {
		ms = append(ms, streamMatch{setting: fmt.Sprintf("%s %s MTU %d", strings.ToUpper(key.proto), key.dir, key.mtu),
			proto: key.proto, direction: key.dir, mtu: key.mtu, published: pub[key]})
	}
	t := streamTable(ms, recs, sp)
	t.Notes = append(t.Notes, "Published: simple and advanced TCP client rows both count as TCP tx; the SDK 12.3-14.5 UDP cells are TBD in the source.")
	return t
}

func compareLinkSpeed(_ Study, rows [][]string, recs []record.Record, sp splitter) Table {
	var ms []streamMatch
	for _, r := range byHeader(rows) {
		if r["line_kind"] != "summary" {
			continue
		}
		link, _ := strconv.ParseInt(r["link_mbit"], 10, 64)
		dir := "rx"
		if r["direction"] == "OUT" {
			dir = "tx"
		}
		ms = append(ms, streamMatch{setting: fmt.Sprintf("%s %s %s (%s)", LinkName(link*1e6), r["protocol"], dir, r["tool"]),
			proto: strings.ToLower(r["protocol"]), direction: dir, rate: link * 1e6, as: r["mbit_s"]})
	}
	return streamTable(ms, recs, sp)
}

func compareNetperf(_ Study, rows [][]string, recs []record.Record, sp splitter) Table {
	var ms []streamMatch
	for _, r := range byHeader(rows) {
		if r["field"] != "Throughput" || r["mbit_s"] == "" {
			continue
		}
		ms = append(ms, streamMatch{setting: "TCP tx, " + r["run"], proto: "tcp", direction: "tx", as: r["mbit_s"]})
	}
	return streamTable(ms, recs, sp)
}

func compareZynq(_ Study, rows [][]string, recs []record.Record, sp splitter) Table {
	var ms []streamMatch
	for _, r := range byHeader(rows) {
		if r["line_kind"] != "receiver" {
			continue
		}
		dir := "rx"
		if r["zynq_role"] == "client" {
			dir = "tx"
		}
		ms = append(ms, streamMatch{setting: fmt.Sprintf("TCP %s (%s, receiver)", dir, r["command"]), proto: "tcp", direction: dir, as: r["mbit_s"]})
	}
	return streamTable(ms, recs, sp)
}
