package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/internal/testkit/golden"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report/reporttest"
)

// tftpStudy is a blksize x windowsize sweep as pxeperf bench --preset tftp
// stores it (1gbit tbf), plus a served lock-step fetch without options, a
// failed fetch and an HTTP fetch that must stay out.
func tftpStudy() []record.Record {
	b := &reporttest.Builder{Step: time.Second, Fill: func(r *record.Record) {
		if r.Proto == "" {
			r.Proto = "tftp"
		}
		r.Direction, r.MTU, r.RateLimit, r.Bytes, r.Size = "rx", 1500, 1e9, 64<<20, 64<<20
	}}
	add := b.Add
	for _, c := range []struct {
		blk, win int
		mbps     []float64
	}{
		{512, 1, []float64{437.8, 431.0, 440.2}}, {512, 4, []float64{762.7}}, {512, 16, []float64{922.4, 921.9}},
		{1468, 1, []float64{971.4}}, {1468, 4, []float64{975.9}}, {1468, 16, []float64{976.2, 975.0, 976.4}},
	} {
		for _, m := range c.mbps {
			add(record.Record{Source: "bench", File: "bench.img", BlkSize: c.blk, WindowSize: c.win, TSize: true, Mbps: m,
				Duration: time.Duration(float64(64<<23) / (m * 1e6) * float64(time.Second))})
		}
	}
	add(record.Record{Source: "serve", File: "pxelinux.0", Mbps: 300}) // no options: 512 x 1
	add(record.Record{Source: "bench", File: "bench.img", BlkSize: 1468, WindowSize: 64, Outcome: "error", Mbps: 5})
	add(record.Record{Source: "bench", Proto: "http", File: "bench.img", Mbps: 940, WndMax: 65535})
	return b.Recs
}

func TestTFTPGolden(t *testing.T) {
	tb := TFTP(tftpStudy())
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			var b bytes.Buffer
			if err := Render(&b, tb, f); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "tftp-study."+ext[f]), b.Bytes())
		})
	}
}

func TestTFTPCells(t *testing.T) {
	// Merged: the served lock-step fetch joins the bench's 512 x 1 cell.
	_, rows := csvRows(t, tftpTable(tftpStudy(), mergeAll))
	var got [][]string
	for _, r := range rows {
		got = append(got, []string{r["blksize"], r["windowsize_1_mbps"], r["windowsize_4_mbps"], r["windowsize_16_mbps"],
			r["windowsize_1_count"], r["windowsize_16_count"]})
	}
	want := [][]string{
		{"512", "434.4", "762.7", "922.1", "4", "2"}, // 300 (served, no options) 431.0 437.8 440.2: median of four
		{"1468", "971.4", "975.9", "976.2", "1", "3"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("merged (-want +got):\n%s", d)
	}
	// Split (the default): the served fetch has a row of its own.
	_, rows = csvRows(t, TFTP(tftpStudy()))
	got = nil
	for _, r := range rows {
		got = append(got, []string{r["source"], r["blksize"], r["windowsize_1_mbps"], r["windowsize_1_count"]})
	}
	if d := cmp.Diff([][]string{{"serve", "512", "300.0", "1"}, {"bench", "512", "437.8", "3"}, {"bench", "1468", "971.4", "1"}}, got); d != "" {
		t.Errorf("split (-want +got):\n%s", d)
	}
	if strings.Contains(strings.Join(TFTP(tftpStudy()).Notes, " "), "mix MTUs") {
		t.Errorf("one MTU and rate, yet a mixing note: %v", TFTP(tftpStudy()).Notes)
	}
	mixed := append(tftpStudy(), record.Record{Proto: "tftp", File: "x.img", Outcome: "ok", Bytes: 1, Mbps: 90, BlkSize: 1468, WindowSize: 16, MTU: 1500, RateLimit: 100e6})
	if tb := TFTP(mixed); strings.Contains(strings.Join(tb.Notes, " "), "mix MTUs") {
		t.Errorf("split rows, yet a mixing note: %v", tb.Notes)
	}
	if tb := tftpTable(mixed, mergeAll); !strings.Contains(strings.Join(tb.Notes, " "), "mix MTUs") {
		t.Errorf("merged rates without a note: %v", tb.Notes)
	}
}
