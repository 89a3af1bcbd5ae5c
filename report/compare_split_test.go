package report

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/internal/testkit/golden"
)

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
