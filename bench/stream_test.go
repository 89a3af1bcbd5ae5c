package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/stream"
)

// streamSpec is the part of a stream spec the table compares.
type streamSpec struct {
	Proto              string
	Streams, Dirs      []string
	Duration           time.Duration
	UDPRates           []uint64
	Windows            []int
	Offloads           []bool
	MTUs               []int
	Rates              []uint64
	Repeat, Count      int
	FirstKey, LastKey  string
	BlkSizes, WinSizes []int
}

func summarize(s Spec) streamSpec {
	pts := s.Points()
	out := streamSpec{Proto: s.Proto, Streams: s.Streams, Dirs: s.Directions, Duration: s.Duration, UDPRates: s.UDPRates,
		Windows: s.Windows, Offloads: s.Offloads, MTUs: s.MTUs, Rates: s.Rates, Repeat: s.Repeat, Count: s.Count(),
		BlkSizes: s.BlkSizes, WinSizes: s.WindowSizes}
	if len(pts) != s.Count() {
		out.Count = -len(pts) // Points and Count disagree: the diff shows it
	}
	if len(pts) > 0 {
		out.FirstKey, out.LastKey = pts[0].Key(), pts[len(pts)-1].Key()
	}
	return out
}

func TestParseStreamSpec(t *testing.T) {
	tests := map[string]struct {
		f       Flags
		want    streamSpec
		wantErr string
	}{
		"tcp defaults": {f: Flags{Proto: "tcp"}, want: streamSpec{Proto: ProtoStream, Streams: []string{"tcp"}, Dirs: []string{"tx", "rx"},
			Duration: 10 * time.Second, UDPRates: []uint64{UDPRateLine}, Windows: []int{WindowAuto}, Offloads: []bool{true},
			MTUs: []int{1500}, Rates: []uint64{0}, Repeat: 1, Count: 2,
			FirstKey: "tcp tx mtu=1500 rate=none rx_offload=on window=auto", LastKey: "tcp rx mtu=1500 rate=none rx_offload=on window=auto"}},
		"tcp,udp list with flags": {f: Flags{Proto: "TCP, udp", Direction: "rx", Duration: "2s", UDPRate: "50mbit,line", Window: "16K,64K", Rate: "1gbit", Repeat: 2},
			want: streamSpec{Proto: ProtoStream, Streams: []string{"tcp", "udp"}, Dirs: []string{"rx"}, Duration: 2 * time.Second,
				UDPRates: []uint64{50e6, UDPRateLine}, Windows: []int{16384, 65536}, Offloads: []bool{true}, MTUs: []int{1500},
				Rates: []uint64{1e9}, Repeat: 2, Count: 8,
				FirstKey: "tcp rx mtu=1500 rate=1gbit rx_offload=on window=16K", LastKey: "udp rx mtu=1500 rate=1gbit rx_offload=on udp_rate=line"}},
		"xilinx": {f: Flags{Preset: "xilinx"}, want: streamSpec{Proto: ProtoStream, Streams: []string{"tcp", "udp"}, Dirs: []string{"tx", "rx"},
			Duration: 10 * time.Second, UDPRates: []uint64{UDPRateLine}, Windows: []int{WindowAuto}, Offloads: []bool{true},
			MTUs: []int{1500, 9000}, Rates: []uint64{1e9}, Repeat: 3, Count: 24,
			FirstKey: "tcp tx mtu=1500 rate=1gbit rx_offload=on window=auto", LastKey: "udp rx mtu=9000 rate=1gbit rx_offload=on udp_rate=line"}},
		"xilinx quick": {f: Flags{Preset: "xilinx", Duration: "3s", Repeat: 1}, want: streamSpec{Proto: ProtoStream, Streams: []string{"tcp", "udp"},
			Dirs: []string{"tx", "rx"}, Duration: 3 * time.Second, UDPRates: []uint64{UDPRateLine}, Windows: []int{WindowAuto},
			Offloads: []bool{true}, MTUs: []int{1500, 9000}, Rates: []uint64{1e9}, Repeat: 1, Count: 8,
			FirstKey: "tcp tx mtu=1500 rate=1gbit rx_offload=on window=auto", LastKey: "udp rx mtu=9000 rate=1gbit rx_offload=on udp_rate=line"}},
		"linkspeed": {f: Flags{Preset: "linkspeed"}, want: streamSpec{Proto: ProtoStream, Streams: []string{"tcp", "udp"}, Dirs: []string{"tx", "rx"},
			Duration: 10 * time.Second, UDPRates: []uint64{UDPRateLine}, Windows: []int{WindowAuto}, Offloads: []bool{true},
			MTUs: []int{1500}, Rates: []uint64{1e9, 100e6, 10e6}, Repeat: 3, Count: 36,
			FirstKey: "tcp tx mtu=1500 rate=1gbit rx_offload=on window=auto", LastKey: "udp rx mtu=1500 rate=10mbit rx_offload=on udp_rate=line"}},
		"linkspeed with udp": {f: Flags{Preset: "linkspeed", Proto: "udp", Repeat: 1}, want: streamSpec{Proto: ProtoStream, Streams: []string{"udp"},
			Dirs: []string{"tx", "rx"}, Duration: 10 * time.Second, UDPRates: []uint64{UDPRateLine}, Windows: []int{WindowAuto},
			Offloads: []bool{true}, MTUs: []int{1500}, Rates: []uint64{1e9, 100e6, 10e6}, Repeat: 1, Count: 6,
			FirstKey: "udp tx mtu=1500 rate=1gbit rx_offload=on udp_rate=line", LastKey: "udp rx mtu=1500 rate=10mbit rx_offload=on udp_rate=line"}},
		"offload both":        {f: Flags{Proto: "tcp", Offload: "on,off", Direction: "tx"}, want: streamSpec{Proto: ProtoStream, Streams: []string{"tcp"}, Dirs: []string{"tx"}, Duration: 10 * time.Second, UDPRates: []uint64{UDPRateLine}, Windows: []int{WindowAuto}, Offloads: []bool{true, false}, MTUs: []int{1500}, Rates: []uint64{0}, Repeat: 1, Count: 2, FirstKey: "tcp tx mtu=1500 rate=none rx_offload=on window=auto", LastKey: "tcp tx mtu=1500 rate=none rx_offload=off window=auto"}},
		"bad direction":       {f: Flags{Proto: "tcp", Direction: "up"}, wantErr: "use tx (the board sends)"},
		"fractional seconds":  {f: Flags{Proto: "tcp", Duration: "1500ms"}, wantErr: "whole seconds"},
		"too long":            {f: Flags{Proto: "udp", Duration: "2m"}, wantErr: "1s..1m0s"},
		"bad duration":        {f: Flags{Proto: "udp", Duration: "ten"}, wantErr: "write e.g. 10s"},
		"udp rate too high":   {f: Flags{Proto: "udp", UDPRate: "20gbit"}, wantErr: "out of range"},
		"udp rate none":       {f: Flags{Proto: "udp", UDPRate: "none"}, wantErr: "or line (the link rate)"},
		"mixed list":          {f: Flags{Proto: "tcp,http"}, wantErr: "a list takes tcp and udp only"},
		"stream flag on http": {f: Flags{Proto: "http", Direction: "tx"}, wantErr: "apply to --proto tcp and udp"},
		"udp rate on default": {f: Flags{UDPRate: "1gbit"}, wantErr: "apply to --proto tcp and udp"},
		"size on tcp":         {f: Flags{Proto: "tcp", Size: "64MiB"}, wantErr: "runs for --duration"},
		"blksize on tcp":      {f: Flags{Proto: "tcp", BlkSize: "512"}, wantErr: "apply to --proto tftp"},
		"small mtu": {f: Flags{Proto: "udp", MTU: "576"}, want: streamSpec{Proto: ProtoStream, Streams: []string{"udp"},
			Dirs: []string{"tx", "rx"}, Duration: 10 * time.Second, UDPRates: []uint64{UDPRateLine}, Windows: []int{WindowAuto},
			Offloads: []bool{true}, MTUs: []int{576}, Rates: []uint64{0}, Repeat: 1, Count: 2,
			FirstKey: "udp tx mtu=576 rate=none rx_offload=on udp_rate=line", LastKey: "udp rx mtu=576 rate=none rx_offload=on udp_rate=line"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := ParseSpec(tt.f)
			checkParsed(t, fmt.Sprintf("ParseSpec(%+v)", tt.f), summarize(s), tt.want, err, tt.wantErr)
		})
	}
}

