package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/netstate"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"golang.org/x/sys/unix"
)

// imageName is the generated file every fetch of a sweep pulls.
const imageName = "bench.img"

// Run builds a testbed, runs every point of opt.Spec on it and tears it
// down (also when ctx ends: Ctrl-C). Each fetch is stored as it completes,
// so an interrupted sweep keeps what it measured. It returns the results so
// far and the first error that stopped the sweep; a fetch that fails is a
// record with its outcome, not an error.
func Run(ctx context.Context, opt Options) ([]Result, error) {
	if opt.Store == nil {
		return nil, errors.New("bench: no record store (Options.Store)")
	}
	if err := opt.Spec.Validate(); err != nil {
		return nil, err
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.RunID == "" {
		opt.RunID = time.Now().UTC().Format("20060102T150405Z")
	}
	if opt.Spec.Proto == ProtoStream {
		return runStreams(ctx, opt, log)
	}
	pts := opt.Spec.Points()

	// The image: generated into a temp root, the same bytes for a seed.
	tmp, err := os.MkdirTemp(opt.TempDir, "pxeperf-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temp folder for the image: %w (set TMPDIR to a writable folder)", err)
	}
	defer os.RemoveAll(tmp)
	root := tmp + "/root"
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if _, err := images.GenerateFile(root, imageName, opt.Spec.Size, opt.Spec.Seed); err != nil {
		return nil, fmt.Errorf("bench: generating the %s image: %w (is there room in %s?)", images.FormatSizeExact(opt.Spec.Size), err, tmp)
	}
	store, err := images.Open(root, tmp+"/data", log)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer store.Close()

	if removed, err := netlab.Sweep(log); err != nil {
		log.Warn("bench: removing leftovers of crashed runs", "err", err)
	} else if len(removed) > 0 {
		log.Info("bench: removed leftover testbeds", "namespaces", removed)
	}
	tb, err := netlab.New(netlab.Options{MTU: pts[0].MTU, DelayLine: opt.Spec.HasDelay(), Registry: opt.Registry, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("bench: building the testbed: %w", err)
	}
	defer tb.Close()
	if opt.Spec.Proto == ProtoTFTP {
		return runTFTP(ctx, opt, log, tb, store, pts)
	}

	// The real HTTP boot server, its listener in the server namespace.
	sink := newMatcher()
	httpCfg := configs.Default().HTTP
	httpCfg.Listen = netip.AddrPortFrom(tb.ServerIP, 0).String()
	httpCfg.ShutdownGrace = time.Second // Ctrl-C should not wait for a download
	var srv *httpboot.Server
	err = tb.Run(netlab.Server, func() error {
		var err error
		srv, err = httpboot.New(httpboot.Options{HTTP: httpCfg, Images: store, Sink: sink, Interface: tb.ServerIf,
			ServerAddr: tb.ServerIP, Logger: log.With("svc", "http")})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: starting the HTTP server in the testbed: %w", err)
	}
	defer serveInBackground(ctx, log, "http", srv.Serve)()
	url := "http://" + srv.Addr().String() + "/" + imageName

	r := &runner{opt: opt, log: log, tb: tb, sink: sink, url: url, addr: srv.Addr().String(), kernel: netstate.Kernel(), mtu: pts[0].MTU}
	return r.sweep(ctx, pts, "fetches", r.point, func(res Result) {
		fmt.Fprintf(opt.Verbose, "\n%s (rep %d)\n", res.Point.Key(), res.Point.Rep)
		io.WriteString(opt.Verbose, report.Intervals(res.Record, res.Intervals).Layout)
	})
}

// runner holds a sweep's testbed state between points.
type runner struct {
	opt    Options
	log    *slog.Logger
	tb     *netlab.Testbed
	sink   *matcher
	url    string
	addr   string // the HTTP server's address
	kernel string

	mtu     int
	rate    uint64
	rateSet bool
	delay   time.Duration
	offload *bool
}

// point sets the testbed up for p (changing only what differs) and runs
// one fetch.
func (r *runner) point(ctx context.Context, p Point) (Result, error) {
	st, err := r.setup(p)
	if err != nil {
		return Result{}, err
	}

	fr := r.fetch(ctx, p)
	if fr.err != nil && fr.fetch == nil && ctx.Err() != nil {
		return Result{}, fr.err
	}
	// The server's event (TCP_INFO: windows, RTT, retransmits; intervals)
	// through the one event -> record conversion; the client's view of the
	// transfer (its bytes, timing and errors) and the testbed on top.
	var rec record.Record
	var ivs []record.Interval
	if fr.fetch != nil {
		rec, ivs = record.FromFetch(fr.fetch, record.Conditions{Source: Source})
	}
	server, serverErr := rec.Outcome, rec.Err
	rec.Time, rec.Source, rec.Proto, rec.Direction = fr.start.UTC(), Source, ProtoHTTP, "rx"
	rec.File, rec.Bytes, rec.Size, rec.Duration = imageName, fr.bytes, p.Size, fr.dur
	rec.Outcome, rec.Err, rec.Mbps = event.OutcomeOK, "", 0
	rec.WndRequested = uint32(p.Window)
	if rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	rec.Labels[LabelRcvbuf], rec.Labels["window"], rec.Labels["rate"] = strconv.Itoa(fr.rcvbuf), FormatWindow(p.Window), FormatRate(p.Rate)
	stampTestbed(&rec, r, st, p)
	if fr.dur > 0 {
		rec.Mbps = float64(fr.bytes) * 8 / fr.dur.Seconds() / 1e6
	}
	switch {
	case fr.err != nil:
		rec.Outcome, rec.Err = event.OutcomeError, fr.err.Error()
	case fr.bytes != p.Size:
		rec.Outcome, rec.Err = event.OutcomeAborted, fmt.Sprintf("received %d of %d bytes", fr.bytes, p.Size)
	}
	switch {
	case fr.fetch == nil && rec.Outcome == event.OutcomeOK:
		rec.Outcome, rec.Err = event.OutcomeError, "the server reported no fetch"
	case fr.fetch != nil && server != event.OutcomeOK && rec.Outcome == event.OutcomeOK:
		rec.Outcome, rec.Err = server, "server: "+serverErr
	}
	id, err := r.opt.Store.Add(context.WithoutCancel(ctx), &rec, ivs)
	if err != nil {
		return Result{}, fmt.Errorf("storing the record: %w", err)
	}
	rec.ID = id
	if rec.Outcome != event.OutcomeOK {
		r.log.Warn("bench: fetch failed", "point", p.Key(), "rep", p.Rep, "outcome", rec.Outcome, "err", rec.Err)
	}
	return Result{Point: p, Record: rec, Intervals: ivs, Rcvbuf: fr.rcvbuf}, nil
}

// setup sets the testbed up for p, changing only what differs from the
// point before, and reads back what is active (stamped on the record).
func (r *runner) setup(p Point) (netlab.State, error) {
	if p.MTU != r.mtu {
		if err := r.tb.SetMTU(p.MTU); err != nil {
			return netlab.State{}, err
		}
		r.mtu = p.MTU
		r.rateSet = false // tbf's burst is sized for the MTU
	}
	if !r.rateSet || r.rate != p.Rate {
		if p.Rate == 0 {
			if err := r.tb.ClearRate(netlab.Server); err != nil {
				return netlab.State{}, err
			}
		} else if _, err := r.tb.SetRate(netlab.Server, p.Rate); err != nil {
			return netlab.State{}, err
		}
		r.rate, r.rateSet = p.Rate, true
	}
	if p.Delay != r.delay {
		if err := r.tb.SetDelay(p.Delay); err != nil {
			return netlab.State{}, err
		}
		r.delay = p.Delay
	}
	if r.offload == nil || *r.offload != p.Offload {
		o := netlab.Offloads{RxCsum: netlab.Off()}
		if p.Offload {
			o.RxCsum = netlab.On()
		}
		if _, err := r.tb.SetOffloads(netlab.Client, o); err != nil {
			return netlab.State{}, fmt.Errorf("client rx checksum %s: %w", onOff(p.Offload), err)
		}
		v := p.Offload
		r.offload = &v
	}
	return r.tb.State()
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
// the server's event of the same connection.
func (r *runner) fetch(ctx context.Context, p Point) (fr fetchResult) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout(p))
	defer cancel()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if p.Window != WindowAuto {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, p.Window); serr != nil {
					serr = fmt.Errorf("SO_RCVBUF %d: %w", p.Window, serr)
					return
				}
			}
			fr.rcvbuf, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		})
		return errors.Join(err, serr)
	}}
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
	select {
	case f := <-wait:
		fr.fetch = f
	case <-time.After(5 * time.Second):
		r.log.Warn("bench: no server event for the fetch", "client", local)
	case <-ctx.Done():
	}
	r.sink.forget(local)
	return fr
}

