//go:build linux

package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// testbedHTTP fetches the image from pxeperf's real HTTP boot server in the
// server namespace with the bench's client in the client namespace.
type testbedHTTP struct {
	*runner
	sink *matcher
	url  string
	addr string // the HTTP server's address
}

// startHTTP starts the real HTTP boot server, its listener in the server
// namespace.
func startHTTP(ctx context.Context, r *runner, store *images.Store) (driver, func(), error) {
	sink := newMatcher()
	httpCfg := configs.Default().HTTP
	httpCfg.Listen = netip.AddrPortFrom(r.tb.ServerIP, 0).String()
	httpCfg.ShutdownGrace = time.Second // Ctrl-C should not wait for a download
	var srv *httpboot.Server
	err := r.tb.Run(netlab.Server, func() error {
		var err error
		srv, err = httpboot.New(httpboot.Options{HTTP: httpCfg, Images: store, Sink: r.tee(sink), Interface: r.tb.ServerIf,
			ServerAddr: r.tb.ServerIP, Logger: r.log.With("svc", "http")})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: starting the HTTP server in the testbed: %w", err)
	}
	stop := serveInBackground(ctx, r.log, "http", srv.Serve)
	d := &testbedHTTP{runner: r, sink: sink, url: "http://" + srv.Addr().String() + "/" + imageName, addr: srv.Addr().String()}
	return d, stop, nil
}

// verbose prints the fetch's iperf3-style interval lines.
func (r *testbedHTTP) verbose(w io.Writer, res Result) {
	fmt.Fprintf(w, "\n%s (rep %d)\n", res.Point.Key(), res.Point.Rep)
	io.WriteString(w, report.Intervals(res.Record, res.Intervals).Layout)
}

// point sets the testbed up for p (changing only what differs) and runs
// one fetch.
func (r *testbedHTTP) point(ctx context.Context, p Point) (*record.Record, []record.Interval, int, error) {
	st, err := r.setup(p)
	if err != nil {
		return nil, nil, 0, err
	}

	fr := r.fetch(ctx, p)
	if fr.err != nil && ctx.Err() != nil { // broken by the sweep's own cancel: not a measurement
		return nil, nil, 0, fr.err
	}
	// The server's event (TCP_INFO: windows, RTT, retransmits; intervals)
	// through the one event -> record conversion; the client's view of the
	// transfer (its bytes, timing and errors) and the testbed on top.
	rec, ivs := fetchRecord(fr.fetch, clientFetch{proto: ProtoHTTP, file: imageName, start: fr.start, bytes: fr.bytes,
		size: p.Size, dur: fr.dur, err: fr.err})
	rec.WndRequested, rec.Rcvbuf = uint32(p.Window), fr.rcvbuf
	if rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	rec.Labels["window"], rec.Labels["rate"] = FormatWindow(p.Window), FormatRate(p.Rate)
	stampTestbed(&rec, r.runner, st, p)
	return &rec, ivs, fr.rcvbuf, nil
}

// goFetch GETs the image with Go's HTTP client from the client namespace
// on a fresh connection whose SO_RCVBUF is set before connect, reads the
// body to the end and waits for the server's event of the same connection.
func (r *testbedHTTP) goFetch(ctx context.Context, p Point) (fr fetchResult) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout(p))
	defer cancel()
	var local netip.AddrPort
	var wait <-chan *event.Fetch
	d := rcvbufDialer(p.Window, &fr.rcvbuf)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := r.tb.Run(netlab.Client, func() error {
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		if err != nil {
			return nil, err
		}
		local = c.LocalAddr().(*net.TCPAddr).AddrPort()
		return c, nil
	}
	res := httpGet{url: r.url, dial: dial, onResponse: func(*http.Response) error {
		wait = r.sink.expect(local)
		return nil
	}}.do(ctx)
	fr.start, fr.dur, fr.bytes, fr.err = res.start, res.dur, res.bytes, res.err
	if res.code == 0 { // no response: no server event to wait for
		return fr
	}
	if res.code != http.StatusOK && fr.err == nil {
		fr.err = fmt.Errorf("GET %s: %s", r.url, res.status)
	}
	// The server emits its event just before the last byte: it is there or
	// on its way.
	fr.fetch = r.sink.await(ctx, wait, local, 5*time.Second, r.log)
	r.sink.forget(local)
	return fr
}

// fetchResult is the client's view of one fetch plus the server's event.
type fetchResult struct {
	start  time.Time // request written
	dur    time.Duration
	bytes  int64
	rcvbuf int
	fetch  *event.Fetch
	err    error
}

// fetchTimeout bounds one fetch: three times its time at the rate (10
// Gbit/s when unlimited), plus 30 s.
func fetchTimeout(p Point) time.Duration {
	return time.Duration(3*etaWeight(p)*float64(time.Second)) + 30*time.Second
}

// fetch GETs the image from the client namespace on a fresh connection whose
// SO_RCVBUF is set before connect, reads the body to the end and waits for
// the server's event of the same connection. Behind the delay line the
// client reads on a thread of its own (rawGet), so its scheduling delay on
// a loaded host does not join the round trip the window is divided by.
func (r *testbedHTTP) fetch(ctx context.Context, p Point) (fr fetchResult) {
	if p.Delay == 0 {
		// Without a delay line the flow is bound by CPU, not by the window:
		// Go's client, as the bench has always measured there.
		return r.goFetch(ctx, p)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout(p))
	defer cancel()
	d := rcvbufDialer(p.Window, &fr.rcvbuf)
	var c net.Conn
	err := r.tb.Run(netlab.Client, func() error {
		var err error
		c, err = d.DialContext(ctx, "tcp4", r.addr)
		return err
	})
	fr.start = time.Now()
	if err != nil {
		fr.err = fmt.Errorf("GET %s: %w", r.url, err)
		return fr
	}
	defer c.Close()
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	wait := r.sink.expect(local)
	body, status, wrote, end, err := rawGet(ctx, c.(*net.TCPConn), r.addr, "/"+imageName)
	fr.bytes = body
	if err != nil {
		fr.err = fmt.Errorf("GET %s: %w", r.url, err)
	} else if status != http.StatusOK {
		fr.err = fmt.Errorf("GET %s: %d %s", r.url, status, http.StatusText(status))
	}
	if !wrote.IsZero() {
		fr.start = wrote
	}
	if end.IsZero() {
		end = time.Now()
	}
	fr.dur = end.Sub(fr.start)
	// The server emits its event just before the last byte: it is there or
	// on its way.
	fr.fetch = r.sink.await(ctx, wait, local, 5*time.Second, r.log)
	r.sink.forget(local)
	return fr
}
