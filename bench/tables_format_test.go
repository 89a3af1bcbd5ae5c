package bench

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/golden"
	"github.com/pxeperf/pxeperf/internal/testkit/tablecheck"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// formatSweeps are an HTTP sweep (a 100us delay line that fell behind
// once, an autotuned window), a stream sweep (TCP autotuned and at 256K,
// UDP at 50mbit and line rate, cross-checked, one iperf3 failure) and a
// TFTP sweep, at 1gbit and unlimited: every kind of cell the bench's own
// tables print.
func formatSweeps() map[string]struct {
	spec    Spec
	results []Result
} {
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	rec := func(p Point, mbps float64) record.Record {
		return record.Record{Time: t0.Add(time.Duration(p.Index) * time.Second), Source: "bench", Proto: p.Proto, Direction: p.Direction,
			ClientIP: "10.99.0.2", File: "bench.img", Bytes: 64 << 20, Size: 64 << 20, Mbps: mbps, Outcome: "ok",
			Duration: time.Duration(float64(64<<23) / (mbps * 1e6) * float64(time.Second)), MTU: p.MTU, RateLimit: int64(p.Rate),
			Iface: "pxl-client", LinkMbps: 10000, LinkDriver: "veth", RxCsum: record.OffloadOn, WndRequested: uint32(p.Window),
			Labels: map[string]string{"rx_offload": "on"}}
	}
	var http []Result
	for i, c := range []struct {
		win    int
		rate   uint64
		mbps   float64
		behind bool
	}{{4096, 1e9, 120, false}, {4096, 1e9, 130, true}, {WindowAuto, 1e9, 930, false}, {WindowAuto, 0, 9400, false}} {
		p := Point{Index: i, Proto: "http", Window: c.win, Offload: true, MTU: 1500, Rate: c.rate, Delay: 100 * time.Microsecond, Size: 64 << 20, Rep: 1 + i%2}
		r := Result{Point: p, Rcvbuf: 2 * c.win, Record: rec(p, c.mbps)}
		r.Record.WndMax, r.Record.MinRTT = 4096, 210*time.Microsecond
		if c.win == WindowAuto {
			r.Record.WndMax = 3 << 20
		}
		r.Record.DelayFrames, r.Record.DelayP99, r.Record.DelayBehind = 4000, 180*time.Microsecond, c.behind
		r.Record.Labels["delay"] = "100us"
		http = append(http, r)
	}
	var streams []Result
	for i, c := range []struct {
		proto, dir string
		win        int
		udp        uint64
		mbps       float64
		iperf      float64
		err        string
	}{{ProtoTCP, "rx", WindowAuto, 0, 941, 940, ""}, {ProtoTCP, "rx", WindowAuto, 0, 939, 0, "iperf3: exit 1"},
		{ProtoTCP, "tx", 256 << 10, 0, 935, 990, ""}, {ProtoUDP, "tx", 0, 50e6, 49.9, 50, ""}, {ProtoUDP, "rx", 0, UDPRateLine, 810, 802, ""}} {
		p := Point{Index: i, Proto: c.proto, Direction: c.dir, Window: c.win, MTU: 1500, Rate: 1e9, Duration: 5 * time.Second, UDPRate: c.udp, Rep: 1 + i%2}
		r := Result{Point: p, Record: rec(p, c.mbps)}
		r.Record.File, r.Record.Retransmits = "stream", 3
		r.Record.Iperf3Mbps, r.Record.Iperf3Err = c.iperf, c.err
		if c.iperf > 0 {
			r.Record.Iperf3DevPct = (c.mbps - c.iperf) / c.iperf * 100
			if r.Record.Iperf3DevPct < 0 {
				r.Record.Iperf3DevPct = -r.Record.Iperf3DevPct
			}
		}
		if c.proto == ProtoUDP {
			r.Record.UDPLostPct, r.Record.JitterMs, r.Record.Iperf3LostPct = 0.12, 0.034, 0.2
		}
		streams = append(streams, r)
	}
	var tftp []Result
	for i, c := range []struct {
		win  int
		mbps float64
		ok   bool
	}{{1, 80, true}, {16, 610, true}, {16, 650, true}, {16, 0, false}} {
		p := Point{Index: i, Proto: ProtoTFTP, MTU: 1500, Rate: 1e9, BlkSize: 1468, WindowSize: c.win, Offload: true, Size: 16 << 20, Rep: 1 + i}
		r := Result{Point: p, Record: rec(p, max(c.mbps, 1))}
		r.Record.BlkSize, r.Record.WindowSize, r.Record.Datagrams, r.Record.CPU = 1468, c.win, 11430, 40*time.Millisecond
		if !c.ok {
			r.Record.Outcome, r.Record.Mbps = "timeout", 0
		}
		tftp = append(tftp, r)
	}
	return map[string]struct {
		spec    Spec
		results []Result
	}{
		"http":   {Spec{Proto: "http", Windows: []int{4096, WindowAuto}, Offloads: []bool{true}, MTUs: []int{1500}, Rates: []uint64{1e9, 0}, Delays: []time.Duration{100 * time.Microsecond}, Repeat: 2}, http},
		"stream": {Spec{Proto: ProtoStream, Streams: []string{ProtoTCP, ProtoUDP}, Directions: []string{"tx", "rx"}, MTUs: []int{1500}, Rates: []uint64{1e9}, Windows: []int{WindowAuto, 256 << 10}, UDPRates: []uint64{50e6, UDPRateLine}, Repeat: 2}, streams},
		"tftp":   {Spec{Proto: ProtoTFTP, MTUs: []int{1500}, Rates: []uint64{1e9}, BlkSizes: []int{1468}, WindowSizes: []int{1, 16}, Repeat: 3}, tftp},
	}
}

// textKeys are the bench tables' annotation columns: anything else in
// their CSV or JSON must be a number.
var textKeys = []string{"proto", "direction", "setting", "rx_offload", "window_auto", "point", "err", "over_bound",
	"udp_line_rate", "source", "iface", "traffic", "file", "kind", "outcome", "client", "host", "ip", "last", "time",
	"link", "window_as_printed", "cells"}

// TestBenchTablesNumbers: what `pxeperf bench` prints at the end of each
// sweep (Tables), in CSV and JSON: every number column holds numbers (no
// "1gbit", "256K", "90.0-96.0", "100us" or quoted figures), the
// annotations have columns of their own, and every median has a count.
// The CSV and JSON are goldens; text and Markdown render too.
func TestBenchTablesNumbers(t *testing.T) {
	for name, sw := range formatSweeps() {
		tables := Tables(sw.results, sw.spec, "20261202T050000Z", false)
		if len(tables) < 2 {
			t.Fatalf("%s: %d tables", name, len(tables))
		}
		for _, tb := range tables {
			for _, f := range report.Formats {
				var b bytes.Buffer
				if err := report.Render(&b, tb, f); err != nil {
					t.Fatalf("%s %s %s: %v", name, tb.Name, f, err)
				}
				id := name + " " + tb.Name + " " + string(f)
				switch f {
				case report.CSV:
					head, rows := tablecheck.CSV(t, id, b.Bytes(), textKeys)
					if len(rows) == 0 {
						t.Errorf("%s: no rows", id)
					}
					tablecheck.Counted(t, id, head)
				case report.JSON:
					tablecheck.JSON(t, id, b.Bytes(), textKeys)
				default:
					continue
				}
				golden.Check(t, filepath.Join("testdata", "tables-"+name+"-"+tb.Name+"."+string(f)), b.Bytes())
			}
		}
	}
}
