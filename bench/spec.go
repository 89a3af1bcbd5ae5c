// Package bench runs `pxeperf bench`: sweeps of measured fetches on a
// netlab testbed (two namespaces joined by a veth pair), with pxeperf's own
// server code on the server side and pxeperf's clients on the client side.
// Every fetch becomes a record.Record (Source "bench") in the same store as
// served fetches, so `pxeperf report` prints bench runs and lab boots alike.
//
// A sweep is a Spec (parsed from the command line by ParseSpec, or a Preset)
// expanded by Points into a cartesian product in a fixed order. Run executes
// it (runner_linux.go); FitModel checks the numbers against
// min(window/RTT, line rate).
//
// What a bench record means (the fields that differ from a served fetch):
// Direction "rx" (the client, standing for the board, receives);
// WndRequested is the SO_RCVBUF the client asked for (0: autotuned); WndMax
// is the window the server saw the client advertise (TCP_INFO); RateLimit
// is the tbf rate on the server's egress; the offload fields (RxCsum, TxCsum,
// TSO, GSO, GRO) are the CLIENT's veth end as read back after the change,
// because the client's RX checksum offload is the knob of the gPXE study,
// and the label rx_offload repeats RxCsum for report.RxOffload.
//
// The SO_RCVBUF asked is not the window: the kernel doubles the request
// and advertises what its scaling ratio of payload to buffer memory
// allows. So the table rows (report.WindowOffload) follow the window seen,
// and the sweep table shows all three (bench/DESIGN.md#so_rcvbuf-and-the-window
// has the mapping as measured).
package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// Protocols the bench runs: ProtoHTTP is an HTTP image fetch from
// pxeperf's httpboot server (swept by window); ProtoTFTP a TFTP image fetch
// from pxeperf's tftp server (swept by blksize x windowsize, tftp.go).
const (
	ProtoHTTP = "http"
	ProtoTFTP = "tftp"
)

// WindowAuto in Spec.Windows means: do not set SO_RCVBUF (the kernel
// autotunes the receive window).
const WindowAuto = 0

// Limits of what a spec may ask for.
const (
	MinWindow  = 1 << 10  // smaller SO_RCVBUF values are raised by the kernel anyway
	MaxWindow  = 64 << 20 // above net.core.rmem_max the kernel caps it
	MaxPoints  = 10000    // a sweep larger than this is a typo
	MaxRepeat  = 100
	MinSize    = 1 << 10
	MaxSize    = 64 << 30
	MinMTU     = 576 // IPv4 minimum reassembly size; tbf burst needs room for a frame
	MaxMTU     = 65535
	MinRateBps = 8000 // 1 kbit/s... anything lower never finishes
	MaxDelay   = time.Second
)

// Spec is a sweep before expansion: every list is tried against every other.
type Spec struct {
	Proto    string
	Windows  []int    // client SO_RCVBUF in bytes; WindowAuto: autotuned
	Offloads []bool   // client RX checksum offload
	MTUs     []int    // both veth ends
	Rates    []uint64 // tbf bits/s on the server's egress; 0: unlimited
	// Delays are one-way delays added each way by netlab's delay line
	// (--delay); nil or {0}: none, the testbed is a plain veth pair.
	Delays []time.Duration
	Size   int64  // image bytes per fetch
	Repeat int    // fetches per point
	Seed   uint64 // image content (images.Generate seed)
	// TFTP only (Proto ProtoTFTP), in place of Windows: the blksize and
	// windowsize options the client asks for.
	BlkSizes, WindowSizes []int
	// TCP/UDP streams only (Proto ProtoStream, stream.go): which of tcp
	// and udp run, directions (tx, rx), seconds per run, UDP rates.
	Streams, Directions []string
	Duration            time.Duration
	UDPRates            []uint64
}