// matcher is the event.Sink given to httpboot: it hands each fetch to the
// client that made it, by the client's address and port.
type matcher struct {
	mu      sync.Mutex
	waiting map[netip.AddrPort]chan *event.Fetch
	early   map[netip.AddrPort]*event.Fetch
}

func newMatcher() *matcher {
	return &matcher{waiting: map[netip.AddrPort]chan *event.Fetch{}, early: map[netip.AddrPort]*event.Fetch{}}
}

// Fetch implements event.Sink.
func (m *matcher) Fetch(f *event.Fetch) {
	c := *f
	key := netip.AddrPortFrom(f.Client.Addr().Unmap(), f.Client.Port())
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch, ok := m.waiting[key]; ok {
		ch <- &c
		delete(m.waiting, key)
		return
	}
	if len(m.early) < 64 { // bounded: events nobody asks for are dropped
		m.early[key] = &c
	}
}

// Lease implements event.Sink (no DHCP in the bench).
func (m *matcher) Lease(*event.Lease) {}

// expect returns a channel that gets the fetch from local.
func (m *matcher) expect(local netip.AddrPort) <-chan *event.Fetch {
	key := netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	ch := make(chan *event.Fetch, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.early[key]; ok {
		ch <- f
		delete(m.early, key)
	} else {
		m.waiting[key] = ch
	}
	return ch
}

func (m *matcher) forget(local netip.AddrPort) {
	key := netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.waiting, key)
	delete(m.early, key)
}

