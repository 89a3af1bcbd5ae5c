// Package iperf runs iperf3 on a netlab testbed and reads its JSON report
// (-J) into a stream.Result, so `pxeperf bench --cross-check iperf3` can
// print pxeperf's own figures (package stream) next to iperf3's from the
// same testbed, point by point.
//
// Mapping (iperf3 3.12 JSON):
//
//	end.sum_sent / end.sum_received -> Result.Sender / Result.Receiver
//	intervals[].streams[0]          -> Result.Intervals (the client's view)
//	server_output_json.intervals    -> Result.PeerIntervals; for -R the
//	                                   server's retransmits, snd_cwnd, rtt are
//	                                   merged into Intervals, for UDP Tx its
//	                                   loss and jitter, as stream does
//
// One difference in UDP accounting: iperf3's receiver does not count
// datagrams still in flight when the test ends as lost; stream does, from
// the sender's count. Both agree when the tail arrives.
package iperf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/stream"
)

// DefaultPort is iperf3's.
const DefaultPort = 5201

// Config is one iperf3 run; it mirrors stream.Config.
type Config struct {
	UDP       bool
	Direction stream.Direction // Rx runs iperf3 -R
	Duration  time.Duration    // -t, default 10 s; iperf3 takes whole seconds, so it is rounded up
	Interval  time.Duration    // -i on both ends, default 1 s
	Bytes     int64            // -n: stop after this many bytes instead of Duration (TCP)
	Window    int              // -w: SO_SNDBUF and SO_RCVBUF on both ends; 0 leaves autotuning
	Rate      int64            // -b, bit/s (UDP; default stream.DefaultRate)
	// PacketSize is -l for UDP, default stream.DefaultPacketSize (iperf3
	// would otherwise pick one from the control connection's MSS).
	PacketSize int
	Port       int // default DefaultPort
}

// Run is iperf3's outcome.
type Run struct {
	stream.Result
	// ClientCPU is the iperf3 client process's user+system time, from its
	// rusage (ip netns exec execs iperf3, so the process is iperf3).
	ClientCPU time.Duration
	JSON      []byte // the client's report, as printed
}

// Args are the client's and server's command lines for cfg against the
// server at host.
func (cfg Config) Args(host string) (client, server []string) {
	cfg = cfg.withDefaults()
	port := strconv.Itoa(cfg.Port)
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
	server = []string{"-s", "-1", "-J", "-p", port, "-i", secs(cfg.Interval)}
	client = []string{"-c", host, "-p", port, "-J", "--get-server-output"}
	if cfg.Bytes > 0 {
		client = append(client, "-n", strconv.FormatInt(cfg.Bytes, 10))
	} else {
		client = append(client, "-t", strconv.Itoa(int(math.Ceil(cfg.Duration.Seconds()))))
	}
	client = append(client, "-i", secs(cfg.Interval))
	if cfg.Direction == stream.Rx {
		client = append(client, "-R")
	}
	if cfg.UDP {
		client = append(client, "-u", "-b", strconv.FormatInt(cfg.Rate, 10), "-l", strconv.Itoa(cfg.PacketSize))
	}
	if cfg.Window > 0 {
		client = append(client, "-w", strconv.Itoa(cfg.Window))
	}
	return client, server
}

