package stream

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// Connection kinds after the magic.
const (
	magic        = "PXS1"
	kindControl  = 'C'
	kindData     = 'D'
	cookieLen    = 16
	maxRequest   = 4 << 10    // client -> server frames
	maxResult    = 1 << 20    // server -> client frames (up to 600 intervals)
	udpMagic     = 0x50585531 // "PXU1"
	headerLen    = 28
	helloSeq     = math.MaxUint64
	protoVersion = 1
)

// request is the client's first control frame.
type request struct {
	Version    int    `json:"version"`
	Proto      string `json:"proto"` // tcp, udp
	Dir        string `json:"dir"`   // tx, rx
	DurationMs int64  `json:"duration_ms"`
	IntervalMs int64  `json:"interval_ms"`
	Bytes      int64  `json:"bytes,omitempty"`
	Buf        int    `json:"buf,omitempty"` // server data socket buffers
	Rate       int64  `json:"rate,omitempty"`
	PacketSize int    `json:"packet_size,omitempty"`
}

func (r request) validate() error {
	switch {
	case r.Version != protoVersion:
		return fmt.Errorf("protocol version %d not supported (this server speaks %d: update pxeperf on both ends)", r.Version, protoVersion)
	case r.Proto != "tcp" && r.Proto != "udp":
		return fmt.Errorf("protocol %q: use tcp or udp", r.Proto)
	case r.Dir != "tx" && r.Dir != "rx":
		return fmt.Errorf("direction %q: use tx or rx", r.Dir)
	case r.DurationMs <= 0 || r.DurationMs > MaxDuration.Milliseconds():
		return fmt.Errorf("duration %d ms out of range 1..%d ms", r.DurationMs, MaxDuration.Milliseconds())
	case r.IntervalMs < MinInterval.Milliseconds() || r.IntervalMs > MaxInterval.Milliseconds():
		return fmt.Errorf("interval %d ms out of range %d..%d ms", r.IntervalMs, MinInterval.Milliseconds(), MaxInterval.Milliseconds())
	case r.Bytes < 0 || r.Bytes > MaxBytes:
		return fmt.Errorf("byte count %d out of range 0..%d", r.Bytes, int64(MaxBytes))
	case r.Buf != 0 && (r.Buf < MinBuf || r.Buf > MaxBuf):
		return fmt.Errorf("socket buffer %d out of range %d..%d bytes (0 for autotuning)", r.Buf, MinBuf, MaxBuf)
	}
	if r.Proto == "udp" {
		switch {
		case r.Rate < MinRate || r.Rate > MaxRate:
			return fmt.Errorf("UDP rate %d bit/s out of range %d..%d", r.Rate, int64(MinRate), int64(MaxRate))
		case r.PacketSize < MinPacketSize || r.PacketSize > MaxPacketSize:
			return fmt.Errorf("UDP packet size %d out of range %d..%d bytes", r.PacketSize, MinPacketSize, MaxPacketSize)
		case r.Bytes != 0:
			return fmt.Errorf("a byte count is for TCP tests; UDP runs for a duration at a rate")
		}
	} else if r.Rate != 0 || r.PacketSize != 0 {
		return fmt.Errorf("rate and packet size are for UDP tests")
	}
	return nil
}

// message is every control frame after the request.
type message struct {
	Type      string  `json:"type"` // reply, start, done, result, error
	Error     string  `json:"error,omitempty"`
	Cookie    []byte  `json:"cookie,omitempty"`
	UDPPort   int     `json:"udp_port,omitempty"`
	Intervals []Stats `json:"intervals,omitempty"`
	Sum       *Stats  `json:"sum,omitempty"`
	Packets   int64   `json:"packets,omitempty"` // UDP datagrams sent
}

// writeFrame writes a length-prefixed JSON frame.
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	_, err = w.Write(append(buf, b...))
	return err
}

// readFrame reads one frame of at most max bytes into v.
func readFrame(r io.Reader, max int, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > uint32(max) {
		return fmt.Errorf("%w: frame of %d bytes (limit %d)", ErrProto, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", ErrProto, err)
	}
	return nil
}

// readHello reads a connection's magic and kind, and the cookie of a data
// connection.
func readHello(r io.Reader) (kind byte, cookie [cookieLen]byte, err error) {
	var b [len(magic) + 1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, cookie, err
	}
	if string(b[:len(magic)]) != magic {
		return 0, cookie, fmt.Errorf("%w: bad magic %q (not a pxeperf stream client)", ErrProto, b[:len(magic)])
	}
	switch kind = b[len(magic)]; kind {
	case kindControl:
	case kindData:
		if _, err := io.ReadFull(r, cookie[:]); err != nil {
			return 0, cookie, err
		}
	default:
		return 0, cookie, fmt.Errorf("%w: unknown connection kind %q", ErrProto, kind)
	}
	return kind, cookie, nil
}

// datagram is a UDP test packet's header.
type datagram struct {
	session uint64
	seq     uint64
	sent    time.Duration // sender's clock since its start
}

func (d datagram) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], udpMagic)
	binary.BigEndian.PutUint64(b[4:], d.session)
	binary.BigEndian.PutUint64(b[12:], d.seq)
	binary.BigEndian.PutUint64(b[20:], uint64(d.sent))
}

// parseDatagram checks and decodes a UDP test packet's header.
func parseDatagram(b []byte) (datagram, error) {
	if len(b) < headerLen {
		return datagram{}, fmt.Errorf("%w: datagram of %d bytes, shorter than the %d-byte header", ErrProto, len(b), headerLen)
	}
	if binary.BigEndian.Uint32(b) != udpMagic {
		return datagram{}, fmt.Errorf("%w: datagram without the PXU1 magic", ErrProto)
	}
	return datagram{
		session: binary.BigEndian.Uint64(b[4:]),
		seq:     binary.BigEndian.Uint64(b[12:]),
		sent:    time.Duration(binary.BigEndian.Uint64(b[20:])),
	}, nil
}