// Point is one fetch of a sweep.
type Point struct {
	Index   int // 0-based position in the sweep
	Proto   string
	Window  int // WindowAuto: autotuned
	Offload bool
	MTU     int
	Rate    uint64        // 0: unlimited
	Delay   time.Duration // one way, each way; 0: none
	Size    int64
	Rep     int // 1-based repeat number
	// TFTP only: the options asked for.
	BlkSize, WindowSize int
	// Streams only: "tx" or "rx" (the board's side), run length, UDP rate.
	Direction string
	Duration  time.Duration
	UDPRate   uint64
}

// Key names the point without its repeat number: the fetches that share a
// key are the repeats whose median and spread are reported.
func (p Point) Key() string {
	var k string
	if pr, ok := protocolOf(p.Proto); ok {
		k = pr.key(p)
	} else {
		k = p.Proto + " (unknown)"
	}
	if p.Delay > 0 {
		k += " delay=" + FormatDelay(p.Delay)
	}
	return k
}

// protocol is what the sweep needs of one protocol's spec: its own
// settings of a point (inner, before the repeats; innerCount without
// building them), a point's key, the checks of its part of a spec, and
// its part of ParseSpec (use, flags, foreign). One each: http.go, tftp.go,
// stream.go. The common axes (MTU, rate, delay, offload, repeat) are the
// sweep's (Points, ParseSpec).
type protocol struct {
	inner      func(Spec) []Point
	innerCount func(Spec) int
	key        func(Point) string
	validate   func(Spec) []error
	// use turns s (a preset, or Default) into this protocol's spec when
	// --proto's value names it (ok); err: it names it wrongly.
	use func(s Spec, proto string, f Flags) (_ Spec, ok bool, err error)
	// flags applies the protocol's own flags to s, a spec of it (nil:
	// none); foreign refuses them for another protocol's spec (nil: none).
	flags   func(s *Spec, f Flags) []error
	foreign func(f Flags) []error
	// What a sweep of it prints (present.go): the header line, a completed
	// point's progress line, and the tables at the end on a testbed and
	// against a remote serve (nil: no remote mode).
	header       func(runID string, s Spec) string
	progress     func(r *Result) string
	tables       func(results []Result, recs []record.Record, s Spec, runID string, text bool) []report.Table
	remoteTables func(results []Result, recs []record.Record, s Spec, runID, server string, text bool) []report.Table
}

// protocols by Spec.Proto. Filled by init, not in the declaration: their
// tables name points by Point.Key, which looks them up here.
var protocols map[string]protocol

func init() {
	protocols = map[string]protocol{
		ProtoHTTP:   httpProtocol,
		ProtoTFTP:   tftpProtocol,
		ProtoStream: streamProtocol,
	}
}

// protocolOf is the protocol of a spec's or a point's Proto (a stream
// point's is tcp or udp).
func protocolOf(proto string) (protocol, bool) {
	if proto == ProtoTCP || proto == ProtoUDP {
		proto = ProtoStream
	}
	pr, ok := protocols[proto]
	return pr, ok
}

// protoOrder is the order --proto is offered to the protocols (streams
// first: they take lists) and their flags' errors are reported in.
var protoOrder = []string{ProtoStream, ProtoTFTP, ProtoHTTP}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Points expands the spec in a fixed order: MTU (slowest to change), then
// rate, delay, offload, the protocol's own settings (the window for HTTP,
// blksize x windowsize for TFTP, protocol x direction x window or UDP rate
// for streams), and the repeats of one setting back to back. The same spec
// always gives the same order.
func (s Spec) Points() []Point {
	var pts []Point
	inner := s.innerPoints()
	for _, mtu := range s.MTUs {
		for _, rate := range s.Rates {
			for _, delay := range s.delays() {
				for _, off := range s.Offloads {
					for _, in := range inner {
						for rep := 1; rep <= s.Repeat; rep++ {
							p := in
							if p.Proto == "" {
								p.Proto = s.Proto
							}
							p.Index, p.Offload, p.MTU, p.Rate, p.Delay, p.Rep = len(pts), off, mtu, rate, delay, rep
							pts = append(pts, p)
						}
					}
				}
			}
		}
	}
	return pts
}

// innerPoints are the protocol's own settings of one point.
func (s Spec) innerPoints() []Point {
	if pr, ok := protocols[s.Proto]; ok {
		return pr.inner(s)
	}
	return nil
}