// TestStreamPointsOrder checks the expansion order: MTU, rate, offload,
// protocol, direction, window/UDP rate, repeats.
func TestStreamPointsOrder(t *testing.T) {
	s, err := ParseSpec(Flags{Proto: "tcp,udp", Window: "4K,auto", UDPRate: "10mbit", MTU: "1500,9000", Repeat: 2, Duration: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.Points() {
		if p.MTU != 1500 {
			continue
		}
		got = append(got, p.Key()+" #"+string(rune('0'+p.Rep)))
	}
	want := []string{
		"tcp tx mtu=1500 rate=none rx_offload=on window=4K #1", "tcp tx mtu=1500 rate=none rx_offload=on window=4K #2",
		"tcp tx mtu=1500 rate=none rx_offload=on window=auto #1", "tcp tx mtu=1500 rate=none rx_offload=on window=auto #2",
		"tcp rx mtu=1500 rate=none rx_offload=on window=4K #1", "tcp rx mtu=1500 rate=none rx_offload=on window=4K #2",
		"tcp rx mtu=1500 rate=none rx_offload=on window=auto #1", "tcp rx mtu=1500 rate=none rx_offload=on window=auto #2",
		"udp tx mtu=1500 rate=none rx_offload=on udp_rate=10mbit #1", "udp tx mtu=1500 rate=none rx_offload=on udp_rate=10mbit #2",
		"udp rx mtu=1500 rate=none rx_offload=on udp_rate=10mbit #1", "udp rx mtu=1500 rate=none rx_offload=on udp_rate=10mbit #2",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("points at MTU 1500 (-want +got):\n%s", d)
	}
	if s.Count() != 24 || len(s.Points()) != 24 {
		t.Errorf("Count %d, %d points; want 24", s.Count(), len(s.Points()))
	}
}

func TestUDPSendRate(t *testing.T) {
	tests := map[string]struct {
		p    Point
		want int64
	}{
		"asked":               {Point{UDPRate: 50e6, MTU: 1500, Rate: 1e9}, 50e6},
		"line 1gbit 1500":     {Point{UDPRate: UDPRateLine, MTU: 1500, Rate: 1e9}, 971812}, // 1e9 * 1448/1490 (1448 + 42 on the wire), in kbit/s
		"line 10mbit 1500":    {Point{UDPRate: UDPRateLine, MTU: 1500, Rate: 10e6}, 9718},
		"line 1gbit 9000":     {Point{UDPRate: UDPRateLine, MTU: 9000, Rate: 1e9}, 995328},
		"line unlimited 1500": {Point{UDPRate: UDPRateLine, MTU: 1500}, 971812},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := UDPSendRate(tt.p)
			if tt.p.UDPRate == UDPRateLine {
				got /= 1000 // kbit/s: the table above
			}
			if got != tt.want {
				t.Errorf("UDPSendRate(%+v) = %d, want %d", tt.p, got, tt.want)
			}
		})
	}
	if UDPPacketSize(1500) != stream.DefaultPacketSize {
		t.Errorf("UDPPacketSize(1500) = %d, want iperf3's %d", UDPPacketSize(1500), stream.DefaultPacketSize)
	}
}

