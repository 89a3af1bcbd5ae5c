// Package event defines what the protocol servers (dhcp, tftp, httpboot) tell
// the rest of pxeperf: one Fetch per file a client pulled, one Lease per DHCP
// binding. Protocol code only emits events through a Sink; storage, reports and
// logs live behind that interface, so serving never depends on them.
package event

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Protocol names used in Fetch.Proto.
const (
	ProtoTFTP = "tftp"
	ProtoHTTP = "http"
	ProtoTCP  = "tcp" // a TCP throughput test (perfsrv)
	ProtoUDP  = "udp" // a UDP throughput test (perfsrv)
)

// Outcomes used in Fetch.Outcome.
const (
	OutcomeOK       = "ok"        // the whole file was delivered
	OutcomeAborted  = "aborted"   // the client stopped early (EDK2 tsize probe, reset)
	OutcomeNotFound = "not-found" // no such file
	OutcomeDenied   = "denied"    // path escape, write request, ...
	OutcomeError    = "error"     // anything else; see Fetch.Err
)

// KindConfig marks a Fetch of a boot config or script pxeperf generated for
// the client (pxelinux.cfg, grub.cfg, boot.scr.uimg, the iPXE script), not
// a file from the root.
const KindConfig = "config"

// Fetch is one file transfer to one client, as seen by the server.
type Fetch struct {
	Start     time.Time
	Proto     string
	Client    netip.AddrPort
	MAC       net.HardwareAddr // from the lease table when known
	Host      string           // host entry name when known
	File      string           // the name the client asked for
	Kind      string           // KindConfig for a generated config or script; "" for a file from the root
	Bytes     int64            // payload bytes delivered
	Size      int64            // file size, -1 when unknown
	Duration  time.Duration
	Outcome   string
	Err       string
	Labels    map[string]string
	TFTP      *TFTPInfo // set for TFTP fetches
	TCP       *TCPInfo  // set for HTTP fetches where TCP_INFO could be read
	Interface string    // local interface the fetch went out of, when known
	// Local is the server's address the fetch was served from (the
	// connection's local address, the TFTP request's destination). The
	// record's interface, MTU, speed and offloads are those of the
	// interface holding it, whatever Interface says.
	Local netip.Addr
	// Intervals are per-period samples (default 1 s) of an HTTP fetch, for
	// iperf3-style interval lines; the last one may be shorter.
	Intervals []Interval
	// Source names who measured when it is not the serving sink's default
	// (perfsrv: "iperf3", "iperf2"); "" keeps the sink's.
	Source string
	// Direction as seen from the board: "rx" (the board received; every
	// served fetch) or "tx" (the board sent, e.g. iperf3 without -R). ""
	// means "rx".
	Direction string
	// UDP is what the receiving end of a UDP test counted (set for UDP
	// tests); Test what a throughput test measured beside its bytes and
	// time (perfsrv). Measured figures go here, never in Labels, which
	// hold only what the user or the board said.
	UDP  *UDPInfo
	Test *TestInfo
}

// UDPInfo is a UDP test's receiving end: perfsrv's when the board sent,
// the board's own (iperf3's result exchange) when it received.
type UDPInfo struct {
	JitterMs float64 // RFC 3550 interarrival jitter, ms (iperf3's jitter_ms)
	Lost     int64   // datagrams lost, by sequence number
	Packets  int64   // datagrams expected (received + lost), iperf3's "packets"
}

// LostPct is 100 * Lost / Packets, as iperf3's lost_percent (0 without
// packets).
func (u *UDPInfo) LostPct() float64 {
	if u.Packets <= 0 {
		return 0
	}
	return float64(u.Lost) * 100 / float64(u.Packets)
}

