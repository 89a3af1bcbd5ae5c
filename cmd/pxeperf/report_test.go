package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/tablecheck"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/report/reporttest"
)

// runReportCmd runs `pxeperf report ARGS...` in-process; stdout and stderr
// apart.
func runReportCmd(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	return runCmdSplit(t, append([]string{"report"}, args...)...)
}

// seedStore writes gPXE-study-like fetches into a real record store under
// dir and returns it still open (as a running serve holds it), and the ID
// of a fetch with interval samples.
func seedStore(t *testing.T, dir string) (*record.Store, int64) {
	t.Helper()
	st, err := record.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	var withIntervals int64
	for i, c := range []struct {
		wnd  uint32
		off  string
		mbps float64
	}{{16384, "off", 528}, {16384, "on", 696}, {65532, "off", 536}, {65532, "on", 896}, {65532, "on", 900}} {
		r := &record.Record{Time: t0.Add(time.Duration(i) * time.Minute), Source: "serve", Proto: "http", Direction: "rx",
			ClientMAC: "52:54:00:12:34:56", ClientIP: "192.168.50.101", Host: "zynq1", File: "big.img",
			Bytes: 500e6, Size: 500e6, Duration: time.Duration(4e9 / c.mbps * float64(time.Second)), Mbps: c.mbps,
			Outcome: "ok", Labels: map[string]string{"rx_offload": c.off}, WndMax: c.wnd, MSS: 1448, MTU: 1500, LinkMbps: 1000}
		var ivs []record.Interval
		if i == 0 {
			ivs = []record.Interval{
				{Start: 0, End: time.Second, Bytes: 66e6, Cwnd: 14480},
				{Start: time.Second, End: 2 * time.Second, Bytes: 66e6, Retransmits: 1, Cwnd: 28960},
			}
		}
		id, err := st.Add(ctx, r, ivs)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			withIntervals = id
		}
	}
	return st, withIntervals
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	st, ivID := seedStore(t, dir)

	out, _, err := runReportCmd(t, "--data", dir, "--table", "window-offload")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Window (bytes)  RX csum off  n  RX csum on  n", "16384        528.0  1       696.0  1",
		"65536        536.0  1       898.0  2"} {
		if !strings.Contains(out, want) {
			t.Errorf("window-offload lacks %q:\n%s", want, out)
		}
	}

	// A record written while the table is read (serve running) shows up.
	if _, err := st.Add(context.Background(), &record.Record{Time: time.Now().UTC(), Proto: "tftp", Direction: "rx",
		ClientMAC: "52:54:00:aa:bb:01", ClientIP: "192.168.50.102", File: "ipxe.efi", Bytes: 1 << 20, Duration: time.Second,
		Mbps: 8.4, Outcome: "ok", BlkSize: 1468}, nil); err != nil {
		t.Fatal(err)
	}
	out, _, err = runReportCmd(t, "--data", dir, "--format", "json")
	var clients struct {
		Table string `json:"table"`
		Rows  []struct {
			Client  string `json:"client"`
			Fetches int    `json:"fetches"`
		} `json:"rows"`
	}
	if err != nil || json.Unmarshal([]byte(out), &clients) != nil || clients.Table != "clients" || len(clients.Rows) != 2 ||
		clients.Rows[0].Client != "52:54:00:aa:bb:01" || clients.Rows[1].Fetches != 5 {
		t.Errorf("clients json (%v):\n%s", err, out)
	}

	// Filters narrow the table.
	out, _, err = runReportCmd(t, "--data", dir, "--table", "fetches", "--label", "rx_offload=on", "--since", "2h", "--format", "csv")
	if err != nil || strings.Count(out, "\n") != 4 || strings.Contains(out, "528.0") {
		t.Errorf("fetches with rx_offload=on (%v):\n%s", err, out)
	}
	out, errOut, err := runReportCmd(t, "--data", dir, "--client", "nobody", "--format", "csv")
	if err != nil || !strings.Contains(errOut, "No fetches match") || strings.Count(out, "\n") != 1 {
		t.Errorf("no match (%v): stdout %q stderr %q", err, out, errOut)
	}
	// Boot binaries are not images: a throughput table leaves them out and
	// says so, unless --kind asks for them.
	out, _, _ = runReportCmd(t, "--data", dir, "--table", "linkspeed", "--file", "*.efi")
	if !strings.Contains(out, "1 completed fetch(es) of other kinds left out (boot 1)") || strings.Contains(out, "8.4") {
		t.Errorf("linkspeed of *.efi without --kind:\n%s", out)
	}
	out, _, _ = runReportCmd(t, "--data", dir, "--table", "linkspeed", "--file", "*.efi", "--kind", "boot")
	if !strings.Contains(out, "unknown") || !strings.Contains(out, "8.4") || strings.Contains(out, "536") {
		t.Errorf("linkspeed of *.efi --kind boot:\n%s", out)
	}
	out, _, _ = runReportCmd(t, "--data", dir, "--table", "fetches", "--min-size", "2M", "--format", "csv")
	if strings.Contains(out, "ipxe.efi") || strings.Count(out, "\n") != 6 {
		t.Errorf("fetches --min-size 2M:\n%s", out)
	}

	out, _, err = runReportCmd(t, "--data", dir, "--intervals", itoa(ivID))
	if err != nil || !strings.Contains(out, "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd") ||
		!strings.Contains(out, "  1.00-2.00   sec  62.9 MBytes   528 Mbits/sec    1   28.3 KBytes") ||
		!strings.Contains(out, "sender") || !strings.Contains(out, "receiver") {
		t.Errorf("--intervals (%v):\n%s", err, out)
	}
	out, _, err = runReportCmd(t, "--data", dir, "--netperf", itoa(ivID))
	if err != nil || !strings.Contains(out, "bytes  bytes   bytes    secs.    10^6bits/sec") || !strings.Contains(out, " 16384      -   1448 ") {
		t.Errorf("--netperf (%v):\n%s", err, out)
	}

	svg := filepath.Join(t.TempDir(), "w.svg")
	if _, errOut, err := runReportCmd(t, "--data", dir, "--chart", svg); err != nil || !strings.Contains(errOut, "wrote") {
		t.Fatalf("--chart svg: %v %s", err, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Polylines []struct {
			Class string `xml:"class,attr"`
		} `xml:"polyline"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("chart: %v", err)
	}
	series := 0
	for _, p := range doc.Polylines {
		if p.Class == "series" {
			series++
		}
	}
	if series != 2 {
		t.Errorf("chart has %d data lines, want 2 (rx offload off and on)", series)
	}
	pngFile := filepath.Join(t.TempDir(), "w.png")
	if _, _, err := runReportCmd(t, "--data", dir, "--chart", pngFile, "--table", "window-offload"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("chart png: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestReportCommandErrors(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir)
	tests := map[string]struct {
		args []string
		want string
	}{
		"label without =":   {[]string{"--label", "rx_offload"}, `label "rx_offload": write key=value`},
		"bad since":         {[]string{"--since", "last week"}, `since "last week": write a duration`},
		"bad format":        {[]string{"--format", "html"}, "use text, markdown, csv or json"},
		"bad table":         {[]string{"--table", "windows"}, "use window-offload, direction-mtu"},
		"chart extension":   {[]string{"--chart", "w.jpg"}, "must end in .svg or .png"},
		"two views":         {[]string{"--table", "clients", "--netperf", "1"}, "give one of --table, --intervals, --netperf and --compare"},
		"unknown record":    {[]string{"--intervals", "999"}, "no such record"},
		"zero id":           {[]string{"--netperf", "0"}, "positive number"},
		"no store":          {[]string{"--data", filepath.Join(dir, "nothing")}, "run pxeperf serve"},
		"chart of nothing":  {[]string{"--chart", filepath.Join(dir, "c.svg"), "--file", "none"}, "nothing to chart"},
		"chart and netperf": {[]string{"--chart", "c.svg", "--netperf", "1"}, "without --intervals or --netperf"},
		"chart of tftp":     {[]string{"--chart", "c.svg", "--table", "tftp"}, "not one of --table tftp"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), "--data") {
				args = append(args, "--data", dir)
			}
			_, _, err := runReportCmd(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// BenchmarkReportCommand: `pxeperf report --table window-offload` over a
// store of 10000 fetches (open, query, table, render).
// go test ./cmd/pxeperf -run - -bench ReportCommand
func BenchmarkReportCommand(b *testing.B) {
	dir := b.TempDir()
	st, err := record.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now().Add(-24 * time.Hour)
	for i := range 10000 {
		r := &record.Record{Time: t0.Add(time.Duration(i) * time.Second), Proto: "http", Direction: "rx",
			ClientMAC: "52:54:00:00:00:" + strconv.Itoa(10+i%40), ClientIP: "192.168.50.101", File: "big.img",
			Bytes: 500e6, Duration: time.Second, Mbps: float64(100 + i%900), Outcome: "ok", WndMax: 4096 << (i % 5),
			Labels: map[string]string{"rx_offload": []string{"on", "off"}[i%2]}}
		if _, err := st.Add(context.Background(), r, nil); err != nil {
			b.Fatal(err)
		}
	}
	for _, table := range []string{"window-offload", "clients"} {
		b.Run(table, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := runReportCmd(b, "--data", dir, "--table", table); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Records a crash left in the journal are announced by report until serve
// imports them (issue 10.5).
func TestReportSaysWhatWaitsInTheJournal(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir)
	line := `{"uid":"left-by-a-crash","record":{"time":"2026-11-30T08:00:00Z","source":"serve","proto":"http","direction":"rx","client_ip":"10.0.0.2","file":"vmlinuz","bytes":1,"size":1,"duration_ns":1,"mbps":8,"outcome":"ok","retransmits":0}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, record.JournalName), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := runReportCmd(t, "--data", dir)
	if err != nil || !strings.Contains(errOut, "1 fetch record(s) wait in "+filepath.Join(dir, record.JournalName)) {
		t.Errorf("report (%v) stderr:\n%s", err, errOut)
	}
}

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
