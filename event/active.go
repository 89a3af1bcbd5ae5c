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
// dashboard, /api/active, the active-transfers gauge). tftp and httpboot
// register each transfer with Begin and report progress with atomic adds,
// once per window or sampling tick, never a lock per block; readers take a
// Snapshot. A nil *Active registers nothing and costs nothing, so servers
// built without one (tests, bench) are unchanged. Safe for concurrent use.
type Active struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*Transfer
}

// NewActive returns an empty registry.
func NewActive() *Active { return &Active{m: map[uint64]*Transfer{}} }

// Transfer is one transfer in progress. Its identity is fixed at Begin;
// bytes and size are updated atomically. Methods on a nil *Transfer do
// nothing.
type Transfer struct {
	a      *Active
	id     uint64
	start  time.Time
	proto  string
	client netip.AddrPort
	mac    string
	host   string
	file   string
	bytes  atomic.Int64
	size   atomic.Int64
}

// Begin registers a transfer described by f (Start, Proto, Client, MAC,
// Host, File, Size); End removes it.
func (a *Active) Begin(f *Fetch) *Transfer {
	if a == nil {
		return nil
	}
	t := &Transfer{a: a, start: f.Start, proto: f.Proto, client: f.Client, host: f.Host, file: f.File}
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

// Add counts n more payload bytes delivered.
func (t *Transfer) Add(n int64) {
	if t != nil {
		t.bytes.Add(n)
	}
}

// Set records the payload bytes delivered so far (HTTP reads them from the
// kernel's acknowledged count), never going back.
func (t *Transfer) Set(n int64) {
	if t == nil {
		return
	}
	for {
		old := t.bytes.Load()
		if n <= old || t.bytes.CompareAndSwap(old, n) {
			return
		}
	}
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
	Bytes     int64     `json:"bytes"`
	Size      int64     `json:"size"`
}

// Snapshot lists the transfers in progress, oldest first.
func (a *Active) Snapshot() []TransferInfo {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	out := make([]TransferInfo, 0, len(a.m))
	for _, t := range a.m {
		out = append(out, TransferInfo{ID: t.id, Start: t.start, Proto: t.proto, ClientIP: t.client.Addr().String(),
			ClientMAC: t.mac, Host: t.host, File: t.file, Bytes: t.bytes.Load(), Size: t.size.Load()})
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
