package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/record"
)

func TestParseCounts(t *testing.T) {
	tests := map[string]struct {
		in      string
		lo, hi  int
		want    []int
		wantErr string
	}{
		"one":                {in: "16", lo: 1, hi: 65535, want: []int{16}},
		"list":               {in: "1,4, 8,16,32,64", lo: 1, hi: 65535, want: []int{1, 4, 8, 16, 32, 64}},
		"doubling":           {in: "1..64", lo: 1, hi: 65535, want: []int{1, 2, 4, 8, 16, 32, 64}},
		"doubling end off":   {in: "3..64", lo: 1, hi: 65535, want: []int{3, 6, 12, 24, 48}},
		"linear":             {in: "512..1468/478", lo: 8, hi: 65464, want: []int{512, 990, 1468}},
		"linear end off":     {in: "512..1468/500", lo: 8, hi: 65464, want: []int{512, 1012}},
		"range and list":     {in: "1..4,4,64", lo: 1, hi: 65535, want: []int{1, 2, 4, 64}},
		"duplicates dropped": {in: "512,512", lo: 8, hi: 65464, want: []int{512}},
		"empty":              {in: "", lo: 1, hi: 9, wantErr: "empty item"},
		"trailing comma":     {in: "1,", lo: 1, hi: 9, wantErr: "empty item"},
		"not a number":       {in: "16K", lo: 1, hi: 65535, wantErr: "not a whole number"},
		"too low":            {in: "0", lo: 1, hi: 65535, wantErr: "out of range"},
		"too high":           {in: "65536", lo: 1, hi: 65535, wantErr: "out of range"},
		"reversed":           {in: "64..1", lo: 1, hi: 65535, wantErr: "start is above the end"},
		"zero step":          {in: "1..64/0", lo: 1, hi: 65535, wantErr: "step"},
		"bad step":           {in: "1..64/x", lo: 1, hi: 65535, wantErr: "step"},
		"bad end":            {in: "1..x", lo: 1, hi: 65535, wantErr: "end"},
		"doubling from zero": {in: "0..8", lo: 0, hi: 9, wantErr: "starts at 1"},
		"huge range":         {in: "1..65535/1", lo: 1, hi: 65535, wantErr: "more than"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCounts(tt.in, tt.lo, tt.hi)
			checkParsed(t, fmt.Sprintf("ParseCounts(%q, %d, %d)", tt.in, tt.lo, tt.hi), got, tt.want, err, tt.wantErr)
		})
	}
}

func TestParseSpecTFTP(t *testing.T) {
	tftpPreset := Spec{Proto: ProtoTFTP, BlkSizes: []int{512, 1468}, WindowSizes: []int{1, 4, 8, 16, 32, 64},
		Offloads: []bool{true}, MTUs: []int{1500}, Rates: []uint64{1e9}, Size: 64 << 20, Repeat: 3, Seed: 1}
	tests := map[string]struct {
		f       Flags
		want    Spec
		wantErr []string
	}{
		"preset": {f: Flags{Preset: "tftp"}, want: tftpPreset},
		"preset quicker": {f: Flags{Preset: "tftp", Size: "64MiB", Repeat: 1}, want: func() Spec {
			s := tftpPreset
			s.Repeat = 1
			return s
		}()},
		"proto tftp takes the preset's lists, unlimited, offload on": {f: Flags{Proto: "tftp"},
			want: Spec{Proto: ProtoTFTP, BlkSizes: []int{512, 1468}, WindowSizes: []int{1, 4, 8, 16, 32, 64},
				Offloads: []bool{true}, MTUs: []int{1500}, Rates: []uint64{0}, Size: 64 << 20, Repeat: 1, Seed: 1}},
		"the issue's test sweep": {f: Flags{Proto: "TFTP", BlkSize: "1468", WindowSize: "1,16", Rate: "100mbit", Size: "4MiB"},
			want: Spec{Proto: ProtoTFTP, BlkSizes: []int{1468}, WindowSizes: []int{1, 16},
				Offloads: []bool{true}, MTUs: []int{1500}, Rates: []uint64{100e6}, Size: 4 << 20, Repeat: 1, Seed: 1}},
		"doubling windowsize, offload both": {f: Flags{Proto: "tftp", WindowSize: "1..64", Offload: "on,off", MTU: "9000", BlkSize: "8968"},
			want: Spec{Proto: ProtoTFTP, BlkSizes: []int{8968}, WindowSizes: []int{1, 2, 4, 8, 16, 32, 64},
				Offloads: []bool{true, false}, MTUs: []int{9000}, Rates: []uint64{0}, Size: 64 << 20, Repeat: 1, Seed: 1}},
		"blksize over the MTU":   {f: Flags{Preset: "tftp", BlkSize: "1469"}, wantErr: []string{"--blksize 1469 does not fit --mtu 1500", "1468"}},
		"blksize over a 2nd MTU": {f: Flags{Preset: "tftp", MTU: "9000,1500", BlkSize: "4000"}, wantErr: []string{"--mtu 1500"}},
		"blksize out of RFC":     {f: Flags{Proto: "tftp", BlkSize: "4"}, wantErr: []string{"--blksize", "8..65464"}},
		"windowsize out of RFC":  {f: Flags{Proto: "tftp", WindowSize: "65536"}, wantErr: []string{"--windowsize", "1..65535"}},
		"window with tftp":       {f: Flags{Preset: "tftp", Window: "4K"}, wantErr: []string{"--window", "--windowsize"}},
		"blksize with http":      {f: Flags{BlkSize: "1468"}, wantErr: []string{"--blksize and --windowsize apply to --proto tftp"}},
		"windowsize with gpxe":   {f: Flags{Preset: "gpxe", WindowSize: "16"}, wantErr: []string{"--proto tftp"}},
		"two protocols":          {f: Flags{Proto: "http,tftp"}, wantErr: []string{"--proto", "tftp"}},
		"two errors at once":     {f: Flags{Proto: "tftp", BlkSize: "x", WindowSize: "0"}, wantErr: []string{"--blksize", "--windowsize"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSpec(tt.f)
			checkParsed(t, fmt.Sprintf("ParseSpec(%+v)", tt.f), got, tt.want, err, tt.wantErr...)
		})
	}
}