// TestStreamRecord checks what a stream run stores: the receiver's side,
// the sender's retransmits, UDP loss and jitter in their fields (through
// record.FromFetch), the labels only what the sweep asked.
func TestStreamRecord(t *testing.T) {
	res := stream.Result{Proto: "udp", Direction: stream.Rx,
		Sender:    stream.Stats{End: 2 * time.Second, Bytes: 25_000_000, BitsPerSecond: 100e6, Packets: 17265},
		Receiver:  stream.Stats{Start: 0, End: 2 * time.Second, Bytes: 24_000_000, BitsPerSecond: 96e6, Packets: 16574, Lost: 691, LostPercent: 4.002, JitterMs: 0.0123},
		Intervals: []stream.Stats{{Start: 0, End: time.Second, Bytes: 12e6, SndCwnd: -1}}}
	p := Point{Proto: ProtoUDP, Direction: "rx", UDPRate: 100e6, MTU: 1500, Rate: 1e9}
	begin := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	got, ivs := streamRecord(p, res, nil, begin)
	want := &record.Record{Time: begin, Source: Source, Proto: "udp", Direction: "rx", File: "stream/udp-rx", Kind: record.KindStream,
		Bytes: 24_000_000, Duration: 2 * time.Second, Mbps: 96, Outcome: "ok", Datagrams: 17265,
		SenderMbps: 100, UDPLostPct: 4.002, JitterMs: 0.0123, UDPLost: 691, UDPPackets: 16574 + 691,
		Labels: map[string]string{"rate": "1gbit", LabelUDPRate: "100mbit"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("streamRecord (-want +got):\n%s", d)
	}
	if len(ivs) != 1 || ivs[0].Bytes != 12e6 || ivs[0].Cwnd != 0 {
		t.Errorf("streamRecord intervals = %+v", ivs)
	}
}

// TestCrossCheckTable flags deviations over 5% and counts the pairs.
func TestCrossCheckTable(t *testing.T) {
	mk := func(key string, mbps float64, r record.Record) Result {
		r.Outcome, r.Mbps = "ok", mbps
		return Result{Point: Point{Proto: ProtoTCP, Direction: key, Rep: 1}, Record: r}
	}
	results := []Result{
		mk("tx", 941, record.Record{Iperf3Mbps: 940, Iperf3DevPct: 0.11}),
		mk("rx", 800, record.Record{Iperf3Mbps: 900, Iperf3DevPct: 11.11}),
		mk("tx", 500, record.Record{}), // not cross-checked
		mk("rx", 500, record.Record{Iperf3Err: "boom"}),
	}
	tab, flagged, n := CrossCheck(results)
	if flagged != 1 || n != 3 {
		t.Errorf("flagged %d of %d, want 1 of 3", flagged, n)
	}
	var marks []string
	for _, r := range tab.Rows {
		marks = append(marks, r[5])
	}
	if d := cmp.Diff([]string{"", "> 5%", "iperf3 failed"}, marks); d != "" {
		t.Errorf("marks (-want +got):\n%s", d)
	}
}
