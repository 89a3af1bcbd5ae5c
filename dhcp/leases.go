package dhcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/configs"
)

// Errors from the lease store.
var (
	// ErrPoolExhausted: every pool address is leased, offered or declined.
	ErrPoolExhausted = errors.New("address pool exhausted: every address is leased, offered or declined; widen dhcp.pool or shorten dhcp.lease_time")
	// ErrTooManyOffers: dhcp.max_offers offers are outstanding.
	ErrTooManyOffers = errors.New("too many outstanding offers (dhcp.max_offers); a flood of DISCOVERs from clients that never REQUEST?")
	// errNotYours: the address asked for cannot go to this client (NAK).
	errNotYours = errors.New("address not available to this client")
)

// How long an offered address is held for the client it was offered to, and
// how long a declined address stays out of the pool (dnsmasq uses 10 min).
const (
	offerHold   = 30 * time.Second
	declineHold = 10 * time.Minute
)

// binding is one MAC-address association. It outlives its lease as history,
// so that a returning client gets its old address back while nobody else
// took it.
type binding struct {
	mac        net.HardwareAddr
	key        string // mac.String()
	addr       netip.Addr
	bound      bool      // ACKed (and journaled)
	expiry     time.Time // of the lease when bound
	offerUntil time.Time // address held for an OFFER until then
	offeredAt  time.Time // when that OFFER went out
}

func (b *binding) active(now time.Time) bool { return b.bound && now.Before(b.expiry) }
func (b *binding) held(now time.Time) bool   { return now.Before(b.offerUntil) }

// leaseStore allocates addresses in full mode: reservations first, then the
// client's previous address, then never-used pool addresses, then the
// longest-expired ones. Bindings are journaled (see journal) before an ACK
// goes out.
type leaseStore struct {
	mu        sync.Mutex
	pool      configs.Pool
	server    netip.Addr // never handed out
	leaseTime time.Duration
	fixed     map[string]netip.Addr // MAC -> reserved address
	reserved  map[netip.Addr]string // reserved address -> MAC
	byMAC     map[string]*binding
	byAddr    map[netip.Addr]*binding
	declined  map[netip.Addr]time.Time
	cursor    int
	j         *journal // nil: memory only
	// offers are the MACs with an outstanding offer (held, not REQUESTed),
	// bounded by maxOffers; reclaimed counts offers taken back early.
	offers    map[string]struct{}
	maxOffers int
	reclaimed uint64
}

func newLeaseStore(pool configs.Pool, server netip.Addr, leaseTime time.Duration, hostEntries []configs.Host) *leaseStore {
	s := &leaseStore{
		pool:      pool,
		server:    server,
		leaseTime: leaseTime,
		byMAC:     map[string]*binding{},
		byAddr:    map[netip.Addr]*binding{},
		declined:  map[netip.Addr]time.Time{},
		offers:    map[string]struct{}{},
		maxOffers: defaultMaxOffers,
	}
	s.fixed, s.reserved = reservations(hostEntries)
	return s
}

// reservations maps each host entry's MAC to its fixed address and back.
func reservations(hostEntries []configs.Host) (fixed map[string]netip.Addr, reserved map[netip.Addr]string) {
	fixed, reserved = map[string]netip.Addr{}, map[netip.Addr]string{}
	for _, h := range hostEntries {
		if h.Address.IsValid() && len(h.MAC.HardwareAddr) > 0 {
			k := h.MAC.String()
			fixed[k] = h.Address.Addr
			reserved[h.Address.Addr] = k
		}
	}
	return fixed, reserved
}

// replaceFixed puts new fixed addresses in force (hosts changed at run
// time or on SIGHUP). Bindings stay sane: an offer or an expired binding
// of an address now reserved for another MAC is dropped, so the pool never
// offers it to anyone else; a client whose fixed address moved is NAKed at
// its next REQUEST or renewal (bind checks fixed) and takes the new one. A
// lease still active on an address now reserved for another is left to
// its client, NAKed at its renewal, until the reserved host asks for it
// (which takes it, as a reservation in the config does at start).
func (s *leaseStore) replaceFixed(hostEntries []configs.Host, now time.Time) {
	fixed, reserved := reservations(hostEntries)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fixed, s.reserved = fixed, reserved
	for addr, owner := range reserved {
		if b := s.byAddr[addr]; b != nil && b.key != owner && !b.active(now) {
			delete(s.byAddr, addr)
			delete(s.byMAC, b.key)
			delete(s.offers, b.key)
		}
	}
}

// SetHosts puts new host entries' fixed addresses in force in the lease
// store (full mode; nothing in proxy mode): serve calls it with the hosts
// it hands every service, on SIGHUP and on each run-time host change.
func (s *Server) SetHosts(hostEntries []configs.Host) {
	if s.leases != nil {
		s.leases.replaceFixed(hostEntries, time.Now())
	}
}