func (cfg Config) withDefaults() Config {
	if cfg.Duration == 0 {
		cfg.Duration = stream.DefaultDuration
	}
	if cfg.Interval == 0 {
		cfg.Interval = stream.DefaultInterval
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.UDP {
		if cfg.Rate == 0 {
			cfg.Rate = stream.DefaultRate
		}
		if cfg.PacketSize == 0 {
			cfg.PacketSize = stream.DefaultPacketSize
		}
	}
	return cfg
}

// connectTries bounds the client's attempts while the one-off server
// starts listening.
const connectTries = 40

// RunOn runs `iperf3 -s -1` on the testbed's server side and the client on
// its client side, and parses the client's report.
func RunOn(ctx context.Context, tb *netlab.Testbed, cfg Config) (Run, error) {
	cargs, sargs := cfg.Args(tb.IP(netlab.Server).String())
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := tb.Command(sctx, netlab.Server, "iperf3", sargs...)
	var serr bytes.Buffer
	srv.Stderr = &serr
	if err := srv.Start(); err != nil {
		return Run{}, fmt.Errorf("iperf: starting the server: %w (is iperf3 installed?)", err)
	}
	defer func() { cancel(); srv.Wait() }()
	var run Run
	for try := 0; ; try++ {
		cl := tb.Command(ctx, netlab.Client, "iperf3", cargs...)
		var stderr bytes.Buffer
		cl.Stderr = &stderr
		out, err := cl.Output()
		if cl.ProcessState != nil {
			run.ClientCPU = cl.ProcessState.UserTime() + cl.ProcessState.SystemTime()
		}
		if ctx.Err() != nil {
			return Run{}, fmt.Errorf("iperf: %w", ctx.Err())
		}
		res, perr := Parse(out)
		// A refused connect is the one-off server not listening yet (iperf3
		// 3.12 may exit 0 after it).
		if perr != nil && try < connectTries && bytes.Contains(out, []byte("unable to connect")) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if perr == nil && err != nil {
			perr = err
		}
		if perr != nil {
			return Run{}, fmt.Errorf("iperf: iperf3 %s: %w (stderr %q; server stderr %q)", strings.Join(cargs, " "),
				perr, stderr.String(), serr.String())
		}
		run.Result, run.JSON = res, out
		return run, nil
	}
}

// report is the part of iperf3's JSON that Parse reads.
type report struct {
	Start struct {
		TestStart struct {
			Protocol string `json:"protocol"`
			Reverse  int    `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []struct {
		Streams []interval `json:"streams"`
		Sum     interval   `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumSent     *interval `json:"sum_sent"`
		SumReceived *interval `json:"sum_received"`
		Sum         *interval `json:"sum"`
	} `json:"end"`
	Error  string          `json:"error"`
	Server json.RawMessage `json:"server_output_json"`
}

type interval struct {
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Bytes         int64   `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Retransmits   int64   `json:"retransmits"`
	SndCwnd       int64   `json:"snd_cwnd"`
	RTT           int64   `json:"rtt"` // µs
	Packets       int64   `json:"packets"`
	Lost          int64   `json:"lost_packets"`
	LostPercent   float64 `json:"lost_percent"`
	OutOfOrder    int64   `json:"out_of_order"`
	JitterMs      float64 `json:"jitter_ms"`
	Omitted       bool    `json:"omitted"`
}

func (i interval) stats() stream.Stats {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return stream.Stats{Start: sec(i.Start), End: sec(i.End), Bytes: i.Bytes, BitsPerSecond: i.BitsPerSecond,
		Retransmits: i.Retransmits, SndCwnd: i.SndCwnd, RTT: time.Duration(i.RTT) * time.Microsecond,
		Packets: i.Packets, Lost: i.Lost, LostPercent: i.LostPercent, OutOfOrder: i.OutOfOrder, JitterMs: i.JitterMs}
}

// ErrIperf is an error iperf3 reported in its JSON.
var ErrIperf = errors.New("iperf3 reported an error")

// Parse reads an iperf3 client's -J report.
func Parse(b []byte) (stream.Result, error) {
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return stream.Result{}, fmt.Errorf("iperf: reading iperf3's JSON: %w", err)
	}
	if r.Error != "" {
		return stream.Result{}, fmt.Errorf("%w: %s", ErrIperf, r.Error)
	}
	res := stream.Result{Proto: strings.ToLower(r.Start.TestStart.Protocol)}
	if res.Proto != "tcp" && res.Proto != "udp" {
		return res, fmt.Errorf("iperf: protocol %q in iperf3's JSON (want TCP or UDP)", r.Start.TestStart.Protocol)
	}
	if r.Start.TestStart.Reverse != 0 {
		res.Direction = stream.Rx
	}
	if r.End.SumSent == nil || r.End.SumReceived == nil {
		return res, fmt.Errorf("iperf: iperf3's JSON has no end.sum_sent/sum_received (did the test finish?)")
	}
	res.Sender, res.Receiver = r.End.SumSent.stats(), r.End.SumReceived.stats()
	res.Intervals = intervals(r)
	if len(r.Server) > 0 && string(r.Server) != "null" {
		var srv report
		if err := json.Unmarshal(r.Server, &srv); err != nil {
			return res, fmt.Errorf("iperf: reading the server's JSON: %w", err)
		}
		res.PeerIntervals = intervals(srv)
	}
	for i := range min(len(res.Intervals), len(res.PeerIntervals)) {
		iv, p := &res.Intervals[i], res.PeerIntervals[i]
		switch {
		case res.Proto == "tcp" && res.Direction == stream.Rx:
			iv.Retransmits, iv.SndCwnd, iv.RTT = p.Retransmits, p.SndCwnd, p.RTT
		case res.Proto == "udp" && res.Direction == stream.Tx:
			iv.Lost, iv.LostPercent, iv.OutOfOrder, iv.JitterMs = p.Lost, p.LostPercent, p.OutOfOrder, p.JitterMs
		}
	}
	return res, nil
}

// intervals are a report's per-interval figures: the single stream's
// (which carries snd_cwnd and rtt), or the sum over several.
func intervals(r report) []stream.Stats {
	var out []stream.Stats
	for _, iv := range r.Intervals {
		i := iv.Sum
		if len(iv.Streams) == 1 {
			i = iv.Streams[0]
		}
		if i.Omitted {
			continue
		}
		out = append(out, i.stats())
	}
	return out
}

// Deviation is |a - b| / b of the receivers' bitrates: how far pxeperf's
// figure a is from iperf3's b (0.05 is the bench's 5% bound).
func Deviation(a, b stream.Result) float64 {
	if b.Receiver.BitsPerSecond == 0 {
		if a.Receiver.BitsPerSecond == 0 {
			return 0
		}
		return math.Inf(1)
	}
	d := a.Receiver.BitsPerSecond - b.Receiver.BitsPerSecond
	if d < 0 {
		d = -d
	}
	return d / b.Receiver.BitsPerSecond
}
