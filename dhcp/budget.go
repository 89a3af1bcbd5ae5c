package dhcp

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Budgets that keep a flood of DHCP clients (spoofed MACs on a lab
// segment) from exhausting the pool or growing pxeperf's tables. Each is
// configurable (dhcp.max_offers, dhcp.new_clients_per_second,
// dhcp.max_sightings), with defaults a lab of 500 boards never reaches;
// each refusal is counted in Stats.Refused and logged once per client per
// minute (internal/refuse).
//
// What they do, and why (dnsmasq and Kea for comparison in
// dhcp/DESIGN.md, "A DHCP packet"):
//   - A new client (a MAC with no binding and no host entry) costs a token
//     from its relay's bucket (giaddr; direct clients share one), refilled at
//     new_clients_per_second with a burst of ten seconds' worth. Clients
//     the server already knows are never limited.
//   - At most max_offers offers are outstanding (held, not yet REQUESTed);
//     past it new clients are refused rather than given an address.
//   - When the pool has no free address left, an offer nobody REQUESTed
//     for offerMinHold is taken back for the new client (Stats.Reclaimed):
//     a real client REQUESTs within a few seconds, a spoofed one never.
//   - At most max_sightings clients are remembered for the hosts table and
//     proxy lease events, least recently seen forgotten first; a client's
//     lease event is written when it is first seen, when what it was told
//     changes (changesPerMinute at most), and at most once a minute
//     otherwise.
const (
	offerMinHold  = 5 * time.Second
	sightingEvery = time.Minute
	maxBuckets    = 1024

	defaultMaxOffers     = 1024
	defaultNewPerSecond  = 100
	defaultMaxSightings  = 4096
	burstSeconds         = 10
	reasonNewClients     = "dhcp: new clients over budget"
	reasonMaxOffers      = "dhcp: too many outstanding offers"
	reasonPoolExhausted  = "dhcp: pool exhausted"
	reasonJournal        = "dhcp: lease journal not writable"
	reasonNotRecorded    = "dhcp: sighting not recorded (new clients over budget)"
	reasonSightingsEvict = "dhcp: sightings full, least recent forgotten"
	reasonUntrustedRelay = "dhcp: giaddr not a configured relay"
	reasonUnknownReboot  = "dhcp: INIT-REBOOT from a client without a binding"
	reasonSendFull       = "dhcp: reply dropped, send buffer full"
	reasonNoARP          = "dhcp: unicast reply dropped, destination answers no ARP"
	reasonSendFailed     = "dhcp: reply not sent"
	reasonOptionsDropped = "dhcp: configured options left out, reply too long"
)

// rateBuckets is a token bucket per relay.
type rateBuckets struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	buckets map[netip.Addr]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateBuckets(perSecond int) *rateBuckets {
	return &rateBuckets{rate: float64(perSecond), burst: float64(max(1, perSecond*burstSeconds)), buckets: map[netip.Addr]*bucket{}}
}

// allow takes a token for key at now.
func (r *rateBuckets) allow(key netip.Addr, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[key]
	if b == nil {
		if len(r.buckets) >= maxBuckets {
			r.sweep(now)
			if len(r.buckets) >= maxBuckets {
				key = netip.Addr{} // too many relays: share the direct bucket
				b = r.buckets[key]
			}
		}
		if b == nil {
			b = &bucket{tokens: r.burst, at: now}
			r.buckets[key] = b
		}
	}
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = min(r.burst, b.tokens+dt*r.rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sweep drops buckets that have refilled: they carry no state.
func (r *rateBuckets) sweep(now time.Time) {
	for k, b := range r.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*r.rate >= r.burst {
			delete(r.buckets, k)
		}
	}
}

// sightings is a bounded LRU of the clients the server answered, deciding
// when a client's sighting is worth a hosts table update and lease event.
type sightings struct {
	mu  sync.Mutex
	max int
	ll  *list.List // of *sighting, most recent first
	m   map[string]*list.Element
}

type sighting struct {
	key     string
	mac     net.HardwareAddr
	told    string // what the client was told (boot file, arch, address)
	event   time.Time
	changes int       // records for a change of told since window
	window  time.Time // start of the minute changes counts in
}

// changesPerMinute bounds the records a client's changes cost: a board
// booting is told a few things (no address on port 67, its address on
// 4011), while forged requests alternating what they claim (a ciaddr
// each) would cost a record each. Past it, once a minute, as unchanged.
const changesPerMinute = 4

func newSightings(n int) *sightings {
	return &sightings{max: n, ll: list.New(), m: map[string]*list.Element{}}
}

// see notes that mac was told told at now. admit is asked before a new
// client takes a place. It returns whether to record the sighting (new, or
// told changed, or the last record is sightingEvery old), whether the
// client was admitted, and the client forgotten to make room, if any.
func (s *sightings) see(mac net.HardwareAddr, told string, now time.Time, admit func() bool) (record, admitted bool, evicted net.HardwareAddr) {
	key := mac.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.m[key]; ok {
		s.ll.MoveToFront(el)
		sg := el.Value.(*sighting)
		if now.Sub(sg.window) >= sightingEvery {
			sg.window, sg.changes = now, 0
		}
		changed := sg.told != told && sg.changes < changesPerMinute
		if changed || now.Sub(sg.event) >= sightingEvery {
			if sg.told != told {
				sg.changes++
			}
			sg.told, sg.event = told, now
			return true, true, nil
		}
		return false, true, nil
	}
	if !admit() {
		return false, false, nil
	}
	sg := &sighting{key: key, mac: append(net.HardwareAddr(nil), mac...), told: told, event: now, window: now}
	s.m[key] = s.ll.PushFront(sg)
	if s.ll.Len() > s.max {
		old := s.ll.Back()
		s.ll.Remove(old)
		o := old.Value.(*sighting)
		delete(s.m, o.key)
		evicted = o.mac
	}
	return true, true, evicted
}

// arpGiveUp is how long the kernel holds a packet for a neighbour that
// does not answer ARP (3 probes a second apart, Linux's defaults), and
// maxUnproven how many destinations a socket remembers within it.
const (
	arpGiveUp   = 3 * time.Second
	maxUnproven = 1024
)

// unproven remembers, for one socket's thread, the destinations on the
// segment sent a reply within arpGiveUp without knowing they answer ARP:
// each may have one such reply waiting in the kernel at a time.
type unproven struct {
	max int
	at  map[netip.Addr]time.Time
}

func newUnproven(n int) *unproven { return &unproven{max: n, at: map[netip.Addr]time.Time{}} }

// first reports whether a may take a reply without proof at now (none
// within arpGiveUp, and room to remember it), and notes it if so.
func (u *unproven) first(a netip.Addr, now time.Time) bool {
	if t, ok := u.at[a]; ok && now.Sub(t) < arpGiveUp {
		return false
	}
	if _, ok := u.at[a]; !ok && len(u.at) >= u.max {
		for k, t := range u.at {
			if now.Sub(t) >= arpGiveUp {
				delete(u.at, k)
			}
		}
		if len(u.at) >= u.max {
			return false
		}
	}
	u.at[a] = now
	return true
}
