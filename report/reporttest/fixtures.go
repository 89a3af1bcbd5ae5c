// Package reporttest holds the labs report's tests build their tables
// from, for the tests of the packages that print them (cmd/pxeperf): a
// gPXE study, a mixed lab, issue 28's lab of sources and links no median
// should mix, and the study grids beside it.
package reporttest

import (
	"time"

	"github.com/pxeperf/pxeperf/record"
)

// T0 is the labs' first minute.
var T0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// Builder makes a lab's records one at a time.
type Builder struct {
	Recs []record.Record
	// Step is the time between one record and the next, from T0 on.
	Step time.Duration
	// Fill sets the lab's own defaults on a record before Add numbers it.
	Fill func(*record.Record)
}

// Add appends r with Fill's defaults as the next record: its ID the next
// number, its Time ID steps after T0 unless it has one, its Outcome "ok"
// unless it has one.
func (b *Builder) Add(r record.Record) {
	if b.Fill != nil {
		b.Fill(&r)
	}
	r.ID = int64(len(b.Recs) + 1)
	if r.Time.IsZero() {
		r.Time = T0.Add(time.Duration(r.ID) * b.Step)
	}
	if r.Outcome == "" {
		r.Outcome = "ok"
	}
	b.Recs = append(b.Recs, r)
}

// GPXEStudy is the 2010 gPXE study's shape: a 500 MB HTTP imgfetch per
// TCP_MAX_WINDOW_SIZE, with and without RX checksum offload (the board's
// offload comes as the label rx_offload), two or three runs per cell.
func GPXEStudy() []record.Record {
	type run struct {
		wnd  uint32
		off  string
		mbps []float64
	}
	runs := []run{
		{4096, "off", []float64{151, 153}},
		{4096, "on", []float64{160}},
		{8192, "off", []float64{287, 290, 281}},
		{8192, "on", []float64{318, 320}},
		{16380, "off", []float64{528, 527, 530}}, // a scaled window a few bytes short
		{16384, "on", []float64{696, 690}},
		{32768, "off", []float64{535}},
		{32768, "on", []float64{846, 850}},
		{65532, "off", []float64{536, 534}},
		{65535, "on", []float64{896, 901, 880}},
	}
	var recs []record.Record
	id := int64(1)
	for _, r := range runs {
		for _, m := range r.mbps {
			d := time.Duration(500e6 * 8 / (m * 1e6) * float64(time.Second))
			recs = append(recs, record.Record{
				ID: id, Time: T0.Add(time.Duration(id) * time.Minute), Source: "serve", Proto: "http", Direction: "rx",
				ClientMAC: "52:54:00:12:34:56", ClientIP: "192.168.50.101", Host: "zynq1", Arch: "x86-64 efi",
				File: "big.img", Bytes: 500e6, Size: 500e6, Duration: d, Mbps: m, Outcome: "ok",
				Labels: map[string]string{"rx_offload": r.off, "fw": "gpxe-1.0.1"},
				WndMax: r.wnd, WndMedian: r.wnd, MSS: 1448, PMTU: 1500, MTU: 1500, LinkMbps: 1000,
				RxCsum: record.OffloadOn, Iface: "eth0", LinkDriver: "e1000e",
			})
			id++
		}
	}
	return recs
}

