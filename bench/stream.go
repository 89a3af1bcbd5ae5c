package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/stream"
)

// TCP and UDP streams (--proto tcp, udp or tcp,udp; --preset xilinx,
// linkspeed): pxeperf's own stream test (package stream) between the
// testbed's namespaces, in both directions as seen from the board:
//
//	--direction  tx (the board sends), rx (the board receives), tx,rx
//	--duration   per run, whole seconds 1s..60s (iperf3 -t takes seconds)
//	--udp-rate   UDP payload rate: 100mbit, 1gbit, a list, or line: the
//	             tbf rate (1gbit when --rate none) less the UDP/IP/Ethernet
//	             headers, so the tbf passes every datagram
//	--window     TCP only: SO_RCVBUF and SO_SNDBUF on both ends (iperf3 -w)
//
// UDP datagrams carry MTU - 52 bytes (iperf3's choice: the TCP MSS with
// timestamps, 1448 at MTU 1500). The tbf rate applies to both veth ends
// (a link is limited both ways), so Tx and Rx see the same link.

// Stream protocols. A stream spec's Proto is ProtoStream and its Streams
// list which of ProtoTCP and ProtoUDP run; a Point's Proto is one of them.
const (
	ProtoTCP    = "tcp"
	ProtoUDP    = "udp"
	ProtoStream = "tcp/udp"
)

// UDPRateLine in Spec.UDPRates sends at the link's rate (see above).
const UDPRateLine = 0

// Labels of stream records (besides rx_offload, bench_run, rate, window).
const (
	LabelUDPRate = "udp_rate" // the rate asked (line, or tc-style)
	LabelRemote  = "remote"   // remote mode: the server asked
)

// CrossCheckBound is the deviation from iperf3 the bench flags (5%).
const CrossCheckBound = 0.05

// udpOverhead is what a UDP datagram adds on the wire as tbf counts it
// (Ethernet 14 without FCS, IPv4 20, UDP 8).
const udpOverhead = 42

// UDPPacketSize is the UDP payload at an MTU: MTU - 52, iperf3's default
// (the TCP MSS with timestamps).
func UDPPacketSize(mtu int) int { return mtu - 52 }

// UDPSendRate is the payload rate a UDP point sends at: its UDPRate, or for
// UDPRateLine the link rate (tbf, or 1gbit when unlimited) less the header
// share, so the tbf passes every datagram.
func UDPSendRate(p Point) int64 {
	if p.UDPRate != UDPRateLine {
		return int64(p.UDPRate)
	}
	link := float64(p.Rate)
	if link == 0 {
		link = 1e9
	}
	size := float64(UDPPacketSize(p.MTU))
	return int64(math.Floor(link * size / (size + udpOverhead)))
}

// FormatUDPRate prints a --udp-rate value.
func FormatUDPRate(r uint64) string {
	if r == UDPRateLine {
		return "line"
	}
	return FormatRate(r)
}

func (s Spec) isStream() bool { return s.Proto == ProtoStream }

// streamProtocol is pxeperf's TCP/UDP stream test (package stream), swept
// by protocol x direction x window or UDP rate; its drivers are in
// stream_linux.go (testbed) and remote.go.
var streamProtocol = protocol{
	inner:      Spec.streamInner,
	innerCount: Spec.streamInnerCount,
	key:        streamKey,
	validate:   Spec.validateStream,
	use:        useStreams,
	flags:      parseStreamFlags,
	foreign: func(f Flags) []error {
		if f.Direction != "" || f.Duration != "" || f.UDPRate != "" {
			return []error{errors.New("--direction, --duration and --udp-rate apply to --proto tcp and udp (or --preset xilinx, linkspeed)")}
		}
		return nil
	},
	header: func(runID string, spec Spec) string {
		return fmt.Sprintf("pxeperf bench %s: %d runs of %v (%s x %s x %d MTU x %d rate x %d repeats)", runID, spec.Count(), spec.Duration,
			strings.Join(spec.Streams, ","), strings.Join(spec.Directions, ","), len(spec.MTUs), len(spec.Rates), spec.Repeat)
	},
	progress: func(r *Result) string {
		rec := &r.Record
		s := fmt.Sprintf("%s: %.1f Mbit/s", r.Point.Key(), rec.Mbps)
		if rec.Proto == ProtoUDP {
			return s + ", lost " + strconv.FormatFloat(rec.UDPLostPct, 'f', 3, 64) + "%"
		}
		return fmt.Sprintf("%s, %d retransmits", s, rec.Retransmits)
	},
	tables: func(results []Result, recs []record.Record, spec Spec, runID string, text bool) []report.Table {
		return streamTables(results, recs, spec, runID, text, false)
	},
	remoteTables: func(results []Result, recs []record.Record, spec Spec, runID, _ string, text bool) []report.Table {
		return streamTables(results, recs, spec, runID, text, true)
	},
}

