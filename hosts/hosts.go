// Package hosts joins what pxeperf knows about a client: its per-MAC host
// entry from the config, and what DHCP saw of it (address, architecture,
// user class). The DHCP server feeds the table; TFTP and HTTP read it to put a
// MAC, host name and labels on each fetch, and to pick a client's iPXE script.
//
// Store keeps the hosts and next boots set at run time (the admin API) in
// <data>/hosts.json, merged over the config's; serve hands the merged,
// effective hosts to the table and every service. Watch, in the event
// chain, turns fetches into boot milestones and consumes once next boots.
// See DESIGN.md.
package hosts

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/configs"
)

// Client is what DHCP last saw of one client.
type Client struct {
	MAC   net.HardwareAddr
	Addr  netip.Addr // leased (full mode) or ciaddr/requested (proxy); may be invalid
	Arch  uint16     // option 93 code, configs.ArchUnknown when absent
	IPXE  bool       // the client is iPXE (user class "iPXE" or option 175)
	UBoot bool       // option 60 starts with "U-Boot": tftp caps its windowsize
	Seen  time.Time
	Host  *configs.Host // nil when no host entry matches
	Proxy bool
	// Serial is a Raspberry Pi's serial (8 lower-case hex digits, from
	// option 97), "" for other clients; a later sighting without one (the
	// booted OS's DHCP) keeps it.
	Serial string
}

// Table is safe for concurrent use.
type Table struct {
	mu     sync.RWMutex
	byMAC  map[string]*configs.Host
	seen   map[string]Client     // by MAC string
	byAddr map[netip.Addr]string // address -> MAC string
	fixed  map[netip.Addr]string // host entry address -> MAC string
	serial map[string]string     // Raspberry Pi serial -> MAC string
}

// New builds a table from the configured host entries.
func New(entries []configs.Host) *Table {
	t := &Table{
		byMAC:  make(map[string]*configs.Host, len(entries)),
		seen:   make(map[string]Client),
		byAddr: make(map[netip.Addr]string),
		fixed:  make(map[netip.Addr]string),
		serial: make(map[string]string),
	}
	for i := range entries {
		h := &entries[i]
		t.byMAC[h.MAC.String()] = h
		if h.Address.IsValid() {
			t.fixed[h.Address.Unmap()] = h.MAC.String()
		}
	}
	return t
}

// Replace puts a new set of host entries in place of the old one, at once
// (SIGHUP reloads the config this way). What DHCP saw is kept; each
// sighting now carries its MAC's new entry, or none.
func (t *Table) Replace(entries []configs.Host) {
	n := New(entries)
	t.mu.Lock()
	defer t.mu.Unlock()
	// Both maps of entries go together: a fixed address dropped or moved
	// must no longer find its old host (ByAddr of a static board).
	byMAC := n.byMAC
	t.byMAC, t.fixed = byMAC, n.fixed
	for key, c := range t.seen {
		c.Host = byMAC[key]
		t.seen[key] = c
	}
}

// Host returns the host entry for a MAC.
func (t *Table) Host(mac net.HardwareAddr) (*configs.Host, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h, ok := t.byMAC[mac.String()]
	return h, ok
}

// Observe records a DHCP sighting. A zero Addr keeps the address seen before.
func (t *Table) Observe(c Client) {
	key := c.MAC.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.seen[key]
	if !c.Addr.IsValid() && had {
		c.Addr = old.Addr
	}
	if c.Serial == "" && had {
		c.Serial = old.Serial
	}
	if had && old.Serial != c.Serial && t.serial[old.Serial] == key {
		delete(t.serial, old.Serial)
	}
	if c.Serial != "" {
		t.serial[c.Serial] = key
	}
	if had && old.Addr.IsValid() && old.Addr != c.Addr {
		delete(t.byAddr, old.Addr)
	}
	if c.Host == nil {
		c.Host = t.byMAC[key]
	}
	if c.Seen.IsZero() {
		c.Seen = time.Now()
	}
	t.seen[key] = c
	if c.Addr.IsValid() {
		t.byAddr[c.Addr] = key
	}
}

// ByAddr returns the client last seen with that address, else the host
// entry with that fixed address (a board with a static address, measured
// before DHCP has seen it).
func (t *Table) ByAddr(a netip.Addr) (Client, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	key, ok := t.byAddr[a.Unmap()]
	if !ok {
		if mac, fixed := t.fixed[a.Unmap()]; fixed {
			h := t.byMAC[mac]
			return Client{MAC: h.MAC.HardwareAddr, Addr: a.Unmap(), Host: h, Arch: configs.ArchUnknown}, true
		}
		return Client{}, false
	}
	c, ok := t.seen[key]
	return c, ok
}

// ByMAC returns the client last seen with that MAC, or, when DHCP has not
// seen it, a Client carrying just its host entry.
func (t *Table) ByMAC(mac net.HardwareAddr) (Client, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if c, ok := t.seen[mac.String()]; ok {
		return c, true
	}
	if h, ok := t.byMAC[mac.String()]; ok {
		return Client{MAC: mac, Host: h, Arch: configs.ArchUnknown}, true
	}
	return Client{}, false
}

// Forget drops what DHCP saw of mac (its host entry stays), so the caller
// can bound the sightings it keeps (dhcp evicts the least recently seen).
func (t *Table) Forget(mac net.HardwareAddr) {
	key := mac.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.seen[key]; ok {
		if c.Addr.IsValid() && t.byAddr[c.Addr] == key {
			delete(t.byAddr, c.Addr)
		}
		if c.Serial != "" && t.serial[c.Serial] == key {
			delete(t.serial, c.Serial)
		}
		delete(t.seen, key)
	}
}

// Seen is how many clients DHCP sightings are kept for.
func (t *Table) Seen() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.seen)
}

// BySerial returns the Raspberry Pi last seen with that serial (Client.Serial).
func (t *Table) BySerial(serial string) (Client, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	key, ok := t.serial[serial]
	if !ok {
		return Client{}, false
	}
	c, ok := t.seen[key]
	return c, ok
}
