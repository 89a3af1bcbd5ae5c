// Package netlab builds the testbed `pxeperf bench` measures on: two network
// namespaces, "server" and "client", joined by a veth pair, with knobs for
// MTU, offloads (through the ethtool ioctl API) and link rate (a tbf qdisc
// through netlink). Nothing is configured by running or parsing commands;
// commands are only launched inside the namespaces (iperf3, curl, atftp).
//
// How the bench uses it:
//
//	reg := netlab.NewRegistry()
//	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	go func() { <-ctx.Done(); reg.CloseAll() }() // Ctrl-C tears everything down
//	netlab.ReapLeftovers(logger)                  // leftovers of crashed runs
//	tb, err := netlab.New(netlab.Options{MTU: 1500, Registry: reg, Logger: logger})
//	defer tb.Close()
//	for _, point := range sweep {
//		tb.SetMTU(point.MTU)
//		st, err := tb.SetOffloads(netlab.Server, netlab.AllOffloads(point.Offload)) // st: what is active
//		tb.SetRate(netlab.Server, 1e9)   // shapes what the server sends (Rx at the board)
//		tb.Run(netlab.Server, listen)    // pxeperf's own server code, sockets bound in the server namespace
//		tb.Run(netlab.Client, dial)      // pxeperf's clients, sockets in the client namespace
//		tb.Command(ctx, netlab.Client, "iperf3", "-c", tb.ServerIP.String()) // cross-check
//		state, err := tb.State()         // stamped on the record with the figures
//	}
//	// print netlab.Limits() under the table
//
// The server side gets ServerIP, the client side ClientIP (unless
// Options.NoClientAddr leaves it for DHCP); the veth ends are ServerIf and
// ClientIf. Every testbed has its own namespaces, so the same addresses are
// used by all of them.
//
// Names are "pxl-<pid>-<n>-server" and "pxl-<pid>-<n>-client", mounted under
// /run/netns so `ip netns exec` and the tools it launches find them;
// ReapLeftovers removes those whose creating process is dead (the clean-up
// of crashed runs; bench's "sweep" is its loop over points, not this).
package netlab

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"

	"github.com/pxeperf/pxeperf/netstate"
)

// Side names one end of the testbed.
type Side int

// The two sides.
const (
	Server Side = iota
	Client
)

func (s Side) String() string {
	switch s {
	case Server:
		return "server"
	case Client:
		return "client"
	}
	return fmt.Sprintf("side(%d)", int(s))
}

func (s Side) valid() error {
	if s != Server && s != Client {
		return fmt.Errorf("netlab: unknown side %d (use netlab.Server or netlab.Client)", int(s))
	}
	return nil
}

// Defaults.
const (
	DefaultMTU = 1500
	// Prefix is the namespace prefix; ReapLeftovers only touches names starting with it.
	Prefix = "pxl-"
	// ServerIf and ClientIf are the veth ends' names inside their namespaces.
	ServerIf = "pxl-server"
	ClientIf = "pxl-client"
)

// DefaultPrefix is the test subnet (server .1, client .2). It exists only
// inside the testbed's namespaces.
var DefaultPrefix = netip.MustParsePrefix("10.252.0.0/24")

// Options shape a testbed. The zero value is a 1500-byte, unlimited,
// default-offload link on DefaultPrefix.
type Options struct {
	MTU          int          // both ends; 0: DefaultMTU
	Prefix       netip.Prefix // IPv4, /30 or wider; zero: DefaultPrefix
	NoClientAddr bool         // leave the client end unaddressed (DHCP runs)
	// DelayLine makes the testbed able to delay (SetDelay). Where the
	// kernel has sch_netem, a netem qdisc at the root of each end holds
	// what that end sends (a tbf from SetRate goes below it); where it
	// has not (this project's CI kernel), pxeperf's own delay line does:
	// each side's end pairs with a delay end in its own namespace, and a
	// forwarder holds every frame for the one-way delay (delay_linux.go).
	// DelayVia says which. Without DelayLine the ends are one veth pair,
	// the RTT a few microseconds.
	DelayLine bool
	// DelayVia picks the delay of a DelayLine testbed: DelayAuto (netem if
	// the kernel has it, else the line), DelayNetem (an error without
	// netem) or DelayOwnLine.
	DelayVia string
	// DelayCPUs pins the delay line's thread to these CPUs (nil: any).
	// On a busy host a core kept free of other work (taskset, cpusets)
	// and given to the line keeps it on time.
	DelayCPUs []int
	// ServerIf and ClientIf name the veth ends (at most 15 bytes); empty:
	// the package's ServerIf and ClientIf. Tests that move ends between
	// namespaces give each testbed names of its own.
	ServerIf, ClientIf string
	Registry           *Registry    // optional: the testbed is in it until Close
	Logger             *slog.Logger // optional: debug lines on build and teardown
}

// How a DelayLine testbed delays (Options.DelayVia, Testbed.DelayVia).
const (
	DelayAuto    = ""
	DelayNetem   = "netem"
	DelayOwnLine = "line"
)

// ErrClosed is returned by operations on a closed testbed.
var ErrClosed = errors.New("netlab: testbed is closed")

