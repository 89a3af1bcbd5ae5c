package netstate

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Addrs names the interface that holds a local address, so that a record
// describes the interface a fetch really went through (a fetch over
// loopback is not one over --iface's 10G NIC). The address table is read
// at most every ttl; a miss re-reads it at once (an address added since),
// at most once a second. Safe for concurrent use.
type Addrs struct {
	ttl  time.Duration
	list func() ([]IfaceAddrs, error)

	mu     sync.Mutex
	at     time.Time
	table  []IfaceAddrs
	missAt time.Time
}

// IfaceAddrs is one interface and its addresses.
type IfaceAddrs struct {
	Name     string
	Loopback bool
	Prefixes []netip.Prefix
}

// NewAddrs reads the host's interfaces (net.Interfaces) with a cache of ttl.
func NewAddrs(ttl time.Duration) *Addrs { return &Addrs{ttl: ttl, list: systemAddrs} }

func systemAddrs() ([]IfaceAddrs, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]IfaceAddrs, 0, len(ifs))
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		ia := IfaceAddrs{Name: ifc.Name, Loopback: ifc.Flags&net.FlagLoopback != 0}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if p, err := netip.ParsePrefix(n.String()); err == nil {
					ia.Prefixes = append(ia.Prefixes, p)
				}
			}
		}
		out = append(out, ia)
	}
	return out, nil
}

// Iface is the interface holding local address a, or "" when none does.
func (c *Addrs) Iface(a netip.Addr) string {
	if c == nil || !a.IsValid() {
		return ""
	}
	a = a.Unmap()
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.table == nil || now.Sub(c.at) >= c.ttl {
		c.reload(now)
	}
	name := IfaceOf(a, c.table)
	if name == "" && now.Sub(c.missAt) >= time.Second {
		c.missAt = now
		c.reload(now)
		name = IfaceOf(a, c.table)
	}
	return name
}

func (c *Addrs) reload(now time.Time) {
	if t, err := c.list(); err == nil {
		c.table, c.at = t, now
	}
}

// IfaceOf is the interface in table that holds a: the one with a as its
// own address; else, for a loopback address (127.0.0.0/8, ::1), the
// loopback interface. A served fetch's local address is always one of the
// host's own, so a subnet match is not enough.
func IfaceOf(a netip.Addr, table []IfaceAddrs) string {
	for _, ifc := range table {
		for _, p := range ifc.Prefixes {
			if p.Addr().Unmap() == a {
				return ifc.Name
			}
		}
	}
	if a.IsLoopback() {
		for _, ifc := range table {
			if ifc.Loopback {
				return ifc.Name
			}
		}
	}
	return ""
}
