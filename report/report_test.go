package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/internal/testkit/golden"
	"github.com/pxeperf/pxeperf/record"
)

var ext = map[Format]string{Text: "txt", Markdown: "md", CSV: "csv", JSON: "json"}

func TestGolden(t *testing.T) {
	recs := lab()
	tables := map[string]Table{}
	for _, name := range TableNames {
		tb, err := Build(name, recs)
		if err != nil {
			t.Fatal(err)
		}
		tables[name] = tb
	}
	r, ivs := fetchWithIntervals()
	tables["intervals"] = Intervals(r, ivs)
	tables["netperf"] = Netperf(r)
	tx, txIvs := boardSendTest()
	tables["intervals-tx"] = Intervals(tx, txIvs)
	tables["netperf-tx"] = Netperf(tx)
	for name, tb := range tables {
		for _, f := range Formats {
			t.Run(name+"."+string(f), func(t *testing.T) {
				var b bytes.Buffer
				if err := Render(&b, tb, f); err != nil {
					t.Fatal(err)
				}
				if f == JSON && !json.Valid(b.Bytes()) {
					t.Fatalf("invalid JSON:\n%s", b.String())
				}
				if f == CSV {
					head, _, _ := strings.Cut(b.String(), "\n")
					seen := map[string]bool{}
					for _, k := range strings.Split(head, ",") {
						if k == "" || seen[k] || strings.ContainsAny(k, " /()") {
							t.Errorf("CSV header %q: key %q empty, repeated or not snake_case", head, k)
						}
						seen[k] = true
					}
				}
				golden.Check(t, filepath.Join("testdata", name+"."+ext[f]), b.Bytes())
			})
		}
	}
}

// TestGPXEStudyCells checks the cells against the study's figures the
// fixture was built from (16384: 528 vs 696; 65532: 536 vs 896 Mbit/s).
func TestGPXEStudyCells(t *testing.T) {
	rows, states, skipped := windowOffload(gpxeStudy(), newCounter(Options{}, throughputKinds), newSplitter(Options{}))
	if diff := cmp.Diff([]record.Offload{record.OffloadOff, record.OffloadOn}, states); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if skipped != 0 {
		t.Errorf("skipped %d, want 0", skipped)
	}
	got := map[uint32][2]float64{}
	for _, r := range rows {
		got[r.Window] = [2]float64{r.Cells["off"].Median, r.Cells["on"].Median}
	}
	want := map[uint32][2]float64{4096: {152, 160}, 8192: {287, 319}, 16384: {528, 693}, 32768: {535, 848}, 65536: {535, 896}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("medians (-want +got):\n%s", diff)
	}
}

