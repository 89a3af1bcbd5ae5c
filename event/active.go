package event

import (
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Active is the registry of transfers in progress, for live views (the
// dashboard, /api/active, `pxeperf status`, the active-transfers gauge).
// tftp and httpboot register each transfer with Begin and report the bytes
// the board acknowledged (TFTP: ACKed blocks; HTTP: tcpi_bytes_acked), once
// per ACKed window or sampling tick, never per block; readers take a
// Snapshot, which carries each transfer's live rate (see Transfer.rate and
// event/DESIGN.md). A nil *Active registers nothing and costs nothing, so
// servers built without one (tests, bench) are unchanged. Safe for
// concurrent use.
type Active struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*Transfer
}

// NewActive returns an empty registry.
func NewActive() *Active { return &Active{m: map[uint64]*Transfer{}} }

// Transfer is one transfer in progress. Its identity is fixed at Begin;
// bytes and size are updated atomically, and each increase of bytes is
// kept as a progress point for the live rate (under mu: one producer, so
// uncontended but for a reader's Snapshot). Methods on a nil *Transfer do
// nothing.
type Transfer struct {
	a      *Active
	id     uint64
	start  time.Time
	base   time.Time // Begin's time.Now: the points' origin (monotonic)
	proto  string
	client netip.AddrPort
	mac    string
	host   string
	file   string
	bytes  atomic.Int64
	size   atomic.Int64

	mu  sync.Mutex
	pts progress
}

// RateWindow is the least span the live rate is measured over, and
// pointEvery how far apart the progress points it is measured from are
// kept (the newest one always the latest increase). maxPoints of them
// cover RateWindow twice over at that spacing.
const (
	RateWindow = 3 * time.Second
	pointEvery = 100 * time.Millisecond
	maxPoints  = 64
)

// point is the bytes acknowledged at an offset from Transfer.base.
type point struct {
	at    time.Duration
	bytes int64
}

// progress is a ring of points: the last increase of each pointEvery
// slot, the newest slot's updated in place.
type progress struct {
	p      [maxPoints]point
	n      int           // points held
	head   int           // index of the newest
	slotAt time.Duration // when the newest point's slot began
}

// add records that the bytes reached b at offset at.
func (g *progress) add(at time.Duration, b int64) {
	if g.n > 0 && at-g.slotAt < pointEvery {
		g.p[g.head] = point{at, b}
		return
	}
	g.head = (g.head + 1) % maxPoints
	g.p[g.head] = point{at, b}
	g.n = min(g.n+1, maxPoints)
	g.slotAt = at
}

// rate is the live rate at offset now, in bytes/s: the bytes acknowledged
// from the latest point at least RateWindow before the latest increase
// (the start of the transfer when none is that old) up to that increase,
// over the time between them, so a steady transfer reads its last 3 s and
// a board that acknowledges in bursts further apart (curl's --limit-rate
// reads 10 MB at a time) reads its bursts over the time they took; once
// the board has been silent for longer than that span, the same bytes
// over the silence, falling towards 0. 0 before any progress.
func (g *progress) rate(now time.Duration) float64 {
	if g.n == 0 {
		return 0
	}
	e := g.p[g.head]
	s := point{}
	for i := 1; i < g.n; i++ {
		p := g.p[(g.head-i+maxPoints)%maxPoints]
		if p.at <= e.at-RateWindow {
			s = p
			break
		}
		if i == g.n-1 && g.n == maxPoints {
			s = p // the ring does not reach back (points less than pointEvery apart: not kept so)
		}
	}
	d := max(e.at-s.at, now-e.at, time.Millisecond)
	return float64(e.bytes-s.bytes) / d.Seconds()
}

// Begin registers a transfer described by f (Start, Proto, Client, MAC,
// Host, File, Size); End removes it.
func (a *Active) Begin(f *Fetch) *Transfer {
	if a == nil {
		return nil
	}
	t := &Transfer{a: a, start: f.Start, base: time.Now(), proto: f.Proto, client: f.Client, host: f.Host, file: f.File}
	if t.start.IsZero() {
		t.start = time.Now()
	}
	if f.MAC != nil {
		t.mac = net.HardwareAddr(f.MAC).String()
	}
	t.size.Store(f.Size)
	a.mu.Lock()
	a.next++
	t.id = a.next
	a.m[t.id] = t
	a.mu.Unlock()
	return t
}

// Add counts n more payload bytes the board acknowledged (TFTP: its
// ACKed blocks).
func (t *Transfer) Add(n int64) {
	if t != nil && n > 0 {
		t.moved(t.bytes.Add(n))
	}
}

// Set records the bytes the board acknowledged so far (HTTP: the kernel's
// tcpi_bytes_acked since the fetch began), never going back.
func (t *Transfer) Set(n int64) {
	if t == nil {
		return
	}
	for {
		old := t.bytes.Load()
		if n <= old {
			return
		}
		if t.bytes.CompareAndSwap(old, n) {
			t.moved(n)
			return
		}
	}
}

// moved keeps a progress point: the bytes reached b now.
func (t *Transfer) moved(b int64) {
	at := time.Since(t.base)
	t.mu.Lock()
	// Concurrent Adds may arrive out of order: a point never goes back.
	if g := &t.pts; g.n == 0 || b > g.p[g.head].bytes {
		g.add(max(at, g.p[g.head].at), b)
	}
	t.mu.Unlock()
}

// rate is the transfer's live rate at now, in bytes/s (progress.rate).
func (t *Transfer) rate(now time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pts.rate(now.Sub(t.base))
}

// SetSize records the file size once it is known (-1 unknown).
func (t *Transfer) SetSize(n int64) {
	if t != nil {
		t.size.Store(n)
	}
}

// End removes the transfer from the registry. It may be called more than
// once.
func (t *Transfer) End() {
	if t == nil {
		return
	}
	t.a.mu.Lock()
	delete(t.a.m, t.id)
	t.a.mu.Unlock()
}

// TransferInfo is a transfer in progress as a Snapshot reports it; the
// JSON names follow record.Record's.
type TransferInfo struct {
	ID        uint64    `json:"id"`
	Start     time.Time `json:"time"`
	Proto     string    `json:"proto"`
	ClientIP  string    `json:"client_ip"`
	ClientMAC string    `json:"client_mac,omitempty"`
	Host      string    `json:"host,omitempty"`
	File      string    `json:"file"`
	// Bytes is what the board acknowledged so far; Mbps its live rate
	// (over at least RateWindow, see progress.rate).
	Bytes int64   `json:"bytes"`
	Size  int64   `json:"size"`
	Mbps  float64 `json:"mbps"`
}

// Snapshot lists the transfers in progress, oldest first.
func (a *Active) Snapshot() []TransferInfo {
	if a == nil {
		return nil
	}
	now := time.Now()
	a.mu.Lock()
	out := make([]TransferInfo, 0, len(a.m))
	for _, t := range a.m {
		out = append(out, TransferInfo{ID: t.id, Start: t.start, Proto: t.proto, ClientIP: t.client.Addr().String(),
			ClientMAC: t.mac, Host: t.host, File: t.file, Bytes: t.bytes.Load(), Size: t.size.Load(),
			Mbps: t.rate(now) * 8 / 1e6})
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Count returns how many transfers of each protocol are in progress.
func (a *Active) Count() map[string]int {
	out := map[string]int{}
	if a == nil {
		return out
	}
	a.mu.Lock()
	for _, t := range a.m {
		out[t.proto]++
	}
	a.mu.Unlock()
	return out
}