// delays is Delays, or no delay.
func (s Spec) delays() []time.Duration {
	if len(s.Delays) == 0 {
		return []time.Duration{0}
	}
	return s.Delays
}

// HasDelay reports whether any point adds a delay (the testbed then needs
// netlab's delay line).
func (s Spec) HasDelay() bool {
	return slices.ContainsFunc(s.Delays, func(d time.Duration) bool { return d > 0 })
}

// Count is len(s.Points()) without building them (0 on overflow).
func (s Spec) Count() int {
	inner := 0
	if pr, ok := protocols[s.Proto]; ok {
		inner = pr.innerCount(s)
	}
	n := uint64(1)
	for _, k := range []int{len(s.MTUs), len(s.Rates), len(s.delays()), len(s.Offloads), inner, s.Repeat} {
		if k <= 0 {
			return 0
		}
		n *= uint64(k)
		if n > math.MaxInt32 {
			return 0
		}
	}
	return int(n)
}

// Validate checks a spec built by hand (ParseSpec's results pass).
func (s Spec) Validate() error {
	var errs []error
	if pr, ok := protocols[s.Proto]; ok {
		errs = append(errs, pr.validate(s)...)
	} else {
		errs = append(errs, fmt.Errorf("--proto %q: the bench runs http (an HTTP image fetch) or tftp (a TFTP image fetch)", s.Proto))
	}
	if (s.Proto != ProtoTFTP && len(s.Windows) == 0) || len(s.Offloads) == 0 || len(s.MTUs) == 0 || len(s.Rates) == 0 {
		errs = append(errs, errors.New("--window, --offload, --mtu and --rate each need at least one value"))
	}
	for _, w := range s.Windows {
		if w != WindowAuto && (w < MinWindow || w > MaxWindow) {
			errs = append(errs, fmt.Errorf("--window %d: out of range %s..%s (or auto)", w, FormatWindow(MinWindow), FormatWindow(MaxWindow)))
		}
	}
	for _, m := range s.MTUs {
		if m < MinMTU || m > MaxMTU {
			errs = append(errs, fmt.Errorf("--mtu %d: out of range %d..%d", m, MinMTU, MaxMTU))
		}
	}
	for _, d := range s.Delays {
		if d < 0 || d > MaxDelay {
			errs = append(errs, fmt.Errorf("--delay %v: out of range 0..%v", d, MaxDelay))
		}
	}
	for _, r := range s.Rates {
		if r != 0 && r < MinRateBps {
			errs = append(errs, fmt.Errorf("--rate %d bit/s: below %s", r, FormatRate(MinRateBps)))
		}
	}
	if s.Size < MinSize || s.Size > MaxSize {
		errs = append(errs, fmt.Errorf("--size %d: out of range %s..%s", s.Size, configs.ByteSize(MinSize).String(), configs.ByteSize(MaxSize).String()))
	}
	if s.Repeat < 1 || s.Repeat > MaxRepeat {
		errs = append(errs, fmt.Errorf("--repeat %d: out of range 1..%d", s.Repeat, MaxRepeat))
	}
	if len(errs) == 0 && (s.Count() == 0 || s.Count() > MaxPoints) {
		errs = append(errs, fmt.Errorf("the sweep has more than %d fetches: narrow --window, --offload, --mtu, --rate or --repeat", MaxPoints))
	}
	return errors.Join(errs...)
}

// Flags are the sweep flags as typed; empty strings take the preset's value
// (or the default when no preset is given).
type Flags struct {
	Preset, Proto, Window, Offload, MTU, Rate, Size string
	Delay                                           string // --delay: one way, each way
	BlkSize, WindowSize                             string // TFTP: --blksize, --windowsize
	Direction, Duration, UDPRate                    string // TCP/UDP streams
	Repeat                                          int    // 0: preset or default
	Seed                                            uint64
}