func streamKey(p Point) string {
	k := fmt.Sprintf("%s %s mtu=%d rate=%s rx_offload=%s", p.Proto, p.Direction, p.MTU, FormatRate(p.Rate), onOff(p.Offload))
	if p.Proto == ProtoUDP {
		return k + " udp_rate=" + FormatUDPRate(p.UDPRate)
	}
	return k + " window=" + FormatWindow(p.Window)
}

// streamInner is a stream spec's innermost settings before repeats:
// protocol, direction, then the window (TCP) or UDP rate.
func (s Spec) streamInner() []Point {
	var out []Point
	for _, proto := range s.Streams {
		for _, d := range s.Directions {
			if proto == ProtoUDP {
				for _, r := range s.UDPRates {
					out = append(out, Point{Proto: proto, Direction: d, UDPRate: r, Duration: s.Duration})
				}
				continue
			}
			for _, w := range s.Windows {
				out = append(out, Point{Proto: proto, Direction: d, Window: w, Duration: s.Duration})
			}
		}
	}
	return out
}

func (s Spec) streamInnerCount() int {
	inner := 0
	for _, proto := range s.Streams {
		if proto == ProtoUDP {
			inner += len(s.Directions) * len(s.UDPRates)
		} else {
			inner += len(s.Directions) * len(s.Windows)
		}
	}
	return inner
}

func (s Spec) validateStream() []error {
	var errs []error
	if len(s.Streams) == 0 || len(s.Directions) == 0 {
		errs = append(errs, errors.New("--proto tcp/udp needs at least one protocol and one --direction"))
	}
	for _, p := range s.Streams {
		if p != ProtoTCP && p != ProtoUDP {
			errs = append(errs, fmt.Errorf("stream protocol %q: use tcp or udp", p))
		}
	}
	for _, d := range s.Directions {
		if _, err := stream.ParseDirection(d); err != nil {
			errs = append(errs, fmt.Errorf("--direction %q: use tx (the board sends), rx (the board receives) or tx,rx", d))
		}
	}
	if s.Duration < time.Second || s.Duration > stream.MaxDuration || s.Duration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--duration %v: use whole seconds 1s..%v (iperf3 -t takes seconds)", s.Duration, stream.MaxDuration))
	}
	if slices.Contains(s.Streams, ProtoUDP) && len(s.UDPRates) == 0 {
		errs = append(errs, errors.New("--udp-rate needs at least one value for udp"))
	}
	for _, r := range s.UDPRates {
		if r != UDPRateLine && (r < stream.MinRate || r > stream.MaxRate) {
			errs = append(errs, fmt.Errorf("--udp-rate %s: out of range %s..%s (or line)", FormatRate(r), FormatRate(stream.MinRate), FormatRate(stream.MaxRate)))
		}
	}
	for _, m := range s.MTUs {
		if UDPPacketSize(m) < stream.MinPacketSize {
			errs = append(errs, fmt.Errorf("--mtu %d: too small for a UDP stream datagram", m))
		}
	}
	if len(s.BlkSizes) > 0 || len(s.WindowSizes) > 0 {
		errs = append(errs, errors.New("--blksize and --windowsize apply to --proto tftp"))
	}
	if len(s.Windows) == 0 {
		errs = append(errs, errors.New("--window needs at least one value (auto for autotuning)"))
	}
	return errs
}