// Lab is a mixed lab: the gPXE runs plus TFTP fetches, a jumbo-frame board,
// bench runs both ways at tbf rates, a failed fetch and a client seen only
// by IP.
func Lab() []record.Record {
	b := &Builder{Recs: GPXEStudy(), Step: time.Minute}
	add := b.Add
	for _, m := range []float64{41.5, 43.0} {
		add(record.Record{Source: "serve", Proto: "tftp", Direction: "rx", ClientMAC: "52:54:00:aa:bb:01",
			ClientIP: "192.168.50.102", Host: "rpi4", File: "ipxe.efi", Bytes: 1 << 20, Size: 1 << 20,
			Duration: time.Duration(float64(8<<20) / (m * 1e6) * float64(time.Second)), Mbps: m,
			BlkSize: 1468, WindowSize: 8, TSize: true, MTU: 1500, LinkMbps: 1000, LinkDriver: "igb", RxCsum: record.OffloadOn})
	}
	for _, c := range []struct {
		proto, dir string
		mtu        int
		mbps       float64
	}{
		{"tcp", "tx", 1500, 933}, {"tcp", "rx", 1500, 941}, {"udp", "tx", 1500, 955}, {"udp", "rx", 1500, 960},
		{"tcp", "tx", 9000, 986}, {"tcp", "rx", 9000, 989}, {"udp", "tx", 9000, 970},
	} {
		add(record.Record{Source: "bench", Proto: c.proto, Direction: c.dir, ClientMAC: "00:0A:35:00:01:22",
			ClientIP: "192.168.50.110", Host: "zcu102", File: "bench", Bytes: 1 << 30, Duration: 10 * time.Second,
			Mbps: c.mbps, MTU: c.mtu, LinkMbps: 1000, WndRequested: 131072, WndMax: 131072, MSS: uint32(c.mtu - 52)})
	}
	for _, c := range []struct {
		rate int64
		dir  string
		mbps float64
	}{
		{100e6, "tx", 94.1}, {100e6, "rx", 94.9}, {100e6, "rx", 95.0}, {10e6, "tx", 9.41}, {10e6, "rx", 9.52},
	} {
		add(record.Record{Source: "bench", Proto: "tcp", Direction: c.dir, ClientMAC: "00:0a:35:00:01:22",
			ClientIP: "192.168.50.110", Host: "zcu102", File: "bench", Bytes: 100 << 20, Duration: 10 * time.Second,
			Mbps: c.mbps, MTU: 1500, LinkMbps: 1000, RateLimit: c.rate})
	}
	// A fetch cut short counts as a fetch but not as a throughput.
	add(record.Record{Source: "serve", Proto: "http", Direction: "rx", ClientIP: "192.168.50.150", File: "big.img",
		Bytes: 3 << 20, Size: 500e6, Duration: 2 * time.Second, Mbps: 12.6, Outcome: "aborted", Err: "connection reset",
		WndMax: 65535, MTU: 1500})
	// A veth client: no link speed, no MAC.
	add(record.Record{Source: "serve", Proto: "http", Direction: "rx", ClientIP: "10.251.3.2", File: "vmlinuz",
		Bytes: 8 << 20, Size: 8 << 20, Duration: 20 * time.Millisecond, Mbps: 3355.4, WndMax: 3 << 20, MTU: 1500})
	return b.Recs
}

// FetchWithIntervals is a 3.2 s HTTP fetch sampled every second.
func FetchWithIntervals() (record.Record, []record.Interval) {
	r := record.Record{ID: 42, Time: T0, Source: "serve", Proto: "http", Direction: "rx",
		ClientMAC: "52:54:00:12:34:56", ClientIP: "192.168.50.101", Host: "zynq1", File: "big.img",
		Bytes: 376_000_000, Size: 376_000_000, Duration: 3200 * time.Millisecond, Mbps: 940.0, Outcome: "ok",
		WndMax: 65535, MSS: 1448, Retransmits: 3}
	ivs := []record.Interval{
		{RecordID: 42, Start: 0, End: time.Second, Bytes: 117_440_512, Retransmits: 0, Cwnd: 443_392},
		{RecordID: 42, Start: time.Second, End: 2 * time.Second, Bytes: 117_964_800, Retransmits: 2, Cwnd: 1_174_405},
		{RecordID: 42, Start: 2 * time.Second, End: 3 * time.Second, Bytes: 117_702_656, Retransmits: 1, Cwnd: 1_048_576},
		{RecordID: 42, Start: 3 * time.Second, End: 3200 * time.Millisecond, Bytes: 22_892_032, Retransmits: 0, Cwnd: 720},
	}
	return r, ivs
}

