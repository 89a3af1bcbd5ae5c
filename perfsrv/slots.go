package perfsrv

import "net/netip"

// slots counts what clients hold, per address and in all, within caps. The
// zero value is empty; the caller's lock guards it.
type slots struct {
	all int
	by  map[netip.Addr]int
}

// take holds one slot for ip unless that makes more than maxAll in all or
// maxPer for ip.
func (c *slots) take(ip netip.Addr, maxAll, maxPer int) bool {
	if c.all >= maxAll || c.by[ip] >= maxPer {
		return false
	}
	if c.by == nil {
		c.by = map[netip.Addr]int{}
	}
	c.all++
	c.by[ip]++
	return true
}

// give returns a slot take held for ip.
func (c *slots) give(ip netip.Addr) {
	c.all--
	if c.by[ip]--; c.by[ip] <= 0 {
		delete(c.by, ip)
	}
}
