package configs

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Addr is an IP address that decodes from YAML with a clear error.
type Addr struct{ netip.Addr }

// UnmarshalYAML implements yaml.Unmarshaler.
func (a *Addr) UnmarshalYAML(n *yaml.Node) error {
	if n.Value == "" {
		a.Addr = netip.Addr{}
		return nil
	}
	p, err := netip.ParseAddr(n.Value)
	if err != nil {
		return typeError(n.Line, fmt.Sprintf("%q is not an IP address; write e.g. 192.168.50.1", n.Value))
	}
	a.Addr = p
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (a Addr) MarshalYAML() (any, error) {
	if !a.IsValid() {
		return "", nil
	}
	return a.String(), nil
}

// MAC is a hardware address that decodes from YAML with a clear error.
type MAC struct{ net.HardwareAddr }

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *MAC) UnmarshalYAML(n *yaml.Node) error {
	hw, err := net.ParseMAC(n.Value)
	if err != nil || len(hw) != 6 {
		return typeError(n.Line, fmt.Sprintf("%q is not an Ethernet MAC address; write e.g. 52:54:00:12:34:56", n.Value))
	}
	m.HardwareAddr = hw
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (m MAC) MarshalYAML() (any, error) { return m.String(), nil }

// Prefix is an IPv4 prefix ("10.0.8.0/22") or a single address
// ("10.0.8.1", a /32) that decodes from YAML with a clear error.
type Prefix struct{ netip.Prefix }

// ParsePrefix parses "ADDR/BITS" or "ADDR" (all of its bits).
func ParsePrefix(s string) (Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return Prefix{netip.PrefixFrom(a, a.BitLen())}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Prefix{}, fmt.Errorf("%q is neither an address nor a prefix; write e.g. 10.0.8.1 or 10.0.8.0/22", s)
	}
	return Prefix{p.Masked()}, nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Prefix) UnmarshalYAML(n *yaml.Node) error { return decodeWith(n, ParsePrefix, p) }

// decodeWith sets *dst to parse(n's value), an error naming n's line.
func decodeWith[T any](n *yaml.Node, parse func(string) (T, error), dst *T) error {
	v, err := parse(n.Value)
	if err != nil {
		return typeError(n.Line, err.Error())
	}
	*dst = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (p Prefix) MarshalYAML() (any, error) { return p.String(), nil }

// Pool is an inclusive IPv4 range "FIRST-LAST".
type Pool struct{ First, Last netip.Addr }

// ParsePool parses "FIRST-LAST".
func ParsePool(s string) (Pool, error) {
	if s == "" {
		return Pool{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return Pool{}, fmt.Errorf("%q is not a range; write FIRST-LAST, e.g. 192.168.50.100-192.168.50.200", s)
	}
	first, err1 := netip.ParseAddr(strings.TrimSpace(a))
	last, err2 := netip.ParseAddr(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || !first.Is4() || !last.Is4() {
		return Pool{}, fmt.Errorf("%q is not a range of IPv4 addresses; write e.g. 192.168.50.100-192.168.50.200", s)
	}
	if last.Less(first) {
		return Pool{}, fmt.Errorf("%q ends before it starts; put the lower address first", s)
	}
	p := Pool{First: first, Last: last}
	if p.Size() > 1<<20 {
		return Pool{}, fmt.Errorf("%q holds %d addresses; the most is %d", s, p.Size(), 1<<20)
	}
	return p, nil
}

// IsValid reports whether the pool is set.
func (p Pool) IsValid() bool { return p.First.IsValid() }

// Size is the number of addresses in the pool.
func (p Pool) Size() int {
	if !p.IsValid() {
		return 0
	}
	return int(ip4ToUint(p.Last)-ip4ToUint(p.First)) + 1
}

// Contains reports whether a is in the pool.
func (p Pool) Contains(a netip.Addr) bool {
	return p.IsValid() && a.Is4() && !a.Less(p.First) && !p.Last.Less(a)
}

// Nth returns the i-th address of the pool (0-based).
func (p Pool) Nth(i int) netip.Addr { return uintToIP4(ip4ToUint(p.First) + uint32(i)) }

func (p Pool) String() string {
	if !p.IsValid() {
		return ""
	}
	return p.First.String() + "-" + p.Last.String()
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Pool) UnmarshalYAML(n *yaml.Node) error { return decodeWith(n, ParsePool, p) }

// MarshalYAML implements yaml.Marshaler.
func (p Pool) MarshalYAML() (any, error) { return p.String(), nil }

func ip4ToUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintToIP4(u uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}