// Default is the spec used for flags left empty without a preset: one
// autotuned HTTP fetch of 64 MiB per offload state at MTU 1500, unlimited.
func Default() Spec {
	return Spec{Proto: ProtoHTTP, Windows: []int{WindowAuto}, Offloads: []bool{true, false}, MTUs: []int{1500},
		Rates: []uint64{0}, Size: 64 << 20, Repeat: 1, Seed: 1}
}

// Presets that run, by name.
var presets = map[string]Spec{
	// TFTP by blksize x windowsize (RFC 7440's study, U-Boot's and iPXE's
	// settings): 512 and 1468-byte blocks, windows 1 (RFC 1350 lock-step)
	// to 64, under a 1gbit tbf.
	"tftp": {Proto: ProtoTFTP, BlkSizes: []int{512, 1468}, WindowSizes: []int{1, 4, 8, 16, 32, 64},
		Offloads: []bool{true}, MTUs: []int{1500}, Rates: []uint64{1e9}, Size: 64 << 20, Repeat: 3, Seed: 1},
	// The 2010 gPXE study: 500 MB HTTP imgfetch by TCP_MAX_WINDOW_SIZE,
	// its 19 rows (4096..15360 in 1024-byte steps, 16384..24576 in 2048,
	// 32768, 65532), board RX checksum offload on and off, GigE. Its RTT
	// is not published; add --delay to make the window matter (on veth
	// every window above a few KB runs at line rate).
	"gpxe": {Proto: ProtoHTTP, Windows: GPXEWindows(), Offloads: []bool{true, false},
		MTUs: []int{1500}, Rates: []uint64{1e9}, Size: 500 << 20, Repeat: 3, Seed: 1},
	// The Xilinx board tables: TCP and UDP, Tx and Rx, MTU 1500 and 9000
	// on a 1G link (UDP at line rate), 10 s runs.
	"xilinx": {Proto: ProtoStream, Streams: []string{ProtoTCP, ProtoUDP}, Directions: []string{"tx", "rx"},
		Windows: []int{WindowAuto}, UDPRates: []uint64{UDPRateLine}, Offloads: []bool{true}, MTUs: []int{1500, 9000},
		Rates: []uint64{1e9}, Duration: 10 * time.Second, Size: 64 << 20, Repeat: 3, Seed: 1},
	// Throughput by link speed (Critical Link's MitySOM-5CSx page): TCP and
	// UDP both ways over 1gbit, 100mbit, 10mbit.
	"linkspeed": {Proto: ProtoStream, Streams: []string{ProtoTCP, ProtoUDP}, Directions: []string{"tx", "rx"},
		Windows: []int{WindowAuto}, UDPRates: []uint64{UDPRateLine}, Offloads: []bool{true}, MTUs: []int{1500},
		Rates: []uint64{1e9, 100e6, 10e6}, Duration: 10 * time.Second, Size: 64 << 20, Repeat: 3, Seed: 1},
	// The 2008 MicroBlaze netperf TCP_STREAM: the board sends for 60 s
	// into an 8192-byte receive socket; link not stated (a 10/100 EMAC:
	// 100mbit).
	"netperf": {Proto: ProtoStream, Streams: []string{ProtoTCP}, Directions: []string{"tx"},
		Windows: []int{8192}, UDPRates: []uint64{UDPRateLine}, Offloads: []bool{true}, MTUs: []int{1500},
		Rates: []uint64{100e6}, Duration: 60 * time.Second, Size: 64 << 20, Repeat: 3, Seed: 1},
	// The Zynq iperf3 page: TCP both ways, iperf3's defaults (10 s), on the
	// board's gigabit port.
	"zynq": {Proto: ProtoStream, Streams: []string{ProtoTCP}, Directions: []string{"tx", "rx"},
		Windows: []int{WindowAuto}, UDPRates: []uint64{UDPRateLine}, Offloads: []bool{true}, MTUs: []int{1500},
		Rates: []uint64{1e9}, Duration: 10 * time.Second, Size: 64 << 20, Repeat: 3, Seed: 1},
}

