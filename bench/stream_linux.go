package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"time"

	"github.com/pxeperf/pxeperf/bench/iperf"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/stream"
)

// startStreams starts pxeperf's stream server in the server namespace; the
// stream clients run from the client namespace, one record per run; with
// opt.CrossCheck iperf3 runs right after ours at every point.
func startStreams(ctx context.Context, r *runner, _ *images.Store) (driver, func(), error) {
	if r.opt.CrossCheck {
		if _, err := exec.LookPath("iperf3"); err != nil {
			return nil, nil, fmt.Errorf("bench: --cross-check iperf3: %w (install iperf3, e.g. apt-get install iperf3)", err)
		}
	}
	var srv *stream.Server
	err := r.tb.Run(netlab.Server, func() error {
		var err error
		srv, err = stream.NewServer(net.JoinHostPort(r.tb.ServerIP.String(), "0"), r.log.With("svc", "stream"))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: starting the stream server in the testbed: %w", err)
	}
	stop := serveInBackground(ctx, r.log, "stream", srv.Serve)
	return &testbedStreams{runner: r, addr: srv.Addr().String()}, stop, nil
}

// writeStreamVerbose prints a run's iperf3-style interval lines (and
// iperf3's figure with --cross-check).
func writeStreamVerbose(w io.Writer, res Result) {
	fmt.Fprintf(w, "\n%s (rep %d)\n", res.Point.Key(), res.Point.Rep)
	io.WriteString(w, report.Intervals(res.Record, res.Intervals).Layout)
	rec := &res.Record
	if res.Point.Proto == ProtoUDP {
		fmt.Fprintf(w, "UDP: sent %.2f Mbit/s, lost %.3f%%, jitter %.3f ms\n", rec.SenderMbps, rec.UDPLostPct, rec.JitterMs)
	}
	if rec.Iperf3Mbps != 0 {
		fmt.Fprintf(w, "iperf3: %.2f Mbit/s (deviation %.2f%%)\n", rec.Iperf3Mbps, rec.Iperf3DevPct)
	}
}

// testbedStreams runs stream points on a runner's testbed (the streams'
// driver).
type testbedStreams struct {
	*runner
	addr       string // the stream server, in the server namespace
	clientRate uint64
}

// setup is runner.setup with the tbf on both veth ends: a stream runs
// either way, and a link is limited both ways.
func (r *testbedStreams) setup(p Point) (netlab.State, error) {
	mtuChanged := p.MTU != r.mtu
	st, err := r.runner.setup(p)
	if err != nil {
		return st, err
	}
	if mtuChanged || r.clientRate != p.Rate || p.Index == 0 {
		if p.Rate == 0 {
			err = r.tb.ClearRate(netlab.Client)
		} else {
			_, err = r.tb.SetRate(netlab.Client, p.Rate)
		}
		if err != nil {
			return st, err
		}
		r.clientRate = p.Rate
		return r.tb.State()
	}
	return st, nil
}

// iperfConfig is the stream test c for iperf3.
func iperfConfig(c stream.Config, udp bool) iperf.Config {
	return iperf.Config{UDP: udp, Direction: c.Direction, Duration: c.Duration, Interval: c.Interval,
		Window: c.ServerBuf, Rate: c.Rate, PacketSize: c.PacketSize}
}

// point sets the testbed up for p, runs one stream test (and iperf3 with
// CrossCheck) and stores the record.
func (r *testbedStreams) point(ctx context.Context, p Point) (*record.Record, []record.Interval, int, error) {
	st, err := r.setup(p)
	if err != nil {
		return nil, nil, 0, err
	}
	cfg := streamConfig(r.addr, p)
	udp := p.Proto == ProtoUDP
	var res stream.Result
	begin := time.Now()
	err = r.tb.Run(netlab.Client, func() error {
		var err error
		res, err = runStream(ctx, p, cfg)
		return err
	})
	if err != nil && ctx.Err() != nil {
		return nil, nil, 0, err
	}
	rec, ivs := streamRecord(p, res, err, begin)
	stampTestbed(rec, r.runner, st, p)

	if r.opt.CrossCheck && err == nil {
		run, ierr := iperf.RunOn(ctx, r.tb, iperfConfig(cfg, udp))
		switch {
		case ierr != nil && ctx.Err() != nil:
			return nil, nil, 0, ierr
		case ierr != nil:
			rec.Iperf3Err = ierr.Error()
			r.log.Warn("bench: iperf3 cross-check failed", "point", p.Key(), "err", ierr)
		default:
			addCrossCheck(rec, res, run.Result, udp)
		}
	}
	return rec, ivs, 0, nil
}

// addCrossCheck puts iperf3's receiver figure and the deviation of ours
// from it on rec.
func addCrossCheck(rec *record.Record, ours, theirs stream.Result, udp bool) {
	rec.Iperf3Mbps = theirs.Receiver.BitsPerSecond / 1e6
	rec.Iperf3DevPct = iperf.Deviation(ours, theirs) * 100
	if udp {
		rec.Iperf3LostPct = theirs.Receiver.LostPercent
	}
}

// verbose prints a run's interval lines (writeStreamVerbose).
func (r *testbedStreams) verbose(w io.Writer, res Result) { writeStreamVerbose(w, res) }
