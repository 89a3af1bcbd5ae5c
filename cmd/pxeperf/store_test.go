package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/api"
	"github.com/pxeperf/pxeperf/internal/testkit/golden"
	"github.com/pxeperf/pxeperf/internal/testkit/pgtest"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// pxeperf runs the CLI in-process and returns its exit code and output.
func pxeperf(args ...string) (int, string) {
	var out bytes.Buffer
	code := run(args, &out, &out)
	return code, out.String()
}

// twoLabRecords are the records of two servers at two sites: HTTP with
// windows and offload labels (some with intervals), TFTP, a failure.
func twoLabRecords(t *testing.T, dir string) {
	t.Helper()
	st, err := record.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range 36 {
		server, site := []string{"pxe-north", "pxe-south"}[i%2], []string{"north", "south"}[i%2]
		r := record.Record{
			Time: t0.Add(time.Duration(i) * 37 * time.Second), Source: "serve", Proto: "http", Direction: "rx",
			ClientMAC: fmt.Sprintf("52:54:00:00:%02x:%02x", i%2, i%5), ClientIP: fmt.Sprintf("10.%d.0.%d", i%2, 10+i%5),
			Host: fmt.Sprintf("board%d", i%5), File: "vmlinuz", Bytes: 50e6, Size: 50e6, Outcome: "ok",
			Labels: map[string]string{"rx_offload": []string{"on", "off"}[i%3%2], "fw": "ipxe-1.21"},
			WndMax: []uint32{8192, 16384, 65535}[i%3], RTT: 400 * time.Microsecond, MSS: 1448, PMTU: 1500,
			MTU: []int{1500, 9000}[i%4/2], LinkMbps: []int{1000, 100}[i%5/4], RxCsum: record.OffloadOn,
			Iface: "eth0", Kernel: "6.1.0", Server: server, Site: site,
			Duration: time.Duration(400+i*13) * time.Millisecond,
		}
		r.Mbps = float64(r.Bytes) * 8 / r.Duration.Seconds() / 1e6
		var ivs []record.Interval
		if i%4 == 0 {
			for k := range 3 {
				ivs = append(ivs, record.Interval{Start: time.Duration(k) * 100 * time.Millisecond,
					End: time.Duration(k+1) * 100 * time.Millisecond, Bytes: int64(1e6 * (k + 1)), Cwnd: 14480, RTT: 420 * time.Microsecond})
			}
		}
		if i%6 == 5 {
			r.Proto, r.File, r.BlkSize, r.WindowSize, r.TSize, r.Datagrams = "tftp", "undionly.kpxe", 1468, []int{1, 8}[i%2], true, 700
			r.WndMax, r.Acked = 0, 700
		}
		if i == 7 {
			r.Outcome, r.Err, r.Bytes, r.Mbps = "aborted", "client went away", 1e6, 0
		}
		if _, err := st.Add(context.Background(), &r, ivs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReportPostgresMatchesSQLite: a SQLite store moved with `store copy`
// (twice: the second adds nothing) into PostgreSQL prints every report
// table, in every format, exactly as the SQLite store does, and the text
// tables match testdata/store_report.txt.
func TestReportPostgresMatchesSQLite(t *testing.T) {
	c := pgtest.Start(t)
	url := c.NewDB(t)
	data := t.TempDir()
	twoLabRecords(t, data)

	if code, out := pxeperf("store", "migrate", "--store", url); code != 0 || !strings.Contains(out, fmt.Sprintf("schema version %d", record.SchemaVersion)) {
		t.Fatalf("store migrate: %d %s", code, out)
	}
	for range 2 {
		code, out := pxeperf("store", "copy", "--from", "sqlite:"+data, "--to", url, "--batch", "10")
		if code != 0 || !strings.Contains(out, "copied 36 records") {
			t.Fatalf("store copy: %d %s", code, out)
		}
	}
	if n := pgtest.Count(t, url, "SELECT count(*) FROM records"); n != 36 {
		t.Fatalf("%d records in PostgreSQL after two copies, want 36", n)
	}
	var reports strings.Builder
	type variant struct {
		name string
		args []string
	}
	var vs []variant
	for _, tb := range report.TableNames {
		for _, f := range report.Formats {
			vs = append(vs, variant{tb + "." + string(f), []string{"--table", tb, "--format", string(f)}})
		}
	}
	vs = append(vs,
		variant{"intervals", []string{"--intervals", "5"}},
		variant{"netperf", []string{"--netperf", "5"}},
		variant{"site north", []string{"--table", "clients", "--site", "north"}},
		variant{"server south", []string{"--table", "fetches", "--server", "pxe-south", "--limit", "5"}},
		variant{"glob", []string{"--table", "fetches", "--file", "undi*.kpxe"}},
		variant{"label", []string{"--table", "window-offload", "--label", "rx_offload=off"}},
	)
	for _, v := range vs {
		codeS, sq := pxeperf(append([]string{"report", "--data", data}, v.args...)...)
		codeP, pg := pxeperf(append([]string{"report", "--store", url}, v.args...)...)
		if codeS != 0 || codeP != 0 {
			t.Fatalf("%s: exit %d / %d\n%s\n%s", v.name, codeS, codeP, sq, pg)
		}
		if d := cmp.Diff(sq, pg); d != "" {
			t.Errorf("%s: sqlite -> postgres (-+):\n%s", v.name, d)
		}
		if !strings.Contains(v.name, ".") || strings.HasSuffix(v.name, ".text") {
			fmt.Fprintf(&reports, "== pxeperf report %s\n%s\n", strings.Join(v.args, " "), pg)
		}
	}
	golden.Check(t, filepath.Join("testdata", "store_report.txt"), []byte(reports.String()))

	// The record API answers the same from both stores, filtered by site
	// and server.
	var bodies []string
	for _, open := range []func() (*record.Store, error){
		func() (*record.Store, error) { return record.OpenReadOnly(data) },
		func() (*record.Store, error) { return openStoreReadOnly(context.Background(), url, "") },
	} {
		st, err := open()
		if err != nil {
			t.Fatal(err)
		}
		h := api.New(st, nil, api.Limits{})
		var b strings.Builder
		for _, q := range []string{"/api/fetches?site=north&limit=4", "/api/fetches?server=pxe-south&file=undi*",
			"/api/report?table=servers", "/api/fetches/5/intervals"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", q, nil))
			fmt.Fprintf(&b, "%s %d %s %s\n", q, rec.Code, rec.Header().Get("Link"), rec.Body.String())
		}
		st.Close()
		bodies = append(bodies, b.String())
	}
	if d := cmp.Diff(bodies[0], bodies[1]); d != "" || !strings.Contains(bodies[1], `"site": "north"`) {
		t.Errorf("API: sqlite -> postgres (-+):\n%s\n%s", d, bodies[1])
	}

	// A newer schema is refused by report, with the reason.
	pgtest.Exec(t, url, "INSERT INTO schema_migrations VALUES ($1, 'future', 0)", record.SchemaVersion+1)
	if code, out := pxeperf("report", "--store", url); code != 1 || !strings.Contains(out, "newer") {
		t.Errorf("report on a newer schema: exit %d\n%s", code, out)
	}
}