// usable reports whether addr may go to the client with MAC key now.
func (s *leaseStore) usable(addr netip.Addr, key string, now time.Time) bool {
	if !addr.Is4() || addr == s.server {
		return false
	}
	if owner, ok := s.reserved[addr]; ok {
		return owner == key
	}
	if !s.pool.Contains(addr) {
		return false
	}
	if until, ok := s.declined[addr]; ok {
		if now.Before(until) {
			return false
		}
		delete(s.declined, addr)
	}
	b := s.byAddr[addr]
	return b == nil || b.key == key || (!b.active(now) && !b.held(now))
}

// assign ties addr to mac, dropping whatever either had before.
func (s *leaseStore) assign(mac net.HardwareAddr, key string, addr netip.Addr) *binding {
	if b := s.byMAC[key]; b != nil {
		if b.addr == addr {
			return b
		}
		delete(s.byAddr, b.addr)
	}
	if b := s.byAddr[addr]; b != nil {
		delete(s.byMAC, b.key)
		delete(s.offers, b.key)
	}
	b := &binding{mac: append(net.HardwareAddr(nil), mac...), key: key, addr: addr}
	s.byMAC[key] = b
	s.byAddr[addr] = b
	return b
}

// Offer picks an address for a DISCOVER and holds it for offerHold. A
// client without an offer already held gets one only while fewer than
// maxOffers are outstanding, unless exempt (a configured host).
func (s *leaseStore) Offer(mac net.HardwareAddr, requested netip.Addr, now time.Time, exempt bool) (netip.Addr, error) {
	key := mac.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.byMAC[key]; !exempt && (b == nil || !b.held(now)) && s.outstanding(now) >= s.maxOffers {
		return netip.Addr{}, ErrTooManyOffers
	}
	addr, err := s.pick(key, requested, now)
	if err != nil {
		return netip.Addr{}, err
	}
	b := s.assign(mac, key, addr)
	b.offerUntil, b.offeredAt = now.Add(offerHold), now
	if !exempt {
		s.offers[key] = struct{}{}
	}
	return addr, nil
}

// outstanding counts the offers still held, forgetting lapsed ones.
func (s *leaseStore) outstanding(now time.Time) int {
	if len(s.offers) < s.maxOffers {
		return len(s.offers)
	}
	for k := range s.offers {
		if b := s.byMAC[k]; b == nil || !b.held(now) {
			delete(s.offers, k)
		}
	}
	return len(s.offers)
}

// Known reports whether mac has a binding (leased, offered, or history)
// or a reservation: it takes no new address from the pool.
func (s *leaseStore) Known(mac net.HardwareAddr) bool {
	key := mac.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	_, fixed := s.fixed[key]
	return fixed || s.byMAC[key] != nil
}

// Reclaimed is how many unanswered offers were taken back early.
func (s *leaseStore) Reclaimed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reclaimed
}

func (s *leaseStore) pick(key string, requested netip.Addr, now time.Time) (netip.Addr, error) {
	if a, ok := s.fixed[key]; ok {
		return a, nil
	}
	if b := s.byMAC[key]; b != nil && s.usable(b.addr, key, now) {
		return b.addr, nil
	}
	if requested.IsValid() && s.usable(requested, key, now) {
		return requested, nil
	}
	n := s.pool.Size()
	for i := 0; i < n; i++ {
		idx := (s.cursor + i) % n
		a := s.pool.Nth(idx)
		if s.byAddr[a] == nil && s.usable(a, key, now) {
			s.cursor = (idx + 1) % n
			return a, nil
		}
	}
	// No never-used address left: reclaim the one that expired longest ago.
	var oldest *binding
	for _, b := range s.byAddr {
		if !s.usable(b.addr, key, now) {
			continue
		}
		if oldest == nil || b.expiry.Before(oldest.expiry) {
			oldest = b
		}
	}
	if oldest != nil {
		return oldest.addr, nil
	}
	// None at all: take back the offer nobody REQUESTed for longest, once
	// it is offerMinHold old (a real client REQUESTs well within that; a
	// spoofed one never does). Its client, if real, is NAKed and starts over.
	var victim *binding
	for _, b := range s.byAddr {
		if b.key == key || b.active(now) || !b.held(now) || now.Sub(b.offeredAt) < offerMinHold ||
			s.reserved[b.addr] != "" || !s.pool.Contains(b.addr) {
			continue
		}
		if until, ok := s.declined[b.addr]; ok && now.Before(until) {
			continue
		}
		if victim == nil || b.offeredAt.Before(victim.offeredAt) {
			victim = b
		}
	}
	if victim == nil {
		return netip.Addr{}, ErrPoolExhausted
	}
	s.reclaimed++
	return victim.addr, nil
}

// DropOffer forgets an offer the client declined by choosing another server.
func (s *leaseStore) DropOffer(mac net.HardwareAddr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.byMAC[mac.String()]; b != nil {
		b.offerUntil = time.Time{}
	}
	delete(s.offers, mac.String())
}

