package perfsrv

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// iperf3's control protocol, as iperf 3.12 speaks it (src/iperf_api.h,
// src/iperf.h, src/iperf_api.c). Every state is one signed byte on the
// control connection; JSON goes as a 4-byte big-endian length, then the text
// (JSON_write / JSON_read).
const (
	stateTestStart       = 1
	stateTestRunning     = 2
	stateTestEnd         = 4
	stateParamExchange   = 9
	stateCreateStreams   = 10
	stateServerTerminate = 11
	stateClientTerminate = 12
	stateExchangeResults = 13
	stateDisplayResults  = 14
	stateIperfDone       = 16
	stateAccessDenied    = -1 // "the server is busy running a test. try again later"
	stateServerError     = -2 // followed by i_errno and errno, 4 bytes each, big-endian
)

// i_errno values the client prints after stateServerError (iperf_api.h,
// strings in iperf_error.c).
const (
	ieBlockSize     = 7   // "block size too large (maximum = 1048576 bytes)": the client's own MAX_BLOCKSIZE
	ieTotalRate     = 27  // "total required bandwidth is larger than server limit"
	ieInitTest      = 101 // "test initialization failed: <strerror(errno)>"
	ieRecvParams    = 114 // "unable to receive parameters from client: <strerror(errno)>"
	ieProtocol      = 131 // "protocol does not exist"
	ieSetCongestion = 134 // "unable to set TCP_CONGESTION: Supplied congestion control algorithm not supported on this host"
	ieStreamAccept  = 204 // "unable to accept stream connection: <strerror(errno)>"
	ieRecvResults   = 117
	ieAccessDenied  = 121
	ieNumStreams    = 4
	ieUnimplemented = 13
)

// cookieSize is iperf3's COOKIE_SIZE: 36 characters from
// "abcdefghijklmnopqrstuvwxyz234567" and a NUL (make_cookie).
const cookieSize = 37

// validCookie reports whether b looks like a cookie an iperf3 client made.
// Anything else is not an iperf3 client (a port scan, HTTP, a typo'd port).
func validCookie(b []byte) bool {
	if len(b) != cookieSize || b[cookieSize-1] != 0 {
		return false
	}
	for _, c := range b[:cookieSize-1] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// UDP stream set-up datagrams (iperf.h): the client sends udpConnectMsg (or
// the legacy 123456789) in host byte order, the server answers
// udpConnectReply, also in host order; every iperf3 platform of interest is
// little-endian, and 3.12 clients also take the legacy reply.
const (
	udpConnectMsg   = 0x36373839
	udpConnectReply = 0x39383736
)

// maxJSON bounds a parameter or result message. A real client's parameters
// are a few hundred bytes; results grow with the streams (128 at most) and
// server output.
const maxJSON = 1 << 20

// Params are the test parameters the client sends (send_parameters).
// Absent numbers are zero; flags are present-or-absent.
type Params struct {
	TCP, UDP, SCTP  bool
	Omit            int   // seconds, -O
	Time            int   // seconds, -t (0 when -n or -k ends the test)
	Bytes           int64 // -n
	Blocks          int64 // -k
	MSS             int   // -M
	NoDelay         bool  // -N
	Parallel        int   // -P, at least 1
	Reverse         bool  // -R
	Bidir           bool  // --bidir
	Window          int   // -w, socket buffer bytes
	Len             int   // -l, block or datagram size
	Bandwidth       int64 // -b, bit/s per stream
	FQRate          int64
	Burst           int
	TOS             int
	Title           string
	ExtraData       string
	Congestion      string // -C
	GetServerOutput bool
	UDP64           bool // udp_counters_64bit
	ZeroCopy        bool // -Z (the client's own affair; recorded)
	ClientVersion   string
	JSON            bool // not sent by 3.12; kept for newer clients that say so
}

// errBadParams wraps every reason a parameter message is refused.
var errBadParams = errors.New("bad iperf3 parameters")

// ParseParams reads the client's parameter JSON. It never panics; numbers
// out of range and wrong types are errors that say which key.
func ParseParams(b []byte) (Params, error) {
	var p Params
	obj, err := decodeParamObject(b)
	if err != nil {
		return p, err
	}
	obj.readFlags(&p)
	if err := obj.readNumbers(&p); err != nil {
		return p, err
	}
	if err := obj.readStrings(&p); err != nil {
		return p, err
	}
	if p.Parallel == 0 {
		p.Parallel = 1
	}
	return p, p.check()
}

// paramObject is a parameter message's keys, each value as it came.
type paramObject map[string]json.RawMessage

func decodeParamObject(b []byte) (paramObject, error) {
	var m paramObject
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", errBadParams, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: not a JSON object", errBadParams)
	}
	return m, nil
}

