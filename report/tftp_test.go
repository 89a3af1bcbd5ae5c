package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/internal/golden"
	"github.com/pxeperf/pxeperf/record"
)

// tftpStudy is a blksize x windowsize sweep as pxeperf bench --preset tftp
// stores it (1gbit tbf), plus a served lock-step fetch without options, a
// failed fetch and an HTTP fetch that must stay out.
func tftpStudy() []record.Record {
	var recs []record.Record
	add := func(r record.Record) {
		r.ID = int64(len(recs) + 1)
		r.Time = t0.Add(time.Duration(r.ID) * time.Second)
		if r.Outcome == "" {
			r.Outcome = "ok"
		}
		if r.Proto == "" {
			r.Proto = "tftp"
		}
		r.Direction, r.MTU, r.RateLimit, r.Bytes, r.Size = "rx", 1500, 1e9, 64<<20, 64<<20
		recs = append(recs, r)
	}
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
	return recs
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
	tb := TFTP(tftpStudy())
	want := [][]string{
		{"512", "434.4", "762.7", "922.1"}, // 300 (served, no options) 431.0 437.8 440.2: median of four
		{"1468", "971.4", "975.9", "976.2"},
	}
	if d := cmp.Diff(want, tb.Rows); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	var cols []string
	for _, c := range tb.Columns {
		cols = append(cols, c.Key)
	}
	if d := cmp.Diff([]string{"blksize", "windowsize_1_mbps", "windowsize_4_mbps", "windowsize_16_mbps"}, cols); d != "" {
		t.Errorf("columns (-want +got):\n%s", d)
	}
	if strings.Contains(strings.Join(tb.Notes, " "), "mix") {
		t.Errorf("one MTU and rate, yet a mixing note: %v", tb.Notes)
	}
	mixed := append(tftpStudy(), record.Record{Proto: "tftp", File: "x.img", Outcome: "ok", Bytes: 1, Mbps: 90, BlkSize: 1468, WindowSize: 16, MTU: 1500, RateLimit: 100e6})
	if tb := TFTP(mixed); !strings.Contains(strings.Join(tb.Notes, " "), "mix") {
		t.Errorf("mixed rates without a note: %v", tb.Notes)
	}
}