// TestInfo is what a throughput test (perfsrv) measured beside the
// fetch's Bytes and Duration: the server's own figures where the record
// takes the board's, and the board's where its client reported them.
type TestInfo struct {
	// ServerBytes is the server's own count of the direction when Bytes
	// is the board's: what it sent (UDP) or saw acknowledged (TCP).
	ServerBytes int64
	// ServerWritten is what the server wrote to its TCP streams.
	ServerWritten int64
	// ServerDuration is the server's own window (TEST_RUNNING to
	// TEST_END); ClientClock says Duration is the board's clock instead.
	ServerDuration time.Duration
	ClientClock    bool
	// The board's own figures of this direction (iperf3's result
	// exchange): bytes, Mbit/s over its own seconds, and its TCP
	// retransmits when it sent. ClientReported is false when it gave none.
	ClientReported    bool
	ClientBytes       int64
	ClientMbps        float64
	ClientRetransmits int64
}

// Interval is one sampling period of a fetch, as iperf3 prints it.
type Interval struct {
	Start, End  time.Duration // from the fetch start
	Bytes       int64         // payload bytes acknowledged (or written) in the period
	Retransmits uint32        // segments retransmitted in the period
	Cwnd        uint32        // congestion window at the end, bytes
	SndWnd      uint32        // window the client advertised at the end, bytes
	RTT         time.Duration // smoothed RTT at the end
}

// Mbps is the payload throughput in Mbit/s (10^6 bit/s).
func (f *Fetch) Mbps() float64 {
	if f.Duration <= 0 {
		return 0
	}
	return float64(f.Bytes) * 8 / f.Duration.Seconds() / 1e6
}

// TFTPInfo holds what was negotiated and counted for one TFTP transfer.
type TFTPInfo struct {
	BlockSize   int  // negotiated blksize (512 without the option)
	WindowSize  int  // negotiated windowsize (1 without the option)
	TSize       bool // the client asked for tsize
	Timeout     time.Duration
	Datagrams   int64 // DATA packets sent, resends included
	Retransmits int64 // DATA packets sent again
	Timeouts    int64
	// The effective window of a windowed transfer: the least, median and
	// largest number of new blocks the server put in one round (it adapts
	// under WindowSize, the ceiling; 0s for lock-step).
	WindowMin, WindowMedian, WindowMax int
	// LossEvents counts rounds the client answered short (an early or a
	// repeated ACK) or not at all, each shrinking the effective window.
	LossEvents int64
	// RTT is the smoothed time from a round's last block to its ACK, which
	// the retransmit timer follows (0 when never measured).
	RTT time.Duration
}

// TCPInfo is read from the kernel (TCP_INFO) at the end of an HTTP fetch.
type TCPInfo struct {
	RTT           time.Duration
	MinRTT        time.Duration
	RTTVar        time.Duration
	Retransmits   uint32 // total retransmitted segments
	MaxSndWnd     uint32 // largest window the client advertised, bytes
	MedSndWnd     uint32 // median of the windows sampled during the fetch, bytes
	SndWnd        uint32 // window the client advertised at the end, bytes
	SndCwnd       uint32 // congestion window, segments
	MSS           uint32
	PMTU          uint32
	DeliveryRate  uint64 // bytes/s, kernel estimate
	RWndLimited   time.Duration
	SndBufLimited time.Duration
}

// Measured says the figures were read from the kernel (a connection's RTT
// is never 0). False: only Retransmits is known, the board's own count
// relayed in iperf3's result exchange when the board sent; logs leave the
// rest out rather than print 0s the server cannot know.
func (t *TCPInfo) Measured() bool { return t.RTT > 0 }

// Lease is a DHCP binding handed out (or renewed) in full mode, or a PXE
// client answered in proxy mode (Addr then invalid).
type Lease struct {
	Time     time.Time
	MAC      net.HardwareAddr
	Addr     netip.Addr
	Arch     uint16 // option 93, 0xffff when absent
	Host     string
	BootFile string
	Expiry   time.Time
	Proxy    bool
}

