package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/netstate"
	"github.com/pxeperf/pxeperf/record"
)

// imageName is the generated file every fetch of a sweep pulls.
const imageName = "bench.img"

// Run builds a testbed, runs every point of opt.Spec on it and tears it
// down (also when ctx ends: Ctrl-C). Each fetch is stored as it completes,
// so an interrupted sweep keeps what it measured. It returns the results so
// far and the first error that stopped the sweep; a fetch that fails is a
// record with its outcome, not an error.
func Run(ctx context.Context, opt Options) ([]Result, error) {
	so := sweepOptions{store: opt.Store, runID: opt.RunID, by: opt.MeasuredBy, log: opt.Logger, progress: opt.Progress, verbose: opt.Verbose}
	if err := so.fill(opt.Spec.Proto); err != nil {
		return nil, err
	}
	if err := opt.Spec.Validate(); err != nil {
		return nil, err
	}
	log := so.log
	opt.RunID = so.runID
	start, ok := testbedDrivers[opt.Spec.Proto]
	if !ok {
		return nil, fmt.Errorf("bench: no testbed driver for %q", opt.Spec.Proto)
	}
	pts := opt.Spec.Points()

	var store *images.Store
	if opt.Spec.Proto != ProtoStream { // fetches pull a generated image
		st, cleanup, err := benchImage(opt, log)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		store = st
	}
	if removed, err := netlab.ReapLeftovers(log); err != nil {
		log.Warn("bench: removing leftovers of crashed runs", "err", err)
	} else if len(removed) > 0 {
		log.Info("bench: removed leftover testbeds", "namespaces", removed)
	}
	tb, err := netlab.New(netlab.Options{MTU: pts[0].MTU, DelayLine: opt.Spec.HasDelay(), DelayCPUs: opt.DelayCPUs,
		Registry: opt.Registry, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("bench: building the testbed: %w", err)
	}
	defer tb.Close()

	r := &runner{opt: opt, log: log, tb: tb, kernel: netstate.Kernel(), mtu: pts[0].MTU}
	d, stop, err := start(ctx, r, store)
	if err != nil {
		return nil, err
	}
	defer stop()
	return sweep(ctx, so, pts, d)
}

// testbedDrivers start each protocol's driver on a built testbed: its
// server in the server namespace (stop ends it), its client in the client
// namespace.
var testbedDrivers = map[string]func(ctx context.Context, r *runner, images *images.Store) (d driver, stop func(), err error){
	ProtoHTTP:   startHTTP,
	ProtoTFTP:   startTFTP,
	ProtoStream: startStreams,
}

// benchImage generates the image every fetch pulls into a temp root (the
// same bytes for a seed) and opens it as an image store.
func benchImage(opt Options, log *slog.Logger) (*images.Store, func(), error) {
	tmp, err := os.MkdirTemp(opt.TempDir, "pxeperf-bench-")
	if err != nil {
		return nil, nil, fmt.Errorf("bench: temp folder for the image: %w (set TMPDIR to a writable folder)", err)
	}
	fail := func(err error) (*images.Store, func(), error) {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	root := tmp + "/root"
	if err := os.Mkdir(root, 0o755); err != nil {
		return fail(fmt.Errorf("bench: %w", err))
	}
	if _, err := images.GenerateFile(root, imageName, opt.Spec.Size, opt.Spec.Seed); err != nil {
		return fail(fmt.Errorf("bench: generating the %s image: %w (is there room in %s?)", configs.ByteSize(opt.Spec.Size).String(), err, tmp))
	}
	store, err := images.Open(root, tmp+"/data", log)
	if err != nil {
		return fail(fmt.Errorf("bench: %w", err))
	}
	return store, func() { store.Close(); os.RemoveAll(tmp) }, nil
}

// runner holds a sweep's testbed state between points.
type runner struct {
	opt    Options
	log    *slog.Logger
	tb     *netlab.Testbed
	kernel string

	mtu     int
	rate    uint64
	rateSet bool
	delay   time.Duration
	offload *bool
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
	// The delay line's measurement of this point starts now (stampTestbed
	// ends it): what crossed before, the last point's cross-check too,
	// is not this point's.
	r.tb.TakeDelayReport()
	return r.tb.State()
}

// matcher is the event.Sink given to httpboot: it hands each fetch to the
// client that made it, by the client's address and port.
type matcher struct {
	mu      sync.Mutex
	waiting map[netip.AddrPort]chan *event.Fetch
	early   map[netip.AddrPort]*event.Fetch
}

// tee is the sink of a testbed server: m, and Options.Events when set.
func (r *runner) tee(m *matcher) event.Sink {
	if r.opt.Events == nil {
		return m
	}
	return event.Multi{m, r.opt.Events}
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

// await waits up to timeout (or until ctx ends) for the server's event on
// wait, the channel expect returned for local; nil when none came, logged.
func (m *matcher) await(ctx context.Context, wait <-chan *event.Fetch, local netip.AddrPort, timeout time.Duration, log *slog.Logger) *event.Fetch {
	select {
	case f := <-wait:
		return f
	case <-time.After(timeout):
		log.Warn("bench: no server event for the fetch", "client", local)
	case <-ctx.Done():
	}
	return nil
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

// stampTestbed puts the testbed as read back (st) on a record of point p:
// the client's interface, MTU, link speed and offloads, the server's
// egress rate, the kernel, the run, the added delay and what the delay
// line delivered since setup. One place for every protocol's records; it
// runs once the point's transfer is over.
func stampTestbed(rec *record.Record, r *runner, st netlab.State, p Point) {
	rec.Kernel, rec.ClientIP, rec.Iface = r.kernel, r.tb.ClientIP.String(), r.tb.ClientIf
	rec.MTU, rec.LinkMbps, rec.RateLimit = st.Client.MTU, st.Client.SpeedMbps, int64(st.Server.Rate.BitsPerSec)
	rec.LinkDriver = st.Client.Driver // veth: its 10000 is nominal
	rec.RxCsum, rec.TxCsum, rec.TSO = record.Offload(st.Client.RxCsum), record.Offload(st.Client.TxCsum), record.Offload(st.Client.TSO)
	rec.GSO, rec.GRO = record.Offload(st.Client.GSO), record.Offload(st.Client.GRO)
	if rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	rec.Labels["rx_offload"], rec.Labels[LabelRun] = st.Client.RxCsum, r.opt.RunID
	if p.Delay > 0 {
		rec.Labels[LabelDelay], rec.Labels[LabelDelayVia] = FormatDelay(p.Delay), r.tb.DelayVia()
	}
	if d, ok := r.tb.Delay(); ok {
		rec.DelayAsked = d
	}
	stampDelayLine(rec, r.tb.TakeDelayReport())
}
