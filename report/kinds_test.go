package report

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report/reporttest"
)

// scriptsAndImages is issue 10's lab: two 361-byte boot.ipxe fetches at
// 6 Mbit/s, a probe of / and a 404 beside 5-13 Gbit/s image fetches.
func scriptsAndImages() []record.Record {
	b := &reporttest.Builder{Step: time.Second, Fill: func(r *record.Record) {
		r.Source, r.Proto, r.Direction, r.ClientIP, r.ClientMAC = "serve", "http", "rx", "10.0.0.2", "52:54:00:00:00:02"
	}}
	add := b.Add
	for range 2 {
		add(record.Record{File: "boot.ipxe", Kind: record.KindConfig, Bytes: 361, Size: 361, Mbps: 6.3, WndMax: 65535,
			Labels: map[string]string{"rx_offload": "off"}})
	}
	add(record.Record{File: "", Bytes: 19, Mbps: 0.1, WndMax: 65535})
	add(record.Record{File: "nope", Outcome: "not-found", WndMax: 65535})
	for _, m := range []float64{5000, 9000, 13000} {
		add(record.Record{File: "vmlinuz", Bytes: 8 << 20, Size: 8 << 20, Mbps: m, WndMax: 4 << 20,
			Labels: map[string]string{"rx_offload": "off"}})
	}
	return b.Recs
}

// mergeAll lets rows share every split key: the tests of something else
// than the split see the table's own axes only.
var mergeAll = Options{Merge: Splits}

func TestThroughputCountsImages(t *testing.T) {
	recs := scriptsAndImages()
	wo := windowOffloadTable(recs, mergeAll)
	if d := cmp.Diff([][]string{{"4194304", "9000.0", "3", "", ""}}, wo.Rows); d != "" {
		t.Errorf("window-offload rows (-want +got):\n%s", d)
	}
	if !strings.Contains(strings.Join(wo.Notes, "\n"), "3 completed fetch(es) of other kinds left out (config 2, api 1)") {
		t.Errorf("window-offload notes do not say what was left out: %q", wo.Notes)
	}
	cl := clients(recs, mergeAll)
	if got := cl.Rows[0][8]; got != "9000.0" {
		t.Errorf("clients median %s, want 9000.0 (images only)", got)
	}
	if got := cl.Rows[0][4]; got != "7" {
		t.Errorf("clients fetches %s, want 7 (every kind)", got)
	}
	// --kind config: the scripts' own row.
	wo = windowOffloadTable(recs, Options{Kinds: []string{record.KindConfig}, Merge: Splits})
	if d := cmp.Diff([][]string{{"65536", "6.3", "2", "", ""}}, wo.Rows); d != "" {
		t.Errorf("window-offload --kind config rows (-want +got):\n%s", d)
	}
	fe := Fetches(recs)
	var kinds []string
	for _, r := range fe.Rows {
		kinds = append(kinds, r[6])
	}
	if d := cmp.Diff([]string{"image", "image", "image", "error", "api", "config", "config"}, kinds); d != "" {
		t.Errorf("fetches kinds (-want +got):\n%s", d)
	}
}