func (m paramObject) has(k string) bool { _, ok := m[k]; return ok }

// num is key k's number in 0..max, 0 when absent.
func (m paramObject) num(k string, max float64) (float64, error) {
	raw, ok := m[k]
	if !ok {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("%w: %q is not a number", errBadParams, k)
	}
	if math.IsNaN(f) || f < 0 || f > max {
		return 0, fmt.Errorf("%w: %q = %v is out of range 0..%v", errBadParams, k, f, max)
	}
	return f, nil
}

// str is key k's string, cut to 256 bytes, "" when absent.
func (m paramObject) str(k string) (string, error) {
	raw, ok := m[k]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %q is not a string", errBadParams, k)
	}
	if len(s) > 256 {
		s = s[:256]
	}
	return s, nil
}

// readFlags sets the present-or-absent flags and the truthy ones.
func (m paramObject) readFlags(p *Params) {
	p.TCP, p.UDP, p.SCTP = m.has("tcp"), m.has("udp"), m.has("sctp")
	p.NoDelay, p.Reverse, p.Bidir = m.has("nodelay"), m.has("reverse"), m.has("bidirectional")
	p.GetServerOutput = truthy(m["get_server_output"])
	p.UDP64 = truthy(m["udp_counters_64bit"])
	p.ZeroCopy = truthy(m["zerocopy"])
	p.JSON = truthy(m["json"])
}

// readNumbers sets the numbers, each within its key's range.
func (m paramObject) readNumbers(p *Params) error {
	const maxInt = math.MaxInt32
	ints := []struct {
		key string
		max float64
		dst *int
	}{
		{"omit", 86400, &p.Omit}, {"time", 86400, &p.Time}, {"MSS", 65535, &p.MSS},
		{"parallel", 128, &p.Parallel}, {"window", maxInt, &p.Window}, {"len", maxInt, &p.Len},
		{"burst", 1000, &p.Burst}, {"TOS", 255, &p.TOS},
	}
	for _, f := range ints {
		v, err := m.num(f.key, f.max)
		if err != nil {
			return err
		}
		*f.dst = int(v)
	}
	i64s := []struct {
		key string
		dst *int64
	}{{"num", &p.Bytes}, {"blockcount", &p.Blocks}, {"bandwidth", &p.Bandwidth}, {"fqrate", &p.FQRate}}
	for _, f := range i64s {
		v, err := m.num(f.key, 1<<62)
		if err != nil {
			return err
		}
		*f.dst = int64(v)
	}
	return nil
}

// readStrings sets the strings.
func (m paramObject) readStrings(p *Params) error {
	var err error
	for _, s := range []struct {
		key string
		dst *string
	}{{"title", &p.Title}, {"extra_data", &p.ExtraData}, {"congestion", &p.Congestion}, {"client_version", &p.ClientVersion}} {
		if *s.dst, err = m.str(s.key); err != nil {
			return err
		}
	}
	return nil
}

// check refuses parameters no test can run with.
func (p Params) check() error {
	switch {
	case p.SCTP:
		return fmt.Errorf("%w: SCTP is not served (use TCP or UDP)", errBadParams)
	case p.TCP == p.UDP:
		return fmt.Errorf("%w: exactly one of \"tcp\" and \"udp\" must be set", errBadParams)
	case p.Reverse && p.Bidir:
		return fmt.Errorf("%w: reverse and bidirectional together", errBadParams)
	case p.UDP && p.Len > 0 && (p.Len < 16 || p.Len > 65507):
		return fmt.Errorf("%w: UDP datagram length %d outside 16..65507", errBadParams, p.Len)
	case p.TCP && p.Len > 16<<20:
		return fmt.Errorf("%w: block length %d over 16 MiB", errBadParams, p.Len)
	case p.Time == 0 && p.Bytes == 0 && p.Blocks == 0:
		return fmt.Errorf("%w: no end condition (time, num or blockcount)", errBadParams)
	}
	return nil
}

// truthy: iperf3 sends some flags as true, others as a number (1).
func truthy(raw json.RawMessage) bool {
	switch s := string(bytes.TrimSpace(raw)); s {
	case "", "false", "0", "null":
		return false
	}
	return true
}