// TestTFTPPoints: blksize changes slower than windowsize, repeats back to
// back, the HTTP window unused, and Count agrees.
func TestTFTPPoints(t *testing.T) {
	s := Spec{Proto: ProtoTFTP, BlkSizes: []int{512, 1468}, WindowSizes: []int{1, 16}, Offloads: []bool{true},
		MTUs: []int{1500}, Rates: []uint64{1e9}, Size: 1 << 20, Repeat: 2}
	var got []string
	for _, p := range s.Points() {
		got = append(got, p.Key()+" rep="+string(rune('0'+p.Rep)))
		if p.Window != 0 || p.Proto != ProtoTFTP {
			t.Errorf("point %+v", p)
		}
	}
	want := []string{
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=512 windowsize=1 rep=1",
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=512 windowsize=1 rep=2",
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=512 windowsize=16 rep=1",
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=512 windowsize=16 rep=2",
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=1468 windowsize=1 rep=1",
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=1468 windowsize=1 rep=2",
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=1468 windowsize=16 rep=1",
		"tftp mtu=1500 rate=1gbit rx_offload=on blksize=1468 windowsize=16 rep=2",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if s.Count() != len(want) {
		t.Errorf("Count %d, want %d", s.Count(), len(want))
	}
	big := s
	big.BlkSizes, big.WindowSizes = make([]int, 200), make([]int, 200)
	for i := range 200 {
		big.BlkSizes[i], big.WindowSizes[i] = 512, i+1
	}
	if err := big.Validate(); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a 40000-point sweep: err %v", err)
	}
}

// TestTFTPSummary: repeats fold into one row with median and spread; a
// failed fetch counts as failed; packet counts add up.
func TestTFTPSummary(t *testing.T) {
	p := Point{Proto: ProtoTFTP, MTU: 1500, Rate: 1e9, BlkSize: 1468, WindowSize: 16, Offload: true}
	res := func(rep int, mbps float64, outcome string, dg, rt, to int64, cpuMs, early, clientTimeouts int64) Result {
		q := p
		q.Rep = rep
		return Result{Point: q, Record: record.Record{Proto: ProtoTFTP, Mbps: mbps, Outcome: outcome, Datagrams: dg,
			Retransmits: rt, Timeouts: to, CPU: time.Duration(cpuMs) * time.Millisecond, ClientEarlyACKs: early,
			ClientTimeouts: clientTimeouts}}
	}
	tb := TFTPSummary([]Result{
		res(1, 900, "ok", 100, 0, 0, 300, 0, 0),
		res(2, 960, "ok", 104, 4, 0, 200, 1, 0),
		res(3, 940, "ok", 100, 0, 1, 250, 0, 2),
		res(4, 0, "error", 3, 3, 5, 0, 0, 0),
	})
	want := [][]string{{"1500", "1gbit", "1000", "1gbit", "1468", "16", "3", "940.0", "900.0-960.0", "900.0", "960.0", "307", "7", "8", "1", "250", "1"}}
	if d := cmp.Diff(want, tb.Rows); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if len(TFTPSummary(nil).Rows) != 0 {
		t.Error("rows without results")
	}
}