// Bind leases addr to mac (REQUEST) and makes it durable before returning,
// so the caller may ACK. It returns errNotYours when the client must be NAKed.
// selecting is a REQUEST answering our OFFER (server identifier is ours):
// then addr must be what mac was offered or holds. Otherwise (INIT-REBOOT,
// RENEWING, REBINDING) any address that may go to mac is confirmed, as
// dnsmasq does, so clients keep working after the lease file is lost.
func (s *leaseStore) Bind(mac net.HardwareAddr, addr netip.Addr, selecting bool, now time.Time) (time.Time, error) {
	expiry, gen, err := s.bind(mac, addr, selecting, now)
	if err != nil {
		return time.Time{}, err
	}
	if err := s.wait(gen); err != nil {
		return time.Time{}, err
	}
	return expiry, nil
}

// bind is Bind without the wait: the binding is in memory and its record
// in the journal's queue, durable once wait(gen) returns nil. Until then
// the client must not be ACKed.
func (s *leaseStore) bind(mac net.HardwareAddr, addr netip.Addr, selecting bool, now time.Time) (expiry time.Time, gen uint64, err error) {
	key := mac.String()
	s.mu.Lock()
	if fixed, ok := s.fixed[key]; ok && fixed != addr {
		s.mu.Unlock()
		return time.Time{}, 0, errNotYours
	}
	if b := s.byMAC[key]; selecting && (b == nil || b.addr != addr) {
		s.mu.Unlock()
		return time.Time{}, 0, errNotYours
	}
	if !s.usable(addr, key, now) {
		s.mu.Unlock()
		return time.Time{}, 0, errNotYours
	}
	b := s.assign(mac, key, addr)
	b.bound, b.expiry, b.offerUntil = true, now.Add(s.leaseTime), time.Time{}
	delete(s.offers, key)
	expiry = b.expiry
	gen = s.enqueue(formatRecord(recBind, b), now)
	s.mu.Unlock()
	return expiry, gen, nil
}

// Release ends mac's lease on addr (RELEASE). The binding stays as history.
func (s *leaseStore) Release(mac net.HardwareAddr, addr netip.Addr, now time.Time) (bool, error) {
	s.mu.Lock()
	b := s.byMAC[mac.String()]
	if b == nil || b.addr != addr || !b.bound {
		s.mu.Unlock()
		return false, nil
	}
	b.bound, b.offerUntil = false, time.Time{}
	if b.expiry.After(now) {
		b.expiry = now
	}
	gen := s.enqueue(formatRecord(recFree, b), now)
	s.mu.Unlock()
	return true, s.wait(gen)
}

// Decline takes addr out of the pool for declineHold (the client found it in
// use) and forgets mac's binding to it, so the client is offered another.
func (s *leaseStore) Decline(mac net.HardwareAddr, addr netip.Addr, now time.Time) (bool, error) {
	key := mac.String()
	s.mu.Lock()
	b := s.byMAC[key]
	if b == nil || b.addr != addr {
		s.mu.Unlock()
		return false, nil
	}
	delete(s.byMAC, key)
	delete(s.byAddr, addr)
	delete(s.offers, key)
	s.declined[addr] = now.Add(declineHold)
	s.enqueue(formatRecord(recFree, b), now)
	gen := s.enqueue(fmt.Appendf(nil, "%s %s %d\n", recHold, addr, now.Add(declineHold).Unix()), now)
	s.mu.Unlock()
	return true, s.wait(gen)
}

// Lease is a binding as the store reports it.
type Lease struct {
	MAC    net.HardwareAddr
	Addr   netip.Addr
	Expiry time.Time
}

// Active lists the leases that are bound and not expired.
func (s *leaseStore) Active(now time.Time) []Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Lease
	for _, b := range s.byMAC {
		if b.active(now) {
			out = append(out, Lease{MAC: b.mac, Addr: b.addr, Expiry: b.expiry})
		}
	}
	return out
}

// Lookup returns mac's current binding, bound or not.
func (s *leaseStore) Lookup(mac net.HardwareAddr) (Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.byMAC[mac.String()]
	if b == nil {
		return Lease{}, false
	}
	return Lease{MAC: b.mac, Addr: b.addr, Expiry: b.expiry}, true
}

// enqueue journals a record; the caller holds s.mu. When renewals have made
// the file much longer than the bindings it describes, or records were
// dropped while the disk failed, it is rewritten.
func (s *leaseStore) enqueue(line []byte, now time.Time) uint64 {
	if s.j == nil {
		return 0
	}
	gen := s.j.enqueue(line)
	s.j.mu.Lock()
	must := s.j.mustCompact
	s.j.mu.Unlock()
	if must || s.j.records > compactAt(len(s.byMAC)) {
		snap, lines := s.snapshot(now)
		_ = s.j.compact(snap, lines) // on failure, wait reports it or the next write retries
	}
	return gen
}

// compactAt is the journal length (lines) that triggers a rewrite.
func compactAt(bindings int) int { return 4*bindings + 4096 }

func (s *leaseStore) wait(gen uint64) error {
	if s.j == nil {
		return nil
	}
	if err := s.j.wait(gen); err != nil {
		return fmt.Errorf("writing lease journal: %w (check free space and permissions of the data folder)", err)
	}
	return nil
}