// Offloads asks for offload features; nil leaves a feature as it is.
//
// Each field maps to the kernel's feature names (the ETH_SS_FEATURES strings
// that safchain/ethtool's Change takes, not ethtool -k's long names such as
// "tcp-segmentation-offload", which Change rejects as unsupported):
//
//	RxCsum  rx-checksum
//	TxCsum  every changeable tx-checksum-* (on veth: tx-checksum-ip-generic, tx-checksum-sctp)
//	TSO     every changeable tx-tcp*-segmentation (tcp, tcp6, ecn, mangleid, accecn)
//	GSO     tx-generic-segmentation
//	GRO     rx-gro (off by default on veth)
//
// The kernel drops TSO while no tx checksum is active: TxCsum off reads back
// TSO off although TSO stays requested, and TxCsum on brings it back.
type Offloads struct {
	RxCsum, TxCsum, TSO, GSO, GRO *bool
}

// On and Off are values for Offloads fields.
func On() *bool  { b := true; return &b }
func Off() *bool { b := false; return &b }

// AllOffloads asks for every offload on or off (the bench's --offload on,off).
// Note that veth starts with GRO off, so AllOffloads(true) is not the default
// state.
func AllOffloads(on bool) Offloads {
	p := func() *bool { b := on; return &b }
	return Offloads{RxCsum: p(), TxCsum: p(), TSO: p(), GSO: p(), GRO: p()}
}

func (o Offloads) fields() []offloadField {
	return []offloadField{
		{"rx", o.RxCsum, func(s netstate.State) string { return s.RxCsum }},
		{"tx", o.TxCsum, func(s netstate.State) string { return s.TxCsum }},
		{"tso", o.TSO, func(s netstate.State) string { return s.TSO }},
		{"gso", o.GSO, func(s netstate.State) string { return s.GSO }},
		{"gro", o.GRO, func(s netstate.State) string { return s.GRO }},
	}
}

type offloadField struct {
	name  string
	want  *bool
	state func(netstate.State) string
}

// NotAppliedError says which requested offloads are not active as asked
// after a change. SetOffloads returns it with the state it read back, which
// is still valid.
type NotAppliedError struct {
	Side     Side
	Features []string // e.g. "tso asked on, active off"
}

func (e *NotAppliedError) Error() string {
	msg := fmt.Sprintf("netlab: %s offloads not active as asked: %s", e.Side, strings.Join(e.Features, "; "))
	for _, f := range e.Features {
		if strings.HasPrefix(f, "tso asked on") {
			msg += " (the kernel keeps TSO off while tx checksum is off: turn tx on too)"
			break
		}
	}
	return msg
}

// notApplied compares what was asked with what is active.
func notApplied(side Side, o Offloads, st netstate.State) error {
	var bad []string
	for _, f := range o.fields() {
		if f.want == nil {
			continue
		}
		want := netstate.Off
		if *f.want {
			want = netstate.On
		}
		got := f.state(st)
		if got != want {
			if got == netstate.Unknown {
				got = "unsupported"
			}
			bad = append(bad, fmt.Sprintf("%s asked %s, active %s", f.name, want, got))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &NotAppliedError{Side: side, Features: bad}
}

// Rate is a side's tbf shaping as read back from the kernel; the zero value
// means unlimited (no tbf at the root).
type Rate struct {
	BitsPerSec uint64 // token rate, counting Ethernet frames without FCS
	Burst      uint32 // bucket size, bytes
	Limit      uint32 // queue size, bytes
}

// SideState is one side as read back: the veth end's interface state (MTU,
// offloads; see netstate) and its egress rate.
type SideState struct {
	netstate.State
	Rate Rate
}

// State is both sides.
type State struct {
	Server, Client SideState
}

// Registry tracks live testbeds so a signal handler can tear them all
// down. Safe for concurrent use; CloseAll may run while testbeds are in use
// (their operations then fail with ErrClosed or a missing namespace).
type Registry struct {
	mu   sync.Mutex
	beds map[*Testbed]struct{}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{beds: make(map[*Testbed]struct{})} }

func (r *Registry) add(t *Testbed) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.beds[t] = struct{}{}
}

func (r *Registry) remove(t *Testbed) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.beds, t)
}

// Len is the number of testbeds not yet closed.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.beds)
}

// CloseAll closes every registered testbed and returns their errors joined.
func (r *Registry) CloseAll() error {
	r.mu.Lock()
	beds := make([]*Testbed, 0, len(r.beds))
	for t := range r.beds {
		beds = append(beds, t)
	}
	r.mu.Unlock()
	var errs []error
	for _, t := range beds {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

// Limits says what a veth testbed cannot show; the bench prints it under
// its tables.
func Limits() []string {
	return []string{
		"Offload changes matter only when a run is CPU-bound: veth moves packets by memory, so checksum and " +
			"segmentation offloads change CPU cost per byte, not what is on the wire; under a rate limit, or with " +
			"a core to spare, on and off measure the same.",
		"There is no NIC checksum engine: on veth \"tx checksum on\" means no one computes the checksum at all " +
			"(the peer is told it is verified), \"off\" means the sending CPU computes it. A real NIC's offload " +
			"costs and bugs do not show.",
		"Without --delay the round trip is the few-microsecond veth RTT (plus tbf queueing), so at 1 Gbit/s every " +
			"window above a few KB runs at line rate. --delay holds each frame for the one-way delay each way: a netem " +
			"qdisc where the kernel has one, else pxeperf's delay line between the ends (label delay_via): RTT = 2 x " +
			"delay plus tens of microseconds of forwarding.",
		"Link rate is a tbf token bucket on the sending side's egress, counting Ethernet frames without " +
			"preamble, FCS and gap: TCP goodput at 100mbit is about 96 Mbit/s, a little above real Fast Ethernet's 94.",
		"Both namespaces share the host's CPUs and kernel: client and server compete for the same cores, and the " +
			"veth reports a fixed 10000 Mb/s link whatever the tbf rate.",
	}
}
