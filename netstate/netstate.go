// Package netstate reads the server side of a measurement: an interface's
// MTU, link speed and offload state (through the ethtool ioctl API, not by
// parsing ethtool's output) and the kernel release. record/ stamps these on
// every record when it is written, so a table can explain a number by the
// conditions it was measured under.
package netstate

import (
	"sync"
	"time"
)

// Offload states.
const (
	On      = "on"
	Off     = "off"
	Unknown = ""
)

// State is one interface as read at a moment.
type State struct {
	Iface     string
	MTU       int
	SpeedMbps int // 0 when the driver reports none (unknown or no link)
	// Driver is the interface's driver as ETHTOOL_GDRVINFO names it
	// ("veth", "e1000e", "virtio_net"); "" when it has none (lo).
	Driver string
	// Offloads: On, Off or Unknown. TxCsum and TSO are on when any of
	// their underlying features is (as ethtool -k prints them).
	RxCsum, TxCsum, TSO, GSO, GRO string
}

// Reader reads interface state with a small per-interface cache, so that
// stamping many records costs a map lookup, not ioctls. Safe for concurrent
// use. The ethtool socket lives in the network namespace of the thread that
// called New.
type Reader struct {
	ttl  time.Duration
	sys  *sysReader // nil where unsupported
	mu   sync.Mutex
	seen map[string]cached
}

type cached struct {
	at  time.Time
	st  State
	err error
}

// DefaultTTL is how long a read state is reused.
const DefaultTTL = 5 * time.Second

// New returns a Reader that re-reads an interface at most every ttl
// (0: every call). It fails only when no ethtool socket can be opened.
func New(ttl time.Duration) (*Reader, error) {
	sys, err := newSysReader()
	if err != nil {
		return nil, err
	}
	return &Reader{ttl: ttl, sys: sys, seen: make(map[string]cached)}, nil
}

// Close releases the ethtool socket.
func (r *Reader) Close() error {
	if r == nil || r.sys == nil {
		return nil
	}
	return r.sys.close()
}

// Get returns the state of iface. A partial state comes with an error naming
// what could not be read (e.g. a driver without ethtool support).
func (r *Reader) Get(iface string) (State, error) {
	if r == nil || iface == "" {
		return State{Iface: iface}, nil
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.seen[iface]; ok && r.ttl > 0 && now.Sub(c.at) < r.ttl {
		return c.st, c.err
	}
	st, err := r.sys.read(iface)
	r.seen[iface] = cached{at: now, st: st, err: err}
	return st, err
}

// NominalSpeed reports whether a driver's link speed is a figure it makes
// up rather than a line rate: veth and tun report a constant whatever
// carries the frames, virtio-net, vmxnet3, Hyper-V's and Xen's NICs what
// the hypervisor was told (or nothing), a bridge or bond a figure of its
// ports (see netstate/DESIGN.md#nominal-link-speeds). A table must not
// print a percentage of such a speed.
func NominalSpeed(driver string) bool {
	switch driver {
	case "veth", "tun", "bridge", "bonding", "team", "dummy", "ifb", "vrf", "vxlan", "geneve", "macvlan", "ipvlan",
		"macsec", "virtio_net", "vmxnet3", "hv_netvsc", "xen-netfront":
		return true
	}
	return false
}