// serveInBackground runs a server's Serve until the returned stop is
// called; stop waits for Serve to return. The server outlives ctx's
// cancellation (Ctrl-C) until stop, so a fetch in flight ends cleanly.
func serveInBackground(ctx context.Context, log *slog.Logger, name string, serve func(context.Context) error) (stop func()) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- serve(sctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			log.Warn("bench: "+name+" server", "err", err)
		}
	}
}

// sweep runs every point in order through run, stopping at the first error
// or when ctx ends, and reports progress (with ETA) and, with --verbose,
// each result through verbose. what names a run in messages ("fetches").
func (r *runner) sweep(ctx context.Context, pts []Point, what string,
	run func(context.Context, Point) (Result, error), verbose func(Result)) ([]Result, error) {
	opt := r.opt
	var results []Result
	start := time.Now()
	if opt.Progress != nil {
		opt.Progress(Progress{Total: len(pts)})
	}
	for i, p := range pts {
		if err := ctx.Err(); err != nil {
			return results, fmt.Errorf("bench: stopped after %d of %d %s: %w", i, len(pts), what, context.Cause(ctx))
		}
		res, err := run(ctx, p)
		if err != nil {
			return results, fmt.Errorf("bench: %s: %w", p.Key(), err)
		}
		results = append(results, res)
		if opt.Verbose != nil && verbose != nil {
			verbose(res)
		}
		if opt.Progress != nil {
			el := time.Since(start)
			opt.Progress(Progress{Done: i + 1, Total: len(pts), Elapsed: el, ETA: estimate(pts, i+1, el), Last: &results[len(results)-1]})
		}
	}
	return results, nil
}