// streamDefaults turns a spec into a stream one for --proto tcp/udp without
// a stream preset: both directions, 10 s runs, UDP at line rate, RX
// checksum offload on only (unless --offload says), the window as given or
// autotuned.
func streamDefaults(s Spec, f Flags) Spec {
	s.Directions = []string{"tx", "rx"}
	s.Duration = stream.DefaultDuration
	s.UDPRates = []uint64{UDPRateLine}
	s.BlkSizes, s.WindowSizes = nil, nil
	if len(s.Windows) == 0 {
		s.Windows = []int{WindowAuto}
	}
	if f.Offload == "" {
		s.Offloads = []bool{true}
	}
	return s
}

// parseStreams reads --proto when it names tcp and/or udp: ok is false
// for any other protocol.
func parseStreams(proto string) (protos []string, ok bool, err error) {
	other := false
	for item := range strings.SplitSeq(strings.ToLower(proto), ",") {
		item = strings.TrimSpace(item)
		switch item {
		case ProtoTCP, ProtoUDP:
			if !slices.Contains(protos, item) {
				protos = append(protos, item)
			}
		default:
			other = true
		}
	}
	switch {
	case len(protos) == 0:
		return nil, false, nil
	case other:
		return nil, true, fmt.Errorf("--proto %q: a list takes tcp and udp only (http and tftp run one per sweep)", proto)
	}
	return protos, true, nil
}

// useStreams takes --proto when it names tcp and/or udp (a list mixing
// in another protocol is an error) and turns s into a stream spec.
func useStreams(s Spec, proto string, f Flags) (Spec, bool, error) {
	protos, ok, err := parseStreams(proto)
	if !ok || err != nil {
		return s, ok, err
	}
	if !s.isStream() {
		s = streamDefaults(s, f)
	}
	s.Proto, s.Streams = ProtoStream, protos
	return s, true, nil
}

// parseStreamFlags applies --direction, --duration and --udp-rate to a
// stream spec, and refuses --size for it.
func parseStreamFlags(s *Spec, f Flags) []error {
	var errs []error
	if f.Size != "" {
		errs = append(errs, errors.New("--size applies to http and tftp fetches; a stream runs for --duration"))
	}
	if f.Direction != "" {
		var ds []string
		for item := range strings.SplitSeq(strings.ToLower(f.Direction), ",") {
			d, err := stream.ParseDirection(strings.TrimSpace(item))
			if err != nil {
				errs = append(errs, fmt.Errorf("--direction: %w", err))
				continue
			}
			if !slices.Contains(ds, d.String()) {
				ds = append(ds, d.String())
			}
		}
		s.Directions = ds
	}
	if f.Duration != "" {
		d, err := time.ParseDuration(strings.TrimSpace(f.Duration))
		if err != nil {
			errs = append(errs, fmt.Errorf("--duration %q: write e.g. 10s or 1m", f.Duration))
		}
		s.Duration = d
	}
	if f.UDPRate != "" {
		var rs []uint64
		for item := range strings.SplitSeq(f.UDPRate, ",") {
			if strings.EqualFold(strings.TrimSpace(item), "line") {
				rs = append(rs, UDPRateLine)
				continue
			}
			r, err := ParseRate(item)
			if err != nil || r == 0 {
				errs = append(errs, fmt.Errorf("--udp-rate %q: use 100mbit, 1gbit, bits per second, or line (the link rate)", item))
				continue
			}
			if !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
		s.UDPRates = rs
	}
	return errs
}

// streamConfig is the stream test of point p against the stream server at
// addr, on a testbed and remotely alike: UDP at the point's send rate and
// packet size; TCP with the window, unless auto, as both buffers on both
// ends (as iperf3 -w).
func streamConfig(addr string, p Point) stream.Config {
	dir, _ := stream.ParseDirection(p.Direction)
	c := stream.Config{Addr: addr, Direction: dir, Duration: p.Duration, Interval: time.Second}
	if p.Proto == ProtoUDP {
		c.Rate, c.PacketSize = UDPSendRate(p), UDPPacketSize(p.MTU)
	} else if p.Window != WindowAuto {
		c.RcvBuf, c.SndBuf, c.ServerBuf = p.Window, p.Window, p.Window
	}
	return c
}

// runStream runs cfg, a UDP or TCP test as p says, for at most its
// duration plus 30 s.
func runStream(ctx context.Context, p Point, cfg stream.Config) (stream.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Duration+30*time.Second)
	defer cancel()
	if p.Proto == ProtoUDP {
		return stream.UDP(ctx, cfg)
	}
	return stream.TCP(ctx, cfg)
}