// Sink receives events. Implementations must be safe for concurrent use and
// must not block serving for long: never wait for a store, the network or a
// lock held across I/O. One append of the event to a local file is the most
// I/O done inline (record.Sink's journal write, its commit point); the rest
// is buffered.
type Sink interface {
	Fetch(*Fetch)
	Lease(*Lease)
}

// Multi sends every event to each sink in turn.
type Multi []Sink

func (m Multi) Fetch(f *Fetch) {
	for _, s := range m {
		s.Fetch(f)
	}
}

func (m Multi) Lease(l *Lease) {
	for _, s := range m {
		s.Lease(l)
	}
}

// Discard drops every event.
type Discard struct{}

func (Discard) Fetch(*Fetch) {}
func (Discard) Lease(*Lease) {}

// Log writes one structured line per event.
type Log struct{ Logger *slog.Logger }

func (l Log) Fetch(f *Fetch) {
	attrs := []any{
		"proto", f.Proto, "client", f.Client.String(), "file", f.File,
		"bytes", f.Bytes, "duration", f.Duration.Round(time.Microsecond), "mbps", round2(f.Mbps()),
		"outcome", f.Outcome,
	}
	if f.MAC != nil {
		attrs = append(attrs, "client_mac", f.MAC.String())
	}
	if f.Host != "" {
		attrs = append(attrs, "host", f.Host)
	}
	if f.Kind != "" {
		attrs = append(attrs, "kind", f.Kind)
	}
	if f.Err != "" {
		attrs = append(attrs, "err", f.Err)
	}
	if t := f.TFTP; t != nil {
		attrs = append(attrs, "blksize", t.BlockSize, "windowsize", t.WindowSize, "retransmits", t.Retransmits, "timeouts", t.Timeouts)
		if t.WindowMax > 0 {
			attrs = append(attrs, "eff_window", fmt.Sprintf("%d/%d/%d", t.WindowMin, t.WindowMedian, t.WindowMax),
				"losses", t.LossEvents, "tftp_rtt", t.RTT)
		}
	}
	if t := f.TCP; t != nil && t.Measured() {
		attrs = append(attrs, "rtt", t.RTT, "retrans", t.Retransmits, "max_wnd", t.MaxSndWnd)
	} else if t != nil {
		attrs = append(attrs, "retrans", t.Retransmits) // the board's relayed count alone
	}
	l.Logger.Info("fetch", attrs...)
}

// Lease logs a binding; a proxy answer has no address, so it has no ip
// (not ip="invalid IP").
func (l Log) Lease(e *Lease) {
	attrs := []any{"client_mac", e.MAC.String()}
	if e.Addr.IsValid() {
		attrs = append(attrs, "ip", e.Addr.String())
	}
	attrs = append(attrs, "arch", e.Arch, "host", e.Host, "boot_file", e.BootFile, "proxy", e.Proxy)
	l.Logger.Info("lease", attrs...)
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// Recorder keeps every event in memory; tests use it.
type Recorder struct {
	mu      sync.Mutex
	Fetches []Fetch
	Leases  []Lease
}

func (r *Recorder) Fetch(f *Fetch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Fetches = append(r.Fetches, *f)
}

func (r *Recorder) Lease(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Leases = append(r.Leases, *l)
}

// Snapshot returns copies of what was recorded so far.
func (r *Recorder) Snapshot() ([]Fetch, []Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Fetch(nil), r.Fetches...), append([]Lease(nil), r.Leases...)
}

// WaitFetches waits until n fetches are recorded, at most timeout (a
// server records a fetch after its client is done), and returns copies of
// those recorded by then; ok is false when fewer came in time.
func (r *Recorder) WaitFetches(n int, timeout time.Duration) (fetches []Fetch, ok bool) {
	deadline := time.Now().Add(timeout)
	for {
		fetches, _ = r.Snapshot()
		if len(fetches) >= n {
			return fetches, true
		}
		if !time.Now().Before(deadline) {
			return fetches, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
