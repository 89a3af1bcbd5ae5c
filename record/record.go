// Package record turns events into durable, queryable measurement records:
// one Record per fetch (served, or later a bench run) with the conditions
// that explain the number (window, RTT, MTU, offloads, link speed, labels),
// plus per-interval samples. Records live in one SQLite file under the data
// folder, or in a PostgreSQL database many servers share (store.url); the
// journal is the commit point either way. report/ reads them back.
package record

import (
	"time"
)

// Offload is the state of one offload feature: on, off or unknown ("").
type Offload string

const (
	OffloadOn      Offload = "on"
	OffloadOff     Offload = "off"
	OffloadUnknown Offload = ""
)

// Record is one measured fetch. Durations are stored in microseconds;
// windows and sizes in bytes.
type Record struct {
	ID     int64     `json:"id"`
	Time   time.Time `json:"time"`   // fetch start, UTC
	Source string    `json:"source"` // "serve" or "bench"
	Proto  string    `json:"proto"`  // "http", "tftp", later "tcp", "udp"
	// Direction is "tx" or "rx" as seen from the board (client) side; a
	// served fetch is "rx" (the board receives).
	Direction string `json:"direction"`
	ClientMAC string `json:"client_mac,omitempty"`
	ClientIP  string `json:"client_ip"`
	Host      string `json:"host,omitempty"`
	Arch      string `json:"arch,omitempty"`
	File      string `json:"file"`
	// Kind is what was fetched: KindImage, KindBoot, KindConfig, KindAPI,
	// KindError, KindProbe or KindStream, decided by Classify when the record is
	// written (records of an older pxeperf are classified when read); or
	// KindEvent, a milestone and no fetch (FromMilestone).
	Kind     string            `json:"kind,omitempty"`
	Bytes    int64             `json:"bytes"`
	Size     int64             `json:"size"`
	Duration time.Duration     `json:"duration_ns"`
	Mbps     float64           `json:"mbps"`
	Outcome  string            `json:"outcome"`
	Err      string            `json:"err,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Server is the pxeperf that measured the fetch (server.name, default
	// the host name) and Site its lab segment (server.site, optional): one
	// PostgreSQL store holds the records of many servers.
	Server string `json:"server,omitempty"`
	Site   string `json:"site,omitempty"`

	// HTTP / TCP, from TCP_INFO sampled during the fetch.
	WndMax        uint32        `json:"wnd_max,omitempty"`       // largest window the client advertised
	WndMedian     uint32        `json:"wnd_median,omitempty"`    // median of the sampled windows
	WndRequested  uint32        `json:"wnd_requested,omitempty"` // bench: SO_RCVBUF asked for
	RTT           time.Duration `json:"rtt_ns,omitempty"`
	MinRTT        time.Duration `json:"min_rtt_ns,omitempty"`
	Retransmits   int64         `json:"retransmits"`             // TCP segments or TFTP blocks sent again; RetransmitsUnknown: not known
	DeliveryRate  uint64        `json:"delivery_rate,omitempty"` // bytes/s
	RwndLimited   time.Duration `json:"rwnd_limited_ns,omitempty"`
	SndbufLimited time.Duration `json:"sndbuf_limited_ns,omitempty"`
	MSS           uint32        `json:"mss,omitempty"`
	PMTU          uint32        `json:"pmtu,omitempty"`

	// TFTP.
	BlkSize    int   `json:"blksize,omitempty"`
	WindowSize int   `json:"windowsize,omitempty"`
	TSize      bool  `json:"tsize,omitempty"`
	Datagrams  int64 `json:"datagrams,omitempty"`
	Acked      int64 `json:"acked,omitempty"`
	Timeouts   int64 `json:"timeouts,omitempty"`
	// The adaptive sender's effective window (blocks per round: least,
	// median, largest) and its loss events; RTT above holds its smoothed
	// round trip.
	EffWndMin    int   `json:"eff_wnd_min,omitempty"`
	EffWndMedian int   `json:"eff_wnd_median,omitempty"`
	EffWndMax    int   `json:"eff_wnd_max,omitempty"`
	LossEvents   int64 `json:"loss_events,omitempty"`

	// Server side, read when the record is written, from the interface
	// holding the fetch's local address (cached per interface).
	Iface     string  `json:"iface,omitempty"`
	MTU       int     `json:"mtu,omitempty"`            // the interface's, or the TCP path MTU when smaller
	LinkMbps  int     `json:"link_mbps,omitempty"`      // the driver's speed (virtual NICs report a nominal one: veth 10000); 0 none reported
	RateLimit int64   `json:"rate_limit_bps,omitempty"` // bench: tbf rate, bits/s
	RxCsum    Offload `json:"rx_csum,omitempty"`
	TxCsum    Offload `json:"tx_csum,omitempty"`
	TSO       Offload `json:"tso,omitempty"`
	GSO       Offload `json:"gso,omitempty"`
	GRO       Offload `json:"gro,omitempty"`
	Kernel    string  `json:"kernel,omitempty"`

	// Bench with --delay: the one-way delay asked (each way, as the
	// testbed reads it back) and, behind netlab's own delay line (label
	// delay_via=line; netem measures nothing), what the line delivered
	// over the fetch, both ways: the delay it added per frame (kernel
	// receive to sent on: median, 99th percentile, largest), the frames it
	// moved, those held beyond the asked delay plus netlab.LateMargin, and
	// whether it fell behind (more than 1 % late: the round trip the fetch
	// saw was the busy host's, not the asked one).
	DelayAsked  time.Duration `json:"delay_asked_ns,omitempty"`
	DelayP50    time.Duration `json:"delay_p50_ns,omitempty"`
	DelayP99    time.Duration `json:"delay_p99_ns,omitempty"`
	DelayMax    time.Duration `json:"delay_max_ns,omitempty"`
	DelayFrames int64         `json:"delay_frames,omitempty"`
	DelayLate   int64         `json:"delay_late,omitempty"`
	DelayBehind bool          `json:"delay_behind,omitempty"`
	// LinkDriver is the interface's driver (ETHTOOL_GDRVINFO: "veth",
	// "e1000e"), so a reader tells a NIC's speed from the nominal figure
	// of a virtual one (netstate.NominalSpeed); "" not read (older records).
	LinkDriver string `json:"link_driver,omitempty"`
	// Measured figures of their own (labels hold only what the user, the
	// host entry or the board said). Records of an older pxeperf that
	// carried these as labels are read with them here (LiftLabels).
	//
	// UDP, the receiving end's count: perfsrv's, the board's (iperf3's
	// result exchange) or the bench client's.
	JitterMs   float64 `json:"jitter_ms,omitempty"`
	UDPLost    int64   `json:"udp_lost,omitempty"`
	UDPPackets int64   `json:"udp_packets,omitempty"` // expected: received + lost
	UDPLostPct float64 `json:"udp_lost_pct,omitempty"`
	// perfsrv: the server's own figures where Bytes and Duration are the
	// board's (ClientClock), and the board's own.
	ServerBytes       int64         `json:"server_bytes,omitempty"`   // UDP sent, TCP acknowledged
	ServerWritten     int64         `json:"server_written,omitempty"` // written to the TCP streams
	ServerDuration    time.Duration `json:"server_duration_ns,omitempty"`
	ClientClock       bool          `json:"client_clock,omitempty"`
	ClientBytes       int64         `json:"client_bytes,omitempty"`
	ClientMbps        float64       `json:"client_mbps,omitempty"`
	ClientRetransmits int64         `json:"client_retransmits,omitempty"`
	// bench: the client's side of the fetch.
	SenderMbps       float64       `json:"sender_mbps,omitempty"` // a stream's sending end
	Rcvbuf           int           `json:"rcvbuf,omitempty"`      // SO_RCVBUF read back
	CPU              time.Duration `json:"cpu_ns,omitempty"`      // the bench process (client and server)
	ClientDuplicates int64         `json:"client_duplicates,omitempty"`
	ClientOutOfOrder int64         `json:"client_out_of_order,omitempty"`
	ClientEarlyACKs  int64         `json:"client_early_acks,omitempty"`
	ClientTimeouts   int64         `json:"client_timeouts,omitempty"`
	// bench --cross-check: iperf3's receiver figure at the same point,
	// ours' deviation from it, its UDP loss, or why it failed.
	Iperf3Mbps    float64 `json:"iperf3_mbps,omitempty"`
	Iperf3DevPct  float64 `json:"iperf3_dev_pct,omitempty"`
	Iperf3LostPct float64 `json:"iperf3_udp_lost_pct,omitempty"`
	Iperf3Err     string  `json:"iperf3_err,omitempty"`
}

// RetransmitsUnknown is a record's Retransmits when the sender's count
// never reached pxeperf: an iperf3 test the board sent (the server
// received) that ended without the board's results. 0 would say "none".
const RetransmitsUnknown = -1

// Interval is one sampling period of a record (iperf3's interval line).
type Interval struct {
	RecordID    int64         `json:"record_id"`
	Start       time.Duration `json:"start_ns"`
	End         time.Duration `json:"end_ns"`
	Bytes       int64         `json:"bytes"`
	Retransmits uint32        `json:"retransmits"`
	Cwnd        uint32        `json:"cwnd"` // bytes
	SndWnd      uint32        `json:"snd_wnd"`
	RTT         time.Duration `json:"rtt_ns"`
}

// Mbps of an interval.
func (iv Interval) Mbps() float64 {
	d := (iv.End - iv.Start).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(iv.Bytes) * 8 / d / 1e6
}

// Filter selects records. Zero fields match everything.
type Filter struct {
	Client string // MAC, IP or host name
	File   string // exact name, or a glob with * and ?
	Since  time.Time
	Labels map[string]string // every key must have that value
	Source string
	Proto  string
	Server string // server.name of the pxeperf that measured it
	Site   string // server.site
	// Kinds keeps records of these kinds (KindNames); nil: every kind of
	// fetch (KindEvent only when named).
	Kinds []string
	// MinSize keeps records of at least this many bytes (file size, or
	// bytes moved when larger); 0: any size.
	MinSize int64
	Limit   int // 0: no limit; newest first when set
	// Before, when set, keeps only records older than this position in
	// the newest-first order (time, then id): the cursor of a paged read.
	Before Position
}

// Position is a record's place in the newest-first order: its time and id.
type Position struct {
	Time time.Time
	ID   int64
}

// IsZero reports whether p is unset.
func (p Position) IsZero() bool { return p.Time.IsZero() && p.ID == 0 }
