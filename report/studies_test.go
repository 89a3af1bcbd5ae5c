package report

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/record"
)

func TestCompareGPXE(t *testing.T) {
	recs := []record.Record{
		{Proto: "http", Outcome: "ok", Bytes: 1 << 25, Mbps: 140, WndRequested: 4096, MTU: 1500, RateLimit: 1e9, Labels: map[string]string{"rx_offload": "on", "delay": "100us"}},
		{Proto: "http", Outcome: "ok", Bytes: 1 << 25, Mbps: 130, WndRequested: 4096, MTU: 1500, RateLimit: 1e9, Labels: map[string]string{"rx_offload": "off", "delay": "100us"}},
		{Proto: "http", Outcome: "ok", Bytes: 1 << 25, Mbps: 250, WndRequested: 6144, MTU: 1500, RateLimit: 1e9, Labels: map[string]string{"rx_offload": "on", "delay": "100us"}},
		{Proto: "tcp", Outcome: "ok", Bytes: 1 << 25, Mbps: 900, MTU: 1500, Direction: "tx"}, // not a fetch of the grid
	}
	tb, err := CompareWith("gpxe-2010", recs, mergeAll)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != 19 {
		t.Fatalf("%d rows, want the study's 19", len(tb.Rows))
	}
	want := [][]string{
		{"4096", "4096", "4096", "136", "130.0", "1", "96", "136", "140.0", "1", "103"},
		{"5120", "5120", "5120", "200", "", "", "", "208", "", "", ""},
		{"6144 (6114)", "6144", "6114", "224", "", "", "", "264", "250.0", "1", "95"},
	}
	if d := cmp.Diff(want, tb.Rows[:3]); d != "" {
		t.Errorf("first rows (-want +got):\n%s", d)
	}
	if got := tb.Rows[14]; got[0] != "20480" || got[3] != "" || got[7] != "824" {
		t.Errorf("20480 row %q: want an empty published off cell and 824 on", got)
	}
	if notes := strings.Join(tb.Notes, "\n"); !strings.Contains(notes, "added one-way delay 100us") || !strings.Contains(notes, "500 MB image") {
		t.Errorf("notes lack the conditions of each side:\n%s", notes)
	}
}

// TestCompareEveryStudy: every key renders from the embedded CSVs, with
// and without measured records.
func TestCompareEveryStudy(t *testing.T) {
	for _, s := range Studies {
		tb, err := Compare(s.Key, nil)
		if err != nil {
			t.Fatalf("%s: %v", s.Key, err)
		}
		if len(tb.Rows) == 0 {
			t.Errorf("%s: no published rows", s.Key)
		}
		var b strings.Builder
		if err := Render(&b, tb, Text); err != nil {
			t.Errorf("%s: %v", s.Key, err)
		}
		// CSV: "95%", "47.0-536.0" and "6144 (6114)" are text; each
		// number column holds numbers.
		head, rows := csvRows(t, tb)
		for _, row := range rows {
			for _, k := range head {
				if v := row[k]; v != "" && k != "setting" && k != "window_as_printed" {
					if _, err := strconv.ParseFloat(v, 64); err != nil {
						t.Errorf("%s: column %s: %q is not a number", s.Key, k, v)
					}
				}
			}
		}
	}
	if _, err := Compare("nope", nil); err == nil || !strings.Contains(err.Error(), "gpxe-2010") {
		t.Errorf("unknown key: %v, want the list of keys", err)
	}
}