// streamResult is one stream in the result exchange (send_results /
// get_results), from either side.
type streamResult struct {
	ID          int     `json:"id"`
	Bytes       int64   `json:"bytes"`
	Retransmits int64   `json:"retransmits"` // -1: not the sender, or unknown
	Jitter      float64 `json:"jitter"`      // seconds
	Errors      int64   `json:"errors"`      // UDP datagrams lost
	Packets     int64   `json:"packets"`
	StartTime   float64 `json:"start_time"`
	EndTime     float64 `json:"end_time"`
}

// results is a result message. The client requires the cpu_util keys and
// sender_has_retransmits, and every stream key but the times.
type results struct {
	CPUTotal            float64         `json:"cpu_util_total"`
	CPUUser             float64         `json:"cpu_util_user"`
	CPUSystem           float64         `json:"cpu_util_system"`
	SenderHasRetransmit int             `json:"sender_has_retransmits"`
	Congestion          string          `json:"congestion_used,omitempty"`
	Streams             []streamResult  `json:"streams"`
	ServerOutputText    string          `json:"server_output_text,omitempty"`
	ServerOutputJSON    json.RawMessage `json:"server_output_json,omitempty"`
}

// parseResults reads the client's results. Unknown keys are ignored.
// Numbers are read as floats: 3.12 clients write -1 through an unsigned
// format (18446744073709551615) for sender_has_retransmits and retransmits.
func parseResults(b []byte) (results, error) {
	var raw struct {
		SenderHasRetransmit float64 `json:"sender_has_retransmits"`
		Congestion          string  `json:"congestion_used"`
		Streams             []struct {
			ID, Bytes, Retransmits, Jitter, Errors, Packets float64
			StartTime                                       float64 `json:"start_time"`
			EndTime                                         float64 `json:"end_time"`
		} `json:"streams"`
	}
	var r results
	if err := json.Unmarshal(b, &raw); err != nil {
		return r, fmt.Errorf("client results: %w", err)
	}
	if len(raw.Streams) > 1024 {
		return r, fmt.Errorf("client results: %d streams", len(raw.Streams))
	}
	i64 := func(f float64) int64 {
		if f < 0 || f >= 1<<62 || math.IsNaN(f) {
			return -1
		}
		return int64(f)
	}
	r.SenderHasRetransmit = int(i64(raw.SenderHasRetransmit))
	r.Congestion = raw.Congestion
	for _, s := range raw.Streams {
		r.Streams = append(r.Streams, streamResult{ID: int(i64(s.ID)), Bytes: i64(s.Bytes), Retransmits: i64(s.Retransmits),
			Jitter: s.Jitter, Errors: i64(s.Errors), Packets: i64(s.Packets), StartTime: s.StartTime, EndTime: s.EndTime})
	}
	return r, nil
}

// readJSON reads one length-prefixed JSON message of at most maxJSON bytes.
func readJSON(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxJSON {
		return nil, fmt.Errorf("%w: message of %d bytes (over %d)", errBadParams, size, maxJSON)
	}
	// Grown as the bytes come, not made at the announced size: a length
	// with nothing after it costs nothing.
	b, err := io.ReadAll(io.LimitReader(r, int64(size)))
	if err != nil {
		return nil, err
	}
	if len(b) < int(size) {
		return nil, io.ErrUnexpectedEOF
	}
	return b, nil
}

// writeJSON writes v as one length-prefixed message.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(msg, uint32(len(b)))
	copy(msg[4:], b)
	_, err = w.Write(msg)
	return err
}

// serverError is the three-part refusal: state, i_errno, errno.
func serverError(ieCode, errno int) []byte {
	b := make([]byte, 9)
	b[0] = stateByte(stateServerError)
	binary.BigEndian.PutUint32(b[1:], uint32(ieCode))
	binary.BigEndian.PutUint32(b[5:], uint32(errno))
	return b
}

// streamIDs are the ids iperf3 gives streams in creation order
// (iperf_add_stream): 1, then 3, 4, 5, ... — both ends count the same way,
// and the client refuses results with an id it does not know (IESTREAMID).
func streamID(i int) int {
	if i == 0 {
		return 1
	}
	return i + 2
}

// stateByte is a state as the signed char iperf3 writes.
func stateByte(st int) byte { return byte(int8(st)) }
