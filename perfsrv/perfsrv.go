// Package perfsrv lets boards measure with their own tools: an
// iperf3-compatible server (control protocol, TCP and UDP tests, -R,
// --bidir, -P, -b, -l, -w, -t, -n, -O, --get-server-output) and an
// iperf 2 server (`iperf -s`: TCP and UDP with its server report, -r and
// -d by connecting back to the board, 2.1's -R and --full-duplex). Unlike
// iperf3's own server, tests run side by side, bounded per client and in
// total. Every test ends as events (one event.Fetch per direction, summed
// over streams for iperf3, per connection or flow for iperf 2, with
// per-second intervals) that record/ stores like any
// fetch: Source "iperf3" or "iperf2", Direction as seen from the board.
//
// Like the boot protocols, this package knows nothing of storage: it speaks
// through event.Sink.
package perfsrv

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/internal/refuse"
	meas "github.com/pxeperf/pxeperf/measure"
)

// Sources stamped on the events.
const (
	SourceIperf3 = "iperf3"
	SourceIperf2 = "iperf2"
)

// Limits bound what clients may ask for. Zero fields take the defaults.
type Limits struct {
	// MaxTests running at once over all clients (default 16).
	MaxTests int
	// MaxPerClient tests running at once from one client address (default 4).
	MaxPerClient int
	// MaxDuration of one test, omitted seconds included (default 60 s). A
	// test ended by bytes (-n) is cut off after it.
	MaxDuration time.Duration
	// MaxRate is the largest total rate one test may ask for with -b,
	// bits/s over all its streams and directions (default 10 Gbit/s).
	MaxRate int64
	// MaxStreams per test (-P, default 16; doubled for --bidir).
	MaxStreams int

	// UDP packet budget (iperf3): a datagram costs the server about the
	// same CPU whatever its size, so a test is bounded in datagrams too.
	// MinUDPLen is the smallest -l of a UDP test (default 128 bytes).
	MinUDPLen int
	// MaxPPS is the most UDP datagrams per second one test may ask for,
	// -b / (8 x -l) over its streams and directions (default 100000, a
	// 1.1 Gbit/s test of 1448-byte datagrams); -b 0 asks without bound.
	MaxPPS int64
	// MaxPPSTotal bounds the UDP tests running at once together (default
	// 200000).
	MaxPPSTotal int64
}

func (l Limits) withDefaults() Limits {
	orDefault(&l.MaxTests, 16)
	orDefault(&l.MaxPerClient, 4)
	orDefault(&l.MaxDuration, 60*time.Second)
	orDefault(&l.MaxRate, 10e9)
	orDefault(&l.MaxStreams, 16)
	orDefault(&l.MinUDPLen, 128)
	orDefault(&l.MaxPPS, 100000)
	orDefault(&l.MaxPPSTotal, 200000)
	return l
}

// orDefault sets *v to def when it is zero or less.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Clients names a board by its address (hosts.Table: DHCP leases and host
// entries with a fixed address). Only logs use it; the record sink looks
// the address up again.
type Clients interface {
	ByAddr(netip.Addr) (hosts.Client, bool)
}

// Config shapes a server.
type Config struct {
	// Addr to listen on, HOST:PORT (TCP and UDP on the same port).
	Addr   string
	Limits Limits
	// Interval between interval samples (default 1 s, as iperf3 -i 1).
	Interval time.Duration
	// SetupTimeout bounds each wait before and after the measured part:
	// the cookie, parameters, streams, results (default 10 s).
	SetupTimeout time.Duration
	Sink         event.Sink // nil: events are dropped
	Clients      Clients    // nil: logs name clients by address only
	Log          *slog.Logger

	// VerifiedFor (iperf 2 only) is how long an address that ran a TCP
	// test may be sent UDP legs beyond the unverified budget
	// (iperf2guard.go); 0: never, so UDP -R is refused.
	VerifiedFor time.Duration
}

func (c Config) withDefaults() Config {
	c.Limits = c.Limits.withDefaults()
	orDefault(&c.Interval, time.Second)
	orDefault(&c.SetupTimeout, 10*time.Second)
	if c.Sink == nil {
		c.Sink = event.Discard{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// clientAttrs are the log attributes naming a client.
func clientAttrs(c Clients, a netip.Addr) []any {
	attrs := []any{"client", a.String()}
	if c == nil {
		return attrs
	}
	if cl, ok := c.ByAddr(a); ok {
		if cl.MAC != nil {
			attrs = append(attrs, "client_mac", cl.MAC.String())
		}
		if cl.Host != nil && cl.Host.Name != "" {
			attrs = append(attrs, "host", cl.Host.Name)
		}
	}
	return attrs
}

// ifaceOf names the local interface holding addr, so a record carries the
// MTU and link of the interface the test really ran over.
func ifaceOf(addr netip.Addr) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	addr = addr.Unmap()
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
					return ifc.Name
				}
			}
		}
	}
	return ""
}

