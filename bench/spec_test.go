package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/configs"
)

// checkParsed judges one case of a parser's table: with wantErr (any
// non-empty), err must hold each of them; without, err is nil and got is
// want. what names the call in the failure.
func checkParsed[T any](t *testing.T, what string, got, want T, err error, wantErr ...string) {
	t.Helper()
	if strings.Join(wantErr, "") != "" {
		if err == nil {
			t.Fatalf("%s = %+v; want an error containing %q", what, got, wantErr)
		}
		for _, w := range wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", what, err, w)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func TestParseWindows(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []int
		wantErr string
	}{
		"single":             {in: "4K", want: []int{4096}},
		"bytes":              {in: "65532", want: []int{65532}},
		"kib":                {in: "16KiB", want: []int{16384}},
		"list":               {in: "4K,16K,64K", want: []int{4096, 16384, 65536}},
		"auto":               {in: "auto", want: []int{WindowAuto}},
		"list with auto":     {in: "4K, AUTO", want: []int{4096, WindowAuto}},
		"range":              {in: "4K..16K/4K", want: []int{4096, 8192, 12288, 16384}},
		"range end off step": {in: "4K..10K/4K", want: []int{4096, 8192}},
		"range one":          {in: "8K..8K/1K", want: []int{8192}},
		"range and list":     {in: "4K..8K/4K,8K,auto", want: []int{4096, 8192, WindowAuto}},
		"issue sweep": {in: "4K..64K/1K", want: func() []int {
			var w []int
			for k := 4; k <= 64; k++ {
				w = append(w, k<<10)
			}
			return w
		}()},
		"empty":             {in: "", wantErr: "empty item"},
		"trailing comma":    {in: "4K,", wantErr: "empty item"},
		"garbage":           {in: "big", wantErr: "write bytes"},
		"too small":         {in: "512", wantErr: "out of range"},
		"too large":         {in: "1G", wantErr: "out of range"},
		"range no step":     {in: "4K..64K", wantErr: "has no step"},
		"range reversed":    {in: "64K..4K/4K", wantErr: "start is above the end"},
		"range zero step":   {in: "4K..64K/0", wantErr: "step"},
		"range bad start":   {in: "x..64K/4K", wantErr: "start"},
		"range huge":        {in: "1K..64M/1", wantErr: "more than"},
		"negative":          {in: "-4K", wantErr: "write bytes"},
		"fraction of bytes": {in: "1.5", wantErr: "out of range"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseWindows(tt.in)
			checkParsed(t, fmt.Sprintf("ParseWindows(%q)", tt.in), got, tt.want, err, tt.wantErr)
		})
	}
}