// GPXEWindows are the gPXE study's 19 TCP_MAX_WINDOW_SIZE rows, with its
// two misprints (6114, 14436) read as the 1024-byte steps they stand in.
func GPXEWindows() []int {
	var w []int
	for x := 4096; x <= 15360; x += 1024 {
		w = append(w, x)
	}
	for x := 16384; x <= 24576; x += 2048 {
		w = append(w, x)
	}
	return append(w, 32768, 65532)
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var names []string
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns a copy of the named preset.
func Preset(name string) (Spec, bool) {
	s, ok := presets[name]
	if !ok {
		return Spec{}, false
	}
	s.Windows, s.Offloads = slices.Clone(s.Windows), slices.Clone(s.Offloads)
	s.MTUs, s.Rates, s.Delays = slices.Clone(s.MTUs), slices.Clone(s.Rates), slices.Clone(s.Delays)
	s.BlkSizes, s.WindowSizes = slices.Clone(s.BlkSizes), slices.Clone(s.WindowSizes)
	s.Streams, s.Directions, s.UDPRates = slices.Clone(s.Streams), slices.Clone(s.Directions), slices.Clone(s.UDPRates)
	return s, true
}

// ParseSpec builds a spec from flags: the preset (or Default) first, then
// every non-empty flag replaces that part of it. All errors are reported
// together, each naming its flag and the forms it takes.
func ParseSpec(f Flags) (Spec, error) {
	s, err := presetOrDefault(f.Preset)
	if err != nil {
		return Spec{}, err
	}
	var errs []error
	if f.Proto != "" {
		var err error
		if s, err = s.useProto(f); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.protocolFlags(f)...)
	errs = append(errs, s.testbedFlags(f)...)
	if f.Repeat != 0 {
		s.Repeat = f.Repeat
	}
	if f.Seed != 0 {
		s.Seed = f.Seed
	}
	if len(errs) > 0 {
		return Spec{}, errors.Join(errs...)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// presetOrDefault is the spec the flags start from: --preset's, else
// Default.
func presetOrDefault(name string) (Spec, error) {
	if name == "" {
		return Default(), nil
	}
	p, ok := Preset(strings.ToLower(strings.TrimSpace(name)))
	if !ok {
		return Spec{}, fmt.Errorf("--preset %q: unknown; presets: %s", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// protocolFlags applies the flags of s's protocol and rejects those of the
// others (each protocol's flags and foreign hooks).
func (s *Spec) protocolFlags(f Flags) []error {
	var errs []error
	for _, name := range protoOrder {
		pr := protocols[name]
		switch {
		case s.Proto == name && pr.flags != nil:
			errs = append(errs, pr.flags(s, f)...)
		case s.Proto != name && pr.foreign != nil:
			errs = append(errs, pr.foreign(f)...)
		}
	}
	return errs
}

// testbedFlags applies the flags every protocol shares: the window, the
// testbed's knobs and the image size.
func (s *Spec) testbedFlags(f Flags) []error {
	var errs []error
	parseFlag(&errs, "--window", f.Window, ParseWindows, &s.Windows)
	parseFlag(&errs, "--offload", f.Offload, ParseOffloads, &s.Offloads)
	parseFlag(&errs, "--mtu", f.MTU, ParseMTUs, &s.MTUs)
	parseFlag(&errs, "--rate", f.Rate, ParseRates, &s.Rates)
	parseFlag(&errs, "--delay", f.Delay, ParseDelays, &s.Delays)
	parseFlag(&errs, "--size", f.Size, parseBytes, &s.Size)
	return errs
}

// parseFlag sets *dst to parse(value) when the flag was given (value not
// empty), adding an error that names the flag to errs.
func parseFlag[T any](errs *[]error, flag, value string, parse func(string) (T, error), dst *T) {
	if value == "" {
		return
	}
	v, err := parse(value)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %w", flag, err))
	}
	*dst = v
}

// useProto applies --proto: the first protocol that takes its value turns
// s into a spec of it.
func (s Spec) useProto(f Flags) (Spec, error) {
	for _, name := range protoOrder {
		if t, ok, err := protocols[name].use(s, f.Proto, f); ok {
			return t, err
		}
	}
	// No protocol's: every protocol's own flags are then foreign.
	s.Proto = strings.ToLower(strings.TrimSpace(f.Proto))
	return s, fmt.Errorf("--proto %q: use http (an HTTP image fetch), tftp (a TFTP image fetch), or tcp, udp, tcp,udp (streams); http and tftp run one per sweep", f.Proto)
}

const windowForms = "a size (4K, 16KiB, 65532), a range with a step (4K..64K/4K), auto, or a comma list of those"

// ParseWindows parses --window: comma-separated items, each a size, a range
// lo..hi/step (inclusive; hi is included when the steps reach it), or auto.
// Duplicates are dropped; the order is as given (ranges ascending).
func ParseWindows(s string) ([]int, error) {
	points := pointList{noun: "windows"}
	add := func(w int) error {
		if w != WindowAuto && (w < MinWindow || w > MaxWindow) {
			return fmt.Errorf("window %s out of range %s..%s", FormatWindow(w), FormatWindow(MinWindow), FormatWindow(MaxWindow))
		}
		return points.add(w)
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			return nil, fmt.Errorf("%q: empty item; use %s", s, windowForms)
		case strings.EqualFold(item, "auto"):
			if err := add(WindowAuto); err != nil {
				return nil, err
			}
		case strings.Contains(item, ".."):
			lo, hi, step, err := parseRange(item)
			if err != nil {
				return nil, err
			}
			for w := lo; w <= hi; w += step {
				if err := add(int(w)); err != nil {
					return nil, err
				}
			}
		default:
			n, err := parseBytes(item) // its errors name item
			if err != nil {
				return nil, fmt.Errorf("%w; use %s", err, windowForms)
			}
			if err := add(int(n)); err != nil {
				return nil, err
			}
		}
	}
	return points.vals, nil
}

// pointList is the values of a list flag (--window, --blksize, ...) in the
// order given, repeats dropped; past MaxPoints values add fails, naming
// them by noun, so a typo cannot ask for an endless grid.
type pointList struct {
	vals []int
	noun string
}

func (p *pointList) add(n int) error {
	if !slices.Contains(p.vals, n) {
		p.vals = append(p.vals, n)
	}
	if len(p.vals) > MaxPoints {
		return fmt.Errorf("more than %d %s", MaxPoints, p.noun)
	}
	return nil
}

func parseRange(item string) (lo, hi, step int64, err error) {
	a, rest, _ := strings.Cut(item, "..")
	b, st, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, fmt.Errorf("range %q has no step: write lo..hi/step, e.g. 4K..64K/4K", item)
	}
	if lo, err = parseBytes(a); err != nil {
		return 0, 0, 0, fmt.Errorf("range %q: start: %w", item, err)
	}
	if hi, err = parseBytes(b); err != nil {
		return 0, 0, 0, fmt.Errorf("range %q: end: %w", item, err)
	}
	if step, err = parseBytes(st); err != nil {
		return 0, 0, 0, fmt.Errorf("range %q: step: %w", item, err)
	}
	if lo > hi {
		return 0, 0, 0, fmt.Errorf("range %q: start is above the end", item)
	}
	if (hi-lo)/step >= MaxPoints {
		return 0, 0, 0, fmt.Errorf("range %q: more than %d steps", item, MaxPoints)
	}
	return lo, hi, step, nil
}

// ParseOffloads parses --offload: on, off, or both as "on,off" (in the
// order given).
func ParseOffloads(s string) ([]bool, error) {
	var out []bool
	seen := map[bool]bool{}
	for item := range strings.SplitSeq(s, ",") {
		var v bool
		switch strings.ToLower(strings.TrimSpace(item)) {
		case "on", "1", "true", "yes":
			v = true
		case "off", "0", "false", "no":
			v = false
		default:
			return nil, fmt.Errorf("%q: use on, off or on,off", item)
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// ParseMTUs parses --mtu: a comma list of MTUs in bytes (576..65535).
func ParseMTUs(s string) ([]int, error) {
	var out []int
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		m, err := strconv.Atoi(item)
		if err != nil || m < MinMTU || m > MaxMTU {
			return nil, fmt.Errorf("%q: an MTU is a number of bytes %d..%d, e.g. 1500,9000", item, MinMTU, MaxMTU)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// rateUnits are tc's rate units (SI, bits): a bare number is bit/s.
var rateUnits = []struct {
	suffix string
	mult   float64
}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}

// ParseRates parses --rate: a comma list of tc-style rates (1gbit, 100mbit,
// 10mbit, 512kbit, a bare number in bit/s) or none (unlimited).
func ParseRates(s string) ([]uint64, error) {
	var out []uint64
	for item := range strings.SplitSeq(s, ",") {
		r, err := ParseRate(item)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// ParseRate parses one rate; none gives 0.
func ParseRate(item string) (uint64, error) {
	const forms = "use 1gbit, 100mbit, 10mbit, 512kbit, bits per second, or none"
	t := strings.ToLower(strings.TrimSpace(item))
	if t == "none" || t == "unlimited" {
		return 0, nil
	}
	mult, num := 1.0, t
	for _, u := range rateUnits {
		if n, ok := strings.CutSuffix(t, u.suffix); ok {
			mult, num = u.mult, n
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("%q: %s", item, forms)
	}
	bps := v * mult
	if bps < MinRateBps || bps > 400e9 {
		return 0, fmt.Errorf("%q: out of range %s..400gbit; %s", item, FormatRate(MinRateBps), forms)
	}
	return uint64(math.Round(bps)), nil
}

// parseBytes reads a byte count with configs.ParseSize (the one size
// parser: 65532, 4K, 16KiB, 500MiB, 1.5G; K, M, G and KiB, MiB, GiB are
// 1024-based, KB, MB, GB 1000-based) and keeps it within 1..MaxSize.
func parseBytes(s string) (int64, error) {
	n, err := configs.ParseSize(s)
	if err != nil {
		return 0, err
	}
	if n < 1 || n > MaxSize {
		return 0, fmt.Errorf("%q: out of range 1..%s", s, configs.ByteSize(MaxSize).String())
	}
	return n, nil
}

// ParseDelays parses --delay: a comma list of one-way delays as Go
// durations (100us, 0.5ms, 2ms), 0 or none for no delay.
func ParseDelays(s string) ([]time.Duration, error) {
	var out []time.Duration
	for item := range strings.SplitSeq(s, ",") {
		t := strings.ToLower(strings.TrimSpace(item))
		var d time.Duration
		if t != "none" && t != "0" {
			var err error
			if d, err = time.ParseDuration(strings.ReplaceAll(t, "µ", "u")); err != nil || d < 0 || d > MaxDelay {
				return nil, fmt.Errorf("%q: a one-way delay is a duration 0..%v, e.g. 100us, 0.5ms, 2ms, or none", item, MaxDelay)
			}
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// FormatDelay prints a one-way delay as --delay takes it: none, 100us, 2ms.
func FormatDelay(d time.Duration) string {
	switch {
	case d == 0:
		return "none"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d%time.Microsecond == 0:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "us"
	}
	return d.String()
}

// FormatWindow prints a window as the flags take it: auto, 4K, 65532.
func FormatWindow(w int) string {
	if w == WindowAuto {
		return "auto"
	}
	if w%1024 == 0 {
		return strconv.Itoa(w/1024) + "K"
	}
	return strconv.Itoa(w)
}

// FormatRate prints a rate as tc does: 1gbit, 100mbit, none.
func FormatRate(bps uint64) string {
	switch {
	case bps == 0:
		return "none"
	case bps%1e9 == 0:
		return strconv.FormatUint(bps/1e9, 10) + "gbit"
	case bps%1e6 == 0:
		return strconv.FormatUint(bps/1e6, 10) + "mbit"
	case bps%1e3 == 0:
		return strconv.FormatUint(bps/1e3, 10) + "kbit"
	}
	return strconv.FormatUint(bps, 10) + "bit"
}
