// Package stream is pxeperf's own TCP and UDP throughput test, the bench's
// answer to iperf3: a Server (run by `pxeperf serve` for remote mode and by
// the bench inside its testbed) and the clients TCP and UDP, which return a
// Result shaped like iperf3's JSON (intervals, sender and receiver sums,
// retransmits and cwnd of the sending socket, UDP loss and jitter).
//
// Directions are seen from the client (the board): Tx means the client
// sends, Rx means the server sends and the client measures what it got.
//
// Wire protocol (all integers big-endian), one test per control connection:
//
//	control: "PXS1" 'C', then frames: uint32 length + JSON
//	         client -> request; server -> reply (cookie, UDP port) ... "start"
//	         ... "result" (the server's view: receiver or sender intervals)
//	data:    "PXS1" 'D' + 16-byte cookie, then the TCP stream
//	UDP:     28-byte header (magic "PXU1", session id, sequence, sender
//	         clock in ns) + padding to the packet size; a hello datagram
//	         (sequence all ones) tells the server where the client is
//
// The server is safe on a lab network: it bounds durations (MaxDuration),
// rates (MaxRate), sizes and buffers, runs one test at a time per client
// address and at most MaxSessions at once, and refuses anything else with
// an error the client prints.
package stream

import (
	"errors"
	"fmt"
	"time"
)

// Direction is the way data flows, seen from the client.
type Direction int

// Directions.
const (
	Tx Direction = iota // the client sends (board upload)
	Rx                  // the server sends (board download, like iperf3 -R)
)

func (d Direction) String() string {
	switch d {
	case Tx:
		return "tx"
	case Rx:
		return "rx"
	}
	return fmt.Sprintf("direction(%d)", int(d))
}

// ParseDirection reads "tx" or "rx" (as the bench's --direction flag takes
// them).
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "tx":
		return Tx, nil
	case "rx":
		return Rx, nil
	}
	return 0, fmt.Errorf("stream: direction %q: use tx (the board sends) or rx (the board receives)", s)
}

// MarshalText writes "tx" or "rx", so results read well as JSON.
func (d Direction) MarshalText() ([]byte, error) {
	if d != Tx && d != Rx {
		return nil, fmt.Errorf("stream: unknown direction %d", int(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads "tx" or "rx".
func (d *Direction) UnmarshalText(b []byte) error {
	v, err := ParseDirection(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Limits the server enforces and the client checks before it connects.
const (
	DefaultPort       = 5211
	DefaultDuration   = 10 * time.Second
	DefaultInterval   = time.Second
	DefaultPacketSize = 1448 // iperf3's UDP default on a 1500-byte link
	DefaultRate       = 1_000_000
	MaxDuration       = 60 * time.Second
	MinInterval       = 100 * time.Millisecond
	MaxInterval       = 10 * time.Second
	MaxRate           = 10_000_000_000 // UDP, bit/s
	MinRate           = 1_000
	MinPacketSize     = headerLen
	MaxPacketSize     = 65507 // largest IPv4 UDP payload
	MaxBuf            = 64 << 20
	MinBuf            = 1 << 10
	MaxBytes          = 1 << 40
	MaxSessions       = 8
)

// Config is one test. Zero fields take the defaults named above.
type Config struct {
	Addr      string    // server host:port (port DefaultPort if missing)
	Direction Direction // Tx: the client sends; Rx: the server sends
	Duration  time.Duration
	Bytes     int64         // stop after this many bytes (TCP) instead of Duration; still bounded by MaxDuration
	Interval  time.Duration // report interval, default 1 s
	// RcvBuf and SndBuf set SO_RCVBUF and SO_SNDBUF on the client's data
	// socket before it connects (0: kernel autotuning). The kernel doubles
	// the value for its bookkeeping, as it does for iperf3 -w.
	RcvBuf, SndBuf int
	// ServerBuf sets both buffers on the server's data socket after accept
	// (0: autotuning). iperf3 -w sets the window on both ends; set RcvBuf,
	// SndBuf and ServerBuf to the same value to compare with it.
	ServerBuf int
	// UDP only.
	Rate       int64 // bit/s of UDP payload, default DefaultRate (1 Mbit/s, as iperf3)
	PacketSize int   // UDP payload bytes, default DefaultPacketSize
}

// Stats is one interval or a summary, as iperf3 reports it. Bytes count TCP
// payload or UDP payload (header included, as iperf3 counts it).
type Stats struct {
	Start, End    time.Duration // since the test started
	Bytes         int64
	BitsPerSecond float64
	// TCP, from TCP_INFO of the sending socket (the server's for Rx).
	Retransmits int64         // tcpi_total_retrans delta
	SndCwnd     int64         // snd_cwnd * snd_mss at the end, bytes
	RTT         time.Duration // smoothed RTT at the end
	// UDP, at the receiver (Packets at the sender in a sender summary).
	Packets     int64
	Lost        int64   // by sequence numbers: expected - received
	LostPercent float64 // 100 * Lost / expected
	OutOfOrder  int64
	Duplicates  int64
	JitterMs    float64 // RFC 3550 interarrival jitter at the end
}

// Result is one test's outcome.
type Result struct {
	Proto     string // "tcp" or "udp"
	Direction Direction
	// Intervals are the client's view: bytes it sent (Tx) or received
	// (Rx), with the sender's retransmits and cwnd (TCP) and the receiver's
	// loss and jitter (UDP) merged in from the peer by interval index.
	Intervals []Stats
	// PeerIntervals are the server's own intervals, as it reported them.
	PeerIntervals    []Stats
	Sender, Receiver Stats
}

// Errors a test can fail with, for errors.Is.
var (
	ErrRefused = errors.New("stream: server refused the test")
	ErrProto   = errors.New("stream: protocol error")
)

// withDefaults fills zero fields and checks the limits.
func (c Config) withDefaults(udp bool) (Config, error) {
	if c.Duration == 0 {
		c.Duration = DefaultDuration
		if c.Bytes > 0 {
			c.Duration = MaxDuration
		}
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if udp {
		if c.Rate == 0 {
			c.Rate = DefaultRate
		}
		if c.PacketSize == 0 {
			c.PacketSize = DefaultPacketSize
		}
	}
	for _, b := range []int{c.RcvBuf, c.SndBuf} {
		if b != 0 && (b < MinBuf || b > MaxBuf) {
			return c, fmt.Errorf("stream: socket buffer %d out of range %d..%d bytes (0 for autotuning)", b, MinBuf, MaxBuf)
		}
	}
	return c, c.request(udp).validate()
}

func (c Config) request(udp bool) request {
	r := request{Version: 1, Proto: "tcp", Dir: c.Direction.String(), DurationMs: c.Duration.Milliseconds(),
		IntervalMs: c.Interval.Milliseconds(), Bytes: c.Bytes, Buf: c.ServerBuf}
	if udp {
		r.Proto, r.Rate, r.PacketSize = "udp", c.Rate, c.PacketSize
	}
	return r
}
