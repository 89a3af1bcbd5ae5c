package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/internal/testkit/tablecheck"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/report/reporttest"
)

// reportTextKeys are the report tables' annotation columns and values:
// names, states and times. Anything else in `report --format csv|json`
// must be a number.
var reportTextKeys = []string{"source", "iface", "traffic", "proto", "direction", "client", "host", "ip", "site", "server",
	"last", "time", "file", "kind", "outcome", "err", "arch", "link", "window_auto", "window_as_printed", "setting",
	"published_range", "rx_offload", "rx_csum", "labels", "client_mac", "client_ip", "link_driver"}

// mixedStore is a store holding report's labs: served fetches over a
// bridge and a veth, the bench at two MTUs and tbf rates, iperf3 -R,
// U-Boot's TFTP, the gPXE grid, a failed fetch, and a fetch with interval
// samples (its ID is returned).
func mixedStore(t *testing.T) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	st, err := record.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, r := range append(reporttest.Lab(), reporttest.CompareLab()...) {
		r.ID = 0
		if _, err := st.Add(ctx, &r, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, ivs := reporttest.FetchWithIntervals()
	r.ID = 0
	for i := range ivs {
		ivs[i].RecordID = 0
	}
	id, err := st.Add(ctx, &r, ivs)
	if err != nil {
		t.Fatal(err)
	}
	return dir, id
}

// TestReportCSVJSONNumbers: every `pxeperf report` output (each --table,
// --compare KEY, --intervals, --netperf) in CSV and JSON on a store of
// mixed records: each number column parses as a number in every row
// (encoding/csv + strconv; encoding/json: no string where a number goes),
// annotations have columns of their own, and a median has a count.
func TestReportCSVJSONNumbers(t *testing.T) {
	dir, id := mixedStore(t)
	type run struct {
		name string
		args []string
	}
	var runs []run
	for _, tb := range report.TableNames {
		runs = append(runs, run{tb, []string{"--table", tb}})
	}
	for _, k := range report.StudyKeys() {
		runs = append(runs, run{"compare-" + k, []string{"--compare", k}})
	}
	ids := strconv.FormatInt(id, 10)
	runs = append(runs, run{"intervals", []string{"--intervals", ids}}, run{"netperf", []string{"--netperf", ids}})
	for _, r := range runs {
		for _, f := range []string{"csv", "json"} {
			t.Run(r.name+"."+f, func(t *testing.T) {
				args := append([]string{"report", "--data", dir, "--format", f}, r.args...)
				code, out := pxeperf(args...)
				if code != 0 {
					t.Fatalf("pxeperf %s: exit %d\n%s", strings.Join(args, " "), code, out)
				}
				if f == "csv" {
					head, rows := tablecheck.CSV(t, r.name, []byte(out), reportTextKeys)
					if len(rows) == 0 {
						t.Fatalf("no rows:\n%s", out)
					}
					if r.name != "fetches" && r.name != "intervals" && r.name != "netperf" {
						tablecheck.Counted(t, r.name, head)
					}
					return
				}
				if rows := tablecheck.JSON(t, r.name, []byte(out), reportTextKeys); len(rows) == 0 {
					t.Fatalf("no rows:\n%s", out)
				}
			})
		}
	}
}