func addrPort(a net.Addr) netip.AddrPort {
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.AddrPort()
	case *net.UDPAddr:
		return v.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// sample is one cumulative reading of one direction, summed over its
// streams: measure.Sample's TCP figures in the types event.Interval keeps.
type sample struct {
	at          time.Duration // from the measured start
	bytes       int64         // cumulative
	retransmits uint32        // cumulative (sending side only)
	cwnd        uint32        // bytes, at the end
	rtt         time.Duration
	sndWnd      uint32
}

func (s sample) reading() meas.Sample {
	return meas.Sample{At: s.at, Bytes: s.bytes, Retransmits: int64(s.retransmits), Cwnd: int64(s.cwnd),
		SndWnd: int64(s.sndWnd), RTT: s.rtt}
}

func sampleOf(r meas.Sample) sample {
	return sample{at: r.At, bytes: r.Bytes, retransmits: uint32(r.Retransmits), cwnd: uint32(r.Cwnd),
		sndWnd: uint32(r.SndWnd), rtt: r.RTT}
}

// intervals turns cumulative samples into event intervals, from base
// (the sample at the measured start), as measure.Intervals cuts them: a
// last interval shorter than minTail is folded into the one before, so
// the counts match the client's lines (iperf3 drops a tail under a tenth
// of the period; iperf 2 prints whole periods only, its total covering
// the rest).
func intervals(base sample, ss []sample, minTail time.Duration) []event.Interval {
	rs := make([]meas.Sample, len(ss))
	for i, s := range ss {
		rs[i] = s.reading()
	}
	var out []event.Interval
	for _, iv := range meas.Intervals(base.reading(), rs, minTail) {
		out = append(out, event.Interval{Start: iv.Start, End: iv.End, Bytes: iv.Bytes,
			Retransmits: uint32(iv.Retransmits), Cwnd: uint32(iv.Cwnd), SndWnd: uint32(iv.SndWnd), RTT: iv.RTT})
	}
	return out
}

// sampleTicker is a measure.Sampler of one direction's samples: a reading every
// period from start, each at the time it was taken.
type sampleTicker struct{ s *meas.Sampler }

func startTicker(start time.Time, period time.Duration, snap func(at time.Duration) sample) *sampleTicker {
	return startSampling(start, period, snap, false)
}

// startSampling is startTicker with, when base is set, a first reading
// snap(0) at start (waiting for it): what came before is not measured.
func startSampling(start time.Time, period time.Duration, snap func(at time.Duration) sample, base bool) *sampleTicker {
	return &sampleTicker{meas.StartSampler(start, period, func(at time.Duration) meas.Sample { return snap(at).reading() },
		meas.SamplerOptions{Base: base})}
}

// pause stops the readings; stop or stopBase ends them.
func (t *sampleTicker) pause() { t.s.Pause() }

// stop ends the samples with last (a reading at or after it is dropped).
func (t *sampleTicker) stop(last sample) []sample {
	_, ss := t.stopBase(last)
	return ss
}

// stopBase is stop with the base reading (zero without one).
func (t *sampleTicker) stopBase(last sample) (sample, []sample) {
	base, rs := t.s.Stop(last.reading())
	ss := make([]sample, len(rs))
	for i, r := range rs {
		ss[i] = sampleOf(r)
	}
	return sampleOf(base), ss
}

// serve runs a server's two sockets until ctx ends: readUDP on the UDP
// socket in a goroutine of its own, and each accepted TCP connection in one
// of its own (handle, with its accept order from 1: iperf3 numbers streams
// in it), all counted in wg; then it waits for them and returns nil. A
// transient accept error (at the descriptor limit, EMFILE) is retried
// every 50 ms and counted in refused as svc+": accept failed", logged once
// a minute with the count so far: a listener kept at the limit by a flood
// must not write a line every retry (see perfsrv/DESIGN.md#accept-failures).
func serve(ctx context.Context, ln *net.TCPListener, udp *net.UDPConn, wg *sync.WaitGroup,
	readUDP func(), handle func(c *net.TCPConn, seq uint64), refused *refuse.Log, svc string) error {
	closeAll := func() {
		ln.Close()
		udp.Close()
	}
	stop := context.AfterFunc(ctx, closeAll)
	defer stop()
	if ctx.Err() != nil {
		closeAll()
		return nil
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		readUDP()
	}()
	var seq, failed uint64
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				break
			}
			failed++
			refused.Refuse(svc+": accept failed", "listener", "err", err, "failures_so_far", failed)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		seq++
		n := seq // the goroutine must see this connection's number, not a later one
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(c, n)
		}()
	}
	wg.Wait()
	return nil
}