// Issue28 is issue 28's lab, where the old tables put in one cell what no
// lab would: iPXE under TCG fetching over HTTP through a bridge (331
// Mbit/s), curl over a veth pair (16,760) with the same 256K window, a
// board's iperf3 -R over that veth (13,657), bench runs at two MTUs and
// tbf rates, and U-Boot's TFTP fetches with the adaptive sender's figures.
func Issue28() []record.Record {
	b := &Builder{Step: time.Minute, Fill: func(r *record.Record) {
		if r.Direction == "" {
			r.Direction = "rx"
		}
		if r.Bytes == 0 {
			r.Bytes, r.Size = 64<<20, 64<<20
		}
		r.Duration = time.Duration(float64(r.Bytes*8) / (r.Mbps * 1e6) * float64(time.Second))
	}}
	add := b.Add
	bridge := record.Record{Iface: "pxbr0", MTU: 1500, LinkDriver: "bridge", RxCsum: record.OffloadOn}
	veth := record.Record{Iface: "vs28", MTU: 1500, LinkMbps: 10000, LinkDriver: "veth", RxCsum: record.OffloadOn}
	on := func(link record.Record, r record.Record) record.Record {
		r.Iface, r.MTU, r.LinkMbps, r.LinkDriver, r.RxCsum = link.Iface, link.MTU, link.LinkMbps, link.LinkDriver, link.RxCsum
		return r
	}
	for _, m := range []float64{331, 327, 335} {
		add(on(bridge, record.Record{Source: "serve", Proto: "http", ClientMAC: "52:54:00:12:34:01", ClientIP: "10.28.0.11",
			Host: "ipxe-tcg", File: "vmlinuz", Mbps: m, WndMax: 262144, MSS: 1448}))
	}
	for _, m := range []float64{16760, 16410} {
		add(on(veth, record.Record{Source: "serve", Proto: "http", ClientIP: "10.28.1.2", File: "vmlinuz", Mbps: m,
			WndMax: 262144, MSS: 65483}))
	}
	for _, m := range []float64{13657, 13702} {
		add(on(veth, record.Record{Source: "iperf3", Proto: "tcp", ClientIP: "10.28.1.2", File: "iperf3 -R", Mbps: m,
			Bytes: 5 << 30}))
	}
	add(on(veth, record.Record{Source: "iperf3", Proto: "tcp", Direction: "tx", ClientIP: "10.28.1.2", File: "iperf3", Mbps: 14210,
		Bytes: 5 << 30}))
	// The bench: its testbed's veth at MTU 1500 and 9000, unlimited and
	// through a 1gbit tbf.
	for _, c := range []struct {
		mtu  int
		rate int64
		mbps float64
	}{{1500, 0, 12100}, {1500, 0, 11900}, {9000, 0, 24300}, {1500, 1e9, 941}, {1500, 1e9, 943}} {
		add(record.Record{Source: "bench", Proto: "http", ClientIP: "10.99.0.2", File: "bench.img", Iface: "pxl-client",
			MTU: c.mtu, LinkMbps: 10000, LinkDriver: "veth", RateLimit: c.rate, Mbps: c.mbps, WndRequested: 262144,
			Labels: map[string]string{"rx_offload": "on"}})
	}
	// U-Boot over TFTP through the bridge, blksize 1468 windowsize 16.
	for _, m := range []float64{82.3, 80.9, 84.0} {
		add(on(bridge, record.Record{Source: "serve", Proto: "tftp", ClientMAC: "52:54:00:e2:b0:01", ClientIP: "10.28.0.15",
			Host: "uboot-arm64", File: "img16m", Mbps: m, BlkSize: 1468, WindowSize: 16, TSize: true,
			EffWndMin: 11, EffWndMedian: 16, EffWndMax: 16, LossEvents: 4, Retransmits: 10}))
	}
	// And the bench's TFTP at 1gbit.
	add(record.Record{Source: "bench", Proto: "tftp", ClientIP: "10.99.0.2", File: "bench.img", Iface: "pxl-client", MTU: 1500,
		LinkMbps: 10000, LinkDriver: "veth", RateLimit: 1e9, Mbps: 650, BlkSize: 1468, WindowSize: 16})
	return b.Recs
}

// CompareLab is issue 28's lab plus what the study grids measure: bench
// TCP streams both ways over the testbed's veth and through a 1gbit tbf,
// beside the board's iperf3 -R over its own veth, and bench HTTP fetches
// at gPXE's 4096-byte window over both links.
func CompareLab() []record.Record {
	b := &Builder{Recs: Issue28(), Step: time.Minute, Fill: func(r *record.Record) {
		r.Outcome, r.Bytes, r.Size, r.ClientIP, r.Iface, r.LinkMbps, r.LinkDriver = "ok", 1<<30, 1<<30, "10.99.0.2", "pxl-client", 10000, "veth"
		if r.MTU == 0 {
			r.MTU = 1500
		}
		r.Duration = time.Duration(float64(r.Bytes*8) / (r.Mbps * 1e6) * float64(time.Second))
	}}
	add := b.Add
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
	return b.Recs
}