func TestWindowBucket(t *testing.T) {
	tests := map[string]struct {
		in, want uint32
	}{
		"zero stays unknown":       {0, 0},
		"tiny to 1K":               {536, 1024},
		"exact power":              {4096, 4096},
		"a few bytes short":        {16380, 16384},
		"gPXE 65532":               {65532, 65536},
		"unscaled max 65535":       {65535, 65536},
		"just below the midpoint":  {5792, 4096}, // 4096·√2 ≈ 5792.6
		"at or above the midpoint": {5793, 8192},
		"scaled 3 MiB":             {3 << 20, 4 << 20},
		"largest":                  {math.MaxUint32, 1 << 31},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := WindowBucket(tc.in); got != tc.want {
				t.Errorf("WindowBucket(%d) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestRxOffload(t *testing.T) {
	tests := map[string]struct {
		labels map[string]string
		nic    record.Offload
		want   record.Offload
	}{
		"label off beats the NIC": {map[string]string{"rx_offload": "off"}, record.OffloadOn, record.OffloadOff},
		"label 1":                 {map[string]string{"rx_offload": "1"}, record.OffloadOff, record.OffloadOn},
		"label garbage":           {map[string]string{"rx_offload": "maybe"}, record.OffloadOn, record.OffloadUnknown},
		"no label: the NIC":       {nil, record.OffloadOff, record.OffloadOff},
		"nothing known":           {nil, record.OffloadUnknown, record.OffloadUnknown},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RxOffload(record.Record{Labels: tc.labels, RxCsum: tc.nic}); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLinkName(t *testing.T) {
	tests := map[int64]string{0: "unknown", 1e9: "1G", 2.5e9: "2.5G", 100e6: "100M", 10e6: "10M", 512e3: "512K", 10e9: "10G"}
	for in, want := range tests {
		if got := LinkName(in); got != want {
			t.Errorf("LinkName(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestIperfUnits checks the number layout against lines iperf3 3.12
// printed on loopback.
func TestIperfUnits(t *testing.T) {
	tests := map[string]struct {
		n     float64
		bytes bool
		want  string
	}{
		"GBytes":          {4.88 * (1 << 30), true, "4.88 GByte"},
		"1023 KBytes":     {1023 * 1024, true, "1023 KByte"},
		"704 KBytes":      {704 * 1024, true, " 704 KByte"},
		"15.2 GBytes":     {15.2 * (1 << 30), true, "15.2 GByte"},
		"41.9 Gbits":      {41.9e9, false, "41.9 Gbit"},
		"941 Mbits":       {941e6, false, " 941 Mbit"},
		"small":           {0, true, "0.00 Byte"},
		"rounds at 9.995": {9.996e6, false, "10.0 Mbit"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := unit(tc.n, tc.bytes); got != tc.want {
				t.Errorf("unit(%v) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

func TestIntervalsLayoutMatchesIperf3(t *testing.T) {
	r, ivs := fetchWithIntervals()
	lines := strings.Split(Intervals(r, ivs).Layout, "\n")
	// Lines copied from iperf3 3.12 (ID and numbers aside), to check the
	// column positions: every field must start where iperf3's does.
	iperf := []string{
		"[ ID] Interval           Transfer     Bitrate         Retr  Cwnd",
		"[  5]   0.00-1.00   sec  4.88 GBytes  41.9 Gbits/sec    1   1.12 MBytes       ",
		"- - - - - - - - - - - - - - - - - - - - - - - - -",
		"[ ID] Interval           Transfer     Bitrate         Retr",
		"[  5]   0.00-3.00   sec  15.2 GBytes  43.6 Gbits/sec    3             sender",
		"[  5]   0.00-3.00   sec  15.2 GBytes  43.6 Gbits/sec                  receiver",
	}
	got := []string{lines[1], lines[2], lines[6], lines[7], lines[8], lines[9]}
	for i := range iperf {
		if len(got[i]) != len(iperf[i]) {
			t.Errorf("line %q is %d long, iperf3's %q is %d", got[i], len(got[i]), iperf[i], len(iperf[i]))
		}
		for j := 0; j < min(len(got[i]), len(iperf[i])); j++ {
			num := func(c byte) bool { return strings.IndexByte("0123456789.", c) >= 0 }
			if (iperf[i][j] == ' ') != (got[i][j] == ' ') && !num(iperf[i][j]) && !num(got[i][j]) {
				t.Errorf("line %q differs from iperf3's %q at column %d", got[i], iperf[i], j)
				break
			}
		}
	}
}

func TestEmpty(t *testing.T) {
	for _, name := range TableNames {
		tb, err := Build(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range Formats {
			var b bytes.Buffer
			if err := Render(&b, tb, f); err != nil {
				t.Fatalf("%s %s: %v", name, f, err)
			}
			out := b.String()
			switch f {
			case Text, Markdown:
				if !strings.Contains(out, "No ") || strings.Contains(out, "---") {
					t.Errorf("%s %s: want a message, not a table:\n%s", name, f, out)
				}
			case JSON:
				var v struct {
					Rows    []any  `json:"rows"`
					Message string `json:"message"`
				}
				if err := json.Unmarshal(b.Bytes(), &v); err != nil || v.Rows == nil || len(v.Rows) != 0 || v.Message == "" {
					t.Errorf("%s json: want rows [] and a message (%v):\n%s", name, err, out)
				}
			}
		}
	}
	// Failed fetches only: no throughput row either.
	failed := []record.Record{{Proto: "http", Outcome: "aborted", WndMax: 4096, Mbps: 3, Bytes: 10}}
	if tb := WindowOffload(failed); len(tb.Rows) != 0 {
		t.Errorf("an aborted fetch made rows: %v", tb.Rows)
	}
	if tb := clients(failed, mergeAll); len(tb.Rows) != 1 || tb.Rows[0][5] != "1" || tb.Rows[0][8] != "" {
		t.Errorf("clients of one failed fetch: %v", tb.Rows)
	}
	r, _ := fetchWithIntervals()
	var b bytes.Buffer
	if err := Render(&b, Intervals(r, nil), Text); err != nil || !strings.Contains(b.String(), "no interval samples") ||
		!strings.Contains(b.String(), "sender") {
		t.Errorf("intervals without samples (%v):\n%s", err, b.String())
	}
}

func TestBuildUnknownTable(t *testing.T) {
	_, err := Build("window", nil)
	if err == nil || !strings.Contains(err.Error(), "window-offload") {
		t.Errorf("err %v, want one naming the tables", err)
	}
}

func TestParseFilter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		in      FilterArgs
		want    record.Filter
		wantErr string
	}{
		"empty": {in: FilterArgs{}, want: record.Filter{}},
		"all": {
			in:   FilterArgs{Client: "zynq1", File: "*.img", Since: "2h", Labels: []string{"rx_offload=off", "fw=a=b"}, Limit: "10"},
			want: record.Filter{Client: "zynq1", File: "*.img", Since: now.Add(-2 * time.Hour), Labels: map[string]string{"rx_offload": "off", "fw": "a=b"}, Limit: 10},
		},
		"days":         {in: FilterArgs{Since: "7d"}, want: record.Filter{Since: now.Add(-7 * 24 * time.Hour)}},
		"rfc3339":      {in: FilterArgs{Since: "2026-11-29T08:00:00Z"}, want: record.Filter{Since: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}},
		"date":         {in: FilterArgs{Since: "2026-11-29"}, want: record.Filter{Since: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}},
		"empty value":  {in: FilterArgs{Labels: []string{"fw="}}, want: record.Filter{Labels: map[string]string{"fw": ""}}},
		"label no =":   {in: FilterArgs{Labels: []string{"rx_offload"}}, wantErr: `label "rx_offload": write key=value, e.g. rx_offload=off`},
		"label no key": {in: FilterArgs{Labels: []string{"=on"}}, wantErr: "write key=value"},
		"label twice":  {in: FilterArgs{Labels: []string{"a=1", "a=2"}}, wantErr: `label "a" given twice`},
		"bad since":    {in: FilterArgs{Since: "yesterday"}, wantErr: `since "yesterday": write a duration back from now`},
		"negative":     {in: FilterArgs{Since: "-2h"}, wantErr: "must not be negative"},
		"bad limit":    {in: FilterArgs{Limit: "ten"}, wantErr: `limit "ten"`},
		"kind":         {in: FilterArgs{Kind: "image,boot", MinSize: "64K"}, want: record.Filter{Kinds: []string{"image", "boot"}, MinSize: 64 << 10}},
		"kind all":     {in: FilterArgs{Kind: "all", MinSize: "1MiB"}, want: record.Filter{MinSize: 1 << 20}},
		"bad kind":     {in: FilterArgs{Kind: "script"}, wantErr: `kind "script"`},
		"bad min size": {in: FilterArgs{MinSize: "1X"}, wantErr: `min-size: "1X" is not a size`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseFilter(tc.in, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats {
		if got, err := ParseFormat(string(f)); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("html"); err == nil || !strings.Contains(err.Error(), "text, markdown, csv or json") {
		t.Errorf("ParseFormat(html): %v", err)
	}
}

// TestChartSVG parses the SVG and checks one data line per offload setting
// (off, on, and unknown when some fetch has no known offload).
func TestChartSVG(t *testing.T) {
	tests := map[string]struct {
		recs []record.Record
		want []string
	}{
		"gPXE study": {gpxeStudy(), []string{"off", "on"}},
		// A line per setup: served fetches with no link known (unknown
		// offload), the gPXE runs on eth0, the bench at MTU 1500 and 9000.
		"lab with unknown offload": {lab(), []string{"unknown", "off", "on", "unknown", "unknown"}},
		"lab merged":               {lab(), []string{"off", "on", "unknown"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := Options{}
			if strings.HasSuffix(name, "merged") {
				o = mergeAll
			}
			c, err := WindowChartWith(tc.recs, o)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := c.SVG(&b); err != nil {
				t.Fatal(err)
			}
			if out := os.Getenv("PXEPERF_CHART_SVG"); out != "" { // to look at it
				_ = os.WriteFile(strings.ReplaceAll(name, " ", "_")+out, b.Bytes(), 0o644)
			}
			var doc struct {
				XMLName   xml.Name `xml:"svg"`
				Title     string   `xml:"title"`
				Polylines []struct {
					Class   string `xml:"class,attr"`
					Offload string `xml:"data-offload,attr"`
					Points  string `xml:"points,attr"`
				} `xml:"polyline"`
				Texts []string `xml:"text"`
			}
			if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
				t.Fatalf("SVG is not well-formed XML: %v\n%s", err, b.String())
			}
			var series []string
			for _, p := range doc.Polylines {
				if p.Class == "series" {
					series = append(series, p.Offload)
					if p.Points == "" {
						t.Errorf("series %s has no points", p.Offload)
					}
				}
			}
			if diff := cmp.Diff(tc.want, series); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
			all := strings.Join(doc.Texts, "|")
			for _, s := range []string{"Median Mbit/s", "advertised", "4K", "64K", "RX csum off"} {
				if !strings.Contains(all, s) {
					t.Errorf("no text %q in %s", s, all)
				}
			}
		})
	}
	if _, err := WindowChart(nil); err != ErrNoChartData {
		t.Errorf("chart of nothing: %v, want ErrNoChartData", err)
	}
}

func TestChartPNG(t *testing.T) {
	c, err := WindowChart(gpxeStudy())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.PNG(&b); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != c.W || img.Bounds().Dy() != c.H {
		t.Errorf("size %v, want %dx%d", img.Bounds(), c.W, c.H)
	}
	// Both series colours are painted.
	found := map[record.Offload]bool{}
	for y := 0; y < c.H; y++ {
		for x := 0; x < c.W; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for o, col := range seriesCol {
				if uint8(r>>8) == col.R && uint8(g>>8) == col.G && uint8(bl>>8) == col.B {
					found[o] = true
				}
			}
		}
	}
	if !found[record.OffloadOff] || !found[record.OffloadOn] {
		t.Errorf("series colours painted: %v", found)
	}
	if os.Getenv("PXEPERF_CHART_OUT") != "" { // to look at it
		_ = os.WriteFile(os.Getenv("PXEPERF_CHART_OUT"), data, 0o644)
	}
}

// FuzzParseFilter: the API hands query parameters straight to ParseFilter;
// any input gives a filter or an error, never a panic.
func FuzzParseFilter(f *testing.F) {
	f.Add("zynq1", "*.img", "2h", "rx_offload=off", "10")
	f.Add("", "", "7d", "=", "-1")
	f.Add("", "", "2026-11-30T08:00:00Z", "a=b=c", "x")
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, client, file, since, label, limit string) {
		flt, err := ParseFilter(FilterArgs{Client: client, File: file, Since: since, Labels: []string{label}, Limit: limit}, now)
		if err == nil && flt.Limit < 0 {
			t.Errorf("negative limit %d accepted", flt.Limit)
		}
	})
}

// benchRecords is n fetches over 40 clients, 5 windows, both offloads.
func benchRecords(n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{ID: int64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Proto: "http", Direction: "rx",
			ClientMAC: "52:54:00:00:00:" + string(rune('a'+i%40/10)) + string(rune('0'+i%10)), File: "big.img",
			Bytes: 500e6, Mbps: float64(100 + i%900), Outcome: "ok", WndMax: 4096 << (i % 5), MTU: 1500, LinkMbps: 1000,
			RxCsum: []record.Offload{record.OffloadOff, record.OffloadOn}[i%2]}
	}
	return recs
}

// BenchmarkTables: go test ./report -run - -bench Tables
func BenchmarkTables(b *testing.B) {
	recs := benchRecords(100_000)
	for _, name := range TableNames {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				tb, _ := Build(name, recs)
				if err := Render(io.Discard, tb, Text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Bench records count under the window the client was set to, exactly, even
// when the window it then advertised lands in another power-of-two bucket.
func TestBenchRowsByRequestedWindow(t *testing.T) {
	recs := []record.Record{
		{Outcome: "ok", File: "bench.img", Bytes: 1 << 20, Mbps: 500, WndRequested: 32768, WndMax: 52000, Labels: map[string]string{"rx_offload": "on"}},
		{Outcome: "ok", File: "bench.img", Bytes: 1 << 20, Mbps: 520, WndRequested: 32768, WndMax: 44000, Labels: map[string]string{"rx_offload": "on"}},
		{Outcome: "ok", File: "bench.img", Bytes: 1 << 20, Mbps: 900, WndRequested: 65532, WndMax: 65535, Labels: map[string]string{"rx_offload": "off"}},
		{Outcome: "ok", File: "bench.img", Bytes: 1 << 20, Mbps: 800, WndMax: 47000, Labels: map[string]string{"rx_offload": "off"}}, // served: bucketed
	}
	rows, _, _ := windowOffload(recs, newCounter(Options{}, throughputKinds), newSplitter(Options{}))
	got := map[uint32]int{}
	for _, r := range rows {
		for _, c := range r.Cells {
			got[r.Window] += c.Count
		}
	}
	if diff := cmp.Diff(map[uint32]int{32768: 2, 65532: 1, 65536: 1}, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// TestServersTable groups by site, then server, with distinct clients.
func TestServersTable(t *testing.T) {
	recs := lab()
	for i := range recs {
		recs[i].Server, recs[i].Site = []string{"pxe-a", "pxe-b", "pxe-c"}[i%3], []string{"north", "south", "north"}[i%3]
	}
	tb := servers(recs, mergeAll)
	var got []string
	fetches := map[string]int{}
	for _, r := range tb.Rows { // a row per protocol: sum them
		k := r[0] + "/" + r[1]
		if fetches[k] == 0 {
			got = append(got, k)
		}
		f, _ := strconv.Atoi(r[3])
		fetches[k] += f
	}
	for i, k := range got {
		got[i] = fmt.Sprintf("%s/%d", k, fetches[k])
	}
	n := len(recs)
	want := []string{fmt.Sprintf("north/pxe-a/%d", (n+2)/3), fmt.Sprintf("north/pxe-c/%d", n/3),
		fmt.Sprintf("south/pxe-b/%d", (n+1)/3)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("servers rows (-want +got):\n%s", diff)
	}
	if f, _ := ParseFilter(FilterArgs{Server: " pxe-a ", Site: "north"}, time.Now()); f.Server != "pxe-a" || f.Site != "north" {
		t.Errorf("ParseFilter server/site: %+v", f)
	}
}

// The x axis says what the rows were grouped by: the window bench runs were
// set to is not one a client advertised.
func TestChartAxisSaysWhichWindow(t *testing.T) {
	bench := []record.Record{
		{Source: "bench", Proto: "http", File: "bench.img", Outcome: "ok", Bytes: 1 << 20, Mbps: 500, WndRequested: 16384, WndMax: 30000},
		{Source: "bench", Proto: "http", File: "bench.img", Outcome: "ok", Bytes: 1 << 20, Mbps: 900, WndRequested: 65536, WndMax: 90000},
	}
	c := newCounter(Options{}, throughputKinds)
	if got := windowAxis(bench, c); got != "Window the client was set to (SO_RCVBUF)" {
		t.Errorf("bench axis %q", got)
	}
	if got := windowAxis(gpxeStudy(), c); got != "Window the client advertised" {
		t.Errorf("served axis %q", got)
	}
}

// bench --window auto: autotuning grows the window to different sizes with
// offload on and off; both land in one "auto" row, so the columns compare.
func TestAutoWindowOneRow(t *testing.T) {
	auto := func(off string, wnd uint32, m float64) record.Record {
		return record.Record{Source: "bench", Proto: "http", File: "bench.img", Outcome: "ok", Bytes: 64 << 20, Mbps: m,
			WndMax: wnd, Labels: map[string]string{"window": "auto", "rx_offload": off}}
	}
	recs := []record.Record{auto("on", 3<<20, 9000), auto("off", 700<<10, 4000), auto("off", 900<<10, 4200)}
	recs = append(recs, record.Record{Source: "bench", Proto: "http", File: "bench.img", Outcome: "ok", Bytes: 64 << 20,
		Mbps: 800, WndRequested: 65536, WndMax: 65535, Labels: map[string]string{"window": "64K", "rx_offload": "on"}})
	tb := windowOffloadTable(recs, mergeAll)
	// Text's window cell, then CSV's window (a number) and auto.
	want := [][]string{{"65536", "65536", "", "", "", "800.0", "1"}, {"auto", "", "auto", "4100.0", "2", "9000.0", "1"}}
	if d := cmp.Diff(want, tb.Rows); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
	if _, err := WindowChart(recs); err != nil {
		t.Errorf("chart with an auto row: %v", err)
	}
}
