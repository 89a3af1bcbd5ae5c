package report

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/internal/golden"
	"github.com/pxeperf/pxeperf/record"
)

// compareLab is issue 28's lab plus what the study grids measure: bench
// TCP streams both ways over the testbed's veth and through a 1gbit tbf,
// beside the board's iperf3 -R over its own veth, and bench HTTP fetches
// at gPXE's 4096-byte window over both links.
func compareLab() []record.Record {
	recs := issue28()
	add := func(r record.Record) {
		r.ID = int64(len(recs) + 1)
		r.Time = t0.Add(time.Duration(r.ID) * time.Minute)
		r.Outcome, r.Bytes, r.Size, r.ClientIP, r.Iface, r.LinkMbps, r.LinkDriver = "ok", 1<<30, 1<<30, "10.99.0.2", "pxl-client", 10000, "veth"
		if r.MTU == 0 {
			r.MTU = 1500
		}
		r.Duration = time.Duration(float64(r.Bytes*8) / (r.Mbps * 1e6) * float64(time.Second))
		recs = append(recs, r)
	}
	for _, m := range []float64{11800, 12200} {
		add(record.Record{Source: "bench", Proto: "tcp", Direction: "rx", File: "stream", Mbps: m})
	}
	add(record.Record{Source: "bench", Proto: "tcp", Direction: "rx", File: "stream", Mbps: 941, RateLimit: 1e9})
	add(record.Record{Source: "bench", Proto: "tcp", Direction: "tx", File: "stream", Mbps: 940, RateLimit: 1e9})
	add(record.Record{Source: "bench", Proto: "tcp", Direction: "rx", File: "stream", Mbps: 94.1, RateLimit: 100e6})
	for _, c := range []struct {
		rate int64
		off  string
		mbps float64
	}{{0, "on", 1510}, {0, "off", 1490}, {1e9, "on", 136}, {1e9, "off", 131}} {
		add(record.Record{Source: "bench", Proto: "http", Direction: "rx", File: "bench.img", Mbps: c.mbps, RateLimit: c.rate,
			WndRequested: 4096, Labels: map[string]string{"rx_offload": c.off}})
	}
	return recs
}

// TestCompareSplitGolden: every study's comparison of compareLab in every
// format; a published row gets a measured row per source and link.
func TestCompareSplitGolden(t *testing.T) {
	for _, s := range Studies {
		tb, err := Compare(s.Key, compareLab())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range Formats {
			t.Run(s.Key+"."+string(f), func(t *testing.T) {
				var b bytes.Buffer
				if err := Render(&b, tb, f); err != nil {
					t.Fatal(err)
				}
				golden.Check(t, filepath.Join("testdata", "compare-"+s.Key+"."+ext[f]), b.Bytes())
			})
		}
	}
}

// TestCompareSplitCells: Xilinx's "TCP rx MTU 1500" was one measured cell
// over the bench's veth (11800, 12200), its 1gbit tbf (941), its 100M tbf
// and the board's iperf3 -R (13657, 13702): a median of 11800 n=6 that no
// setup ran at. Now a row each, with its n; gPXE's 4096 window the same.
func TestCompareSplitCells(t *testing.T) {
	type cell struct {
		Setting, Source, Link string
		Measured              string
		N                     string
	}
	var got []cell
	tb, err := Compare("xilinx", compareLab())
	if err != nil {
		t.Fatal(err)
	}
	_, rows := csvRows(t, tb)
	for _, r := range rows {
		if r["setting"] == "TCP rx MTU 1500" {
			got = append(got, cell{r["setting"], r["source"], r["link_mbps"] + " " + r["link_note"], r["measured_mbps"], r["n"]})
		}
	}
	want := []cell{
		{"TCP rx MTU 1500", "bench", "1000 tbf", "941.0", "1"},
		{"TCP rx MTU 1500", "bench", "100 tbf", "94.1", "1"},
		{"TCP rx MTU 1500", "bench", " veth", "12000.0", "2"},
		{"TCP rx MTU 1500", "iperf3", " veth", "13679.5", "2"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("xilinx TCP rx MTU 1500 (-want +got):\n%s", d)
	}

	tb, err = Compare("gpxe-2010", compareLab())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tb.Data)
	if err != nil {
		t.Fatal(err)
	}
	var js []struct {
		Window   int      `json:"window"`
		Source   string   `json:"source"`
		LinkMbps float64  `json:"link_mbps"`
		PubOff   *float64 `json:"published_off_mbps"`
		Off      float64  `json:"measured_off_mbps"`
		NOff     int      `json:"n_off"`
		On       float64  `json:"measured_on_mbps"`
		NOn      int      `json:"n_on"`
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	var w4096 []string
	for _, r := range js {
		if r.Window == 4096 {
			pub := "nil"
			if r.PubOff != nil {
				pub = mbps(*r.PubOff)
			}
			w4096 = append(w4096, r.Source+" "+num(r.LinkMbps)+" pub "+pub+" off "+mbps(r.Off)+"/"+countCell(r.NOff)+" on "+mbps(r.On)+"/"+countCell(r.NOn))
		}
	}
	if d := cmp.Diff([]string{"bench 1000 pub 136.0 off 131.0/1 on 136.0/1", "bench  pub 136.0 off 1490.0/1 on 1510.0/1"}, w4096); d != "" {
		t.Errorf("gpxe 4096 rows (-want +got):\n%s", d)
	}
}