func TestParseRates(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []uint64
		wantErr string
	}{
		"study":       {in: "1gbit,100mbit,10mbit,none", want: []uint64{1e9, 100e6, 10e6, 0}},
		"kbit":        {in: "512kbit", want: []uint64{512e3}},
		"bare":        {in: "2500000", want: []uint64{2.5e6}},
		"fraction":    {in: "2.5gbit", want: []uint64{2.5e9}},
		"case":        {in: "1Gbit, NONE", want: []uint64{1e9, 0}},
		"duplicates":  {in: "1gbit,1000mbit", want: []uint64{1e9}},
		"bytes unit":  {in: "100mbps", wantErr: "use 1gbit"},
		"empty":       {in: "", wantErr: "use 1gbit"},
		"zero":        {in: "0", wantErr: "use 1gbit"},
		"too slow":    {in: "10bit", wantErr: "out of range"},
		"too fast":    {in: "1000gbit", wantErr: "out of range"},
		"not a rate":  {in: "fast", wantErr: "use 1gbit"},
		"nan":         {in: "NaNmbit", wantErr: "use 1gbit"},
		"bad in list": {in: "1gbit,x", wantErr: `"x"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRates(tt.in)
			checkParsed(t, fmt.Sprintf("ParseRates(%q)", tt.in), got, tt.want, err, tt.wantErr)
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int64
		wantErr bool
	}{
		"bytes":   {in: "1234", want: 1234},
		"MiB":     {in: "500MiB", want: 500 << 20},
		"M":       {in: "64M", want: 64 << 20},
		"MB":      {in: "500MB", want: 500e6},
		"GiB":     {in: "1GiB", want: 1 << 30},
		"half G":  {in: "0.5G", want: 512 << 20},
		"b":       {in: "10b", want: 10},
		"space":   {in: " 8 MiB ", want: 8 << 20},
		"empty":   {in: "", wantErr: true},
		"unit":    {in: "MiB", wantErr: true},
		"tib":     {in: "1TiB", wantErr: true},
		"huge":    {in: "100G", wantErr: true},
		"neg":     {in: "-1", wantErr: true},
		"inf":     {in: "inf", wantErr: true},
		"partial": {in: "0.3", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseBytes(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want && !tt.wantErr {
				t.Errorf("parseBytes(%q) = %d, %v; want %d (error %v)", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseSpec(t *testing.T) {
	gpxe := Spec{Proto: "http", Windows: GPXEWindows(), Offloads: []bool{true, false},
		MTUs: []int{1500}, Rates: []uint64{1e9}, Size: 500 << 20, Repeat: 3, Seed: 1}
	tests := map[string]struct {
		in      Flags
		want    Spec
		wantErr []string // every one must be in the error
	}{
		"defaults":    {in: Flags{}, want: Default()},
		"preset gpxe": {in: Flags{Preset: "gpxe"}, want: gpxe},
		"preset case": {in: Flags{Preset: " GPXE "}, want: gpxe},
		"preset with size": {in: Flags{Preset: "gpxe", Size: "64MiB", Repeat: 1}, want: func() Spec {
			s := gpxe
			s.Size, s.Repeat = 64<<20, 1
			return s
		}()},
		"issue sweep": {in: Flags{Proto: "http", Window: "4K..64K/4K", Offload: "on,off", MTU: "1500,9000", Rate: "1gbit", Size: "500MiB", Repeat: 3, Seed: 7},
			want: Spec{Proto: "http", Windows: []int{4 << 10, 8 << 10, 12 << 10, 16 << 10, 20 << 10, 24 << 10, 28 << 10, 32 << 10, 36 << 10, 40 << 10, 44 << 10, 48 << 10, 52 << 10, 56 << 10, 60 << 10, 64 << 10},
				Offloads: []bool{true, false}, MTUs: []int{1500, 9000}, Rates: []uint64{1e9}, Size: 500 << 20, Repeat: 3, Seed: 7}},
		"unknown preset":    {in: Flags{Preset: "iperf9"}, wantErr: []string{"--preset", "gpxe"}},
		"other proto":       {in: Flags{Proto: "ftp"}, wantErr: []string{"--proto", "http", "tftp"}},
		"all bad together":  {in: Flags{Window: "x", Offload: "maybe", MTU: "big", Rate: "fast", Size: "-1"}, wantErr: []string{"--window", "--offload", "on,off", "--mtu", "--rate", "--size"}},
		"repeat range":      {in: Flags{Repeat: 1000}, wantErr: []string{"--repeat 1000", "1..100"}},
		"repeat negative":   {in: Flags{Repeat: -1}, wantErr: []string{"--repeat"}},
		"size below min":    {in: Flags{Size: "100"}, wantErr: []string{"--size 100"}},
		"mtu out of range":  {in: Flags{MTU: "100"}, wantErr: []string{"--mtu", "576..65535"}},
		"too many fetches":  {in: Flags{Window: "1K..64K/1K", MTU: "1500,9000,4000", Rate: "1gbit,100mbit", Repeat: 100}, wantErr: []string{"more than 10000"}},
		"offload duplicate": {in: Flags{Offload: "on,on,off"}, want: func() Spec { s := Default(); s.Offloads = []bool{true, false}; return s }()},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSpec(tt.in)
			checkParsed(t, fmt.Sprintf("ParseSpec(%+v)", tt.in), got, tt.want, err, tt.wantErr...)
		})
	}
}

// TestPresetIsACopy: changing a returned preset does not change the next.
func TestPresetIsACopy(t *testing.T) {
	a, _ := Preset("gpxe")
	a.Windows[0] = 1
	b, _ := Preset("gpxe")
	if b.Windows[0] != 4096 {
		t.Fatalf("Preset shares its slices: got window %d", b.Windows[0])
	}
}

func TestPoints(t *testing.T) {
	s := Spec{Proto: "http", Windows: []int{4096, WindowAuto}, Offloads: []bool{true, false}, MTUs: []int{1500, 9000},
		Rates: []uint64{1e9}, Size: 1 << 20, Repeat: 2}
	pts := s.Points()
	if len(pts) != s.Count() || len(pts) != 16 {
		t.Fatalf("got %d points, Count %d; want 16", len(pts), s.Count())
	}
	var got []string
	for i, p := range pts {
		if p.Index != i {
			t.Errorf("point %d has Index %d", i, p.Index)
		}
		got = append(got, p.Key()+" #"+string(rune('0'+p.Rep)))
	}
	want := []string{
		"http mtu=1500 rate=1gbit rx_offload=on window=4K #1", "http mtu=1500 rate=1gbit rx_offload=on window=4K #2",
		"http mtu=1500 rate=1gbit rx_offload=on window=auto #1", "http mtu=1500 rate=1gbit rx_offload=on window=auto #2",
		"http mtu=1500 rate=1gbit rx_offload=off window=4K #1", "http mtu=1500 rate=1gbit rx_offload=off window=4K #2",
		"http mtu=1500 rate=1gbit rx_offload=off window=auto #1", "http mtu=1500 rate=1gbit rx_offload=off window=auto #2",
		"http mtu=9000 rate=1gbit rx_offload=on window=4K #1", "http mtu=9000 rate=1gbit rx_offload=on window=4K #2",
		"http mtu=9000 rate=1gbit rx_offload=on window=auto #1", "http mtu=9000 rate=1gbit rx_offload=on window=auto #2",
		"http mtu=9000 rate=1gbit rx_offload=off window=4K #1", "http mtu=9000 rate=1gbit rx_offload=off window=4K #2",
		"http mtu=9000 rate=1gbit rx_offload=off window=auto #1", "http mtu=9000 rate=1gbit rx_offload=off window=auto #2",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
	if d := cmp.Diff(pts, s.Points()); d != "" {
		t.Errorf("Points is not reproducible:\n%s", d)
	}
}

func TestFormat(t *testing.T) {
	got := []string{FormatWindow(4096), FormatWindow(65532), FormatWindow(WindowAuto), FormatRate(1e9), FormatRate(100e6),
		FormatRate(512e3), FormatRate(0), FormatRate(12345), configs.ByteSize(500 << 20).String(), configs.ByteSize(1 << 30).String(), configs.ByteSize(1000).String()}
	want := []string{"4K", "65532", "auto", "1gbit", "100mbit", "512kbit", "none", "12345bit", "500MiB", "1GiB", "1000"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// What the formatters print parses back to the same value.
	for _, w := range []int{1024, 4096, 65532, 64 << 20} {
		if got, err := ParseWindows(FormatWindow(w)); err != nil || len(got) != 1 || got[0] != w {
			t.Errorf("ParseWindows(FormatWindow(%d)) = %v, %v", w, got, err)
		}
	}
	for _, r := range []uint64{1e9, 100e6, 512e3, 12345, 0} {
		if got, err := ParseRate(FormatRate(r)); err != nil || got != r {
			t.Errorf("ParseRate(FormatRate(%d)) = %d, %v", r, got, err)
		}
	}
}

// FuzzParseSpec: any flags give a valid spec or an error naming a flag;
// never a panic, never a sweep beyond the limits.
func FuzzParseSpec(f *testing.F) {
	f.Add("gpxe", "http", "4K..64K/4K", "on,off", "1500,9000", "1gbit,none", "500MiB", 3)
	f.Add("", "", "auto,4K", "on", "1500", "100mbit", "8M", 1)
	f.Add("", "", "1K..64M/1", "", "", "", "", 0)
	f.Add("x", "tftp", ",", ",,", "0", "bit", "1e300", -5)
	f.Fuzz(func(t *testing.T, preset, proto, window, offload, mtu, rate, size string, repeat int) {
		fl := Flags{Preset: preset, Proto: proto, Window: window, Offload: offload, MTU: mtu, Rate: rate, Size: size, Repeat: repeat}
		s, err := ParseSpec(fl)
		if err != nil {
			if !strings.Contains(err.Error(), "--") && !strings.Contains(err.Error(), "sweep") {
				t.Fatalf("error names no flag: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseSpec gave an invalid spec %+v: %v", s, err)
		}
		if n := s.Count(); n < 1 || n > MaxPoints {
			t.Fatalf("Count %d out of 1..%d", n, MaxPoints)
		}
	})
}

// FuzzParseWindows: every window parsed is auto or in range, without
// duplicates.
func FuzzParseWindows(f *testing.F) {
	for _, s := range []string{"4K..64K/1K", "auto,4K", "65532", "1.5K..2K/0.5K", "4K..4G/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ws, err := ParseWindows(s)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, w := range ws {
			if w != WindowAuto && (w < MinWindow || w > MaxWindow) || seen[w] {
				t.Fatalf("ParseWindows(%q) = %v: out of range or duplicate", s, ws)
			}
			seen[w] = true
		}
		if len(ws) == 0 || len(ws) > MaxPoints {
			t.Fatalf("ParseWindows(%q) gave %d windows", s, len(ws))
		}
	})
}

// TestGPXEGrid: the gpxe preset runs the study's 19 windows.
func TestGPXEGrid(t *testing.T) {
	want := []int{4096, 5120, 6144, 7168, 8192, 9216, 10240, 11264, 12288, 13312, 14336, 15360,
		16384, 18432, 20480, 22528, 24576, 32768, 65532}
	s, err := ParseSpec(Flags{Preset: "gpxe"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, s.Windows); d != "" {
		t.Errorf("gpxe windows (-want +got):\n%s", d)
	}
	if got := s.Count(); got != 19*2*3 {
		t.Errorf("Count = %d, want %d", got, 19*2*3)
	}
}

func TestParseDelays(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []time.Duration
		wantErr bool
	}{
		"one":      {in: "100us", want: []time.Duration{100 * time.Microsecond}},
		"list":     {in: "0,0.5ms,2ms", want: []time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond}},
		"none":     {in: "none", want: []time.Duration{0}},
		"micro":    {in: "150µs", want: []time.Duration{150 * time.Microsecond}},
		"negative": {in: "-1ms", wantErr: true},
		"too long": {in: "2s", wantErr: true},
		"garbage":  {in: "soon", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDelays(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseDelays(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := cmp.Diff(tt.want, got); !tt.wantErr && d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	p := Point{Proto: ProtoHTTP, MTU: 1500, Rate: 1e9, Window: 4096, Delay: 100 * time.Microsecond}
	if k := p.Key(); !strings.HasSuffix(k, " delay=100us") {
		t.Errorf("Key %q does not end in the delay", k)
	}
	if k := (Point{Proto: ProtoHTTP, MTU: 1500, Window: 4096}).Key(); strings.Contains(k, "delay") {
		t.Errorf("Key %q names a delay the point has not", k)
	}
}

// TestStudyPresets: every study has a preset that parses and validates.
func TestStudyPresets(t *testing.T) {
	for _, name := range []string{"gpxe", "xilinx", "linkspeed", "netperf", "zynq", "tftp"} {
		if _, err := ParseSpec(Flags{Preset: name}); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
}

// TestParseSpecProtocolFlags: each protocol's own flags (parsed by its
// driver file: http.go, tftp.go, stream.go) are refused or misread with the
// exact message, errors in the same order as before they moved there.
func TestParseSpecProtocolFlags(t *testing.T) {
	const (
		streamOnly = "--direction, --duration and --udp-rate apply to --proto tcp and udp (or --preset xilinx, linkspeed)"
		tftpOnly   = "--blksize and --windowsize apply to --proto tftp (or --preset tftp)"
	)
	tests := map[string]struct {
		in   Flags
		want string
	}{
		"blksize on http":        {in: Flags{BlkSize: "1468"}, want: tftpOnly},
		"windowsize on a stream": {in: Flags{Proto: "tcp", WindowSize: "16"}, want: tftpOnly},
		"window on tftp":         {in: Flags{Proto: "tftp", Window: "4K"}, want: "--window is the HTTP client's SO_RCVBUF; for TFTP use --windowsize (blocks per ACK)"},
		"blksize not a number":   {in: Flags{Proto: "tftp", BlkSize: "x"}, want: `--blksize: "x" is not a whole number; use ` + countForms},
		"windowsize reversed":    {in: Flags{Preset: "tftp", WindowSize: "64..1"}, want: `--windowsize: range "64..1": start is above the end`},
		"blksize and window both": {in: Flags{Proto: "tftp", BlkSize: "4", WindowSize: "0", Window: "x"},
			want: "--window is the HTTP client's SO_RCVBUF; for TFTP use --windowsize (blocks per ACK)\n--blksize: 4 out of range 8..65464\n--windowsize: 0 out of range 1..65535\n" +
				`--window: "x" is not a size: write bytes (1000000) or a number and a unit: 64M, 500MiB, 64GiB, 1.5GiB (powers of 1024) or 500MB, 2GB (powers of 1000); use ` + windowForms},
		"duration on http":    {in: Flags{Duration: "2s"}, want: streamOnly},
		"size on a stream":    {in: Flags{Proto: "udp", Size: "1M"}, want: "--size applies to http and tftp fetches; a stream runs for --duration"},
		"direction unknown":   {in: Flags{Proto: "tcp", Direction: "up,rx"}, want: `--direction: stream: direction "up": use tx (the board sends) or rx (the board receives)`},
		"udp rate none":       {in: Flags{Preset: "xilinx", UDPRate: "none"}, want: `--udp-rate "none": use 100mbit, 1gbit, bits per second, or line (the link rate)`},
		"duration not a time": {in: Flags{Proto: "udp", Duration: "ten"}, want: `--duration "ten": write e.g. 10s or 1m`},
		"mixed list":          {in: Flags{Proto: "tcp,http"}, want: `--proto "tcp,http": a list takes tcp and udp only (http and tftp run one per sweep)`},
		"unknown protocol, tftp flag": {in: Flags{Proto: "ftp", WindowSize: "16"},
			want: `--proto "ftp": use http (an HTTP image fetch), tftp (a TFTP image fetch), or tcp, udp, tcp,udp (streams); http and tftp run one per sweep` + "\n" + tftpOnly},
		"stream and tftp flags on http": {in: Flags{UDPRate: "line", BlkSize: "512"}, want: streamOnly + "\n" + tftpOnly},
		// Before the flags moved, a stream preset switched to http or tftp
		// ignored the stream flags given with it.
		"stream preset switched to tftp": {in: Flags{Preset: "xilinx", Proto: "tftp", UDPRate: "line"}, want: streamOnly},
		// Before, a stream flag's error kept --proto from being applied, so
		// the TFTP flags were refused as if for http.
		"proto tftp beside a stream flag": {in: Flags{Proto: "tftp", BlkSize: "4", Direction: "tx"}, want: streamOnly + "\n--blksize: 4 out of range 8..65464"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := ParseSpec(tt.in)
			if err == nil {
				t.Fatalf("ParseSpec(%+v) = %+v; want an error", tt.in, s)
			}
			if d := cmp.Diff(tt.want, err.Error()); d != "" {
				t.Errorf("ParseSpec(%+v) error (-want +got):\n%s", tt.in, d)
			}
		})
	}
}
