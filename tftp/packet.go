package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TFTP opcodes (RFC 1350, RFC 2347).
const (
	opRRQ   = 1
	opWRQ   = 2
	opDATA  = 3
	opACK   = 4
	opERROR = 5
	opOACK  = 6
)

// TFTP error codes (RFC 1350, RFC 2347).
const (
	errNotDefined    = 0
	errNotFound      = 1
	errAccess        = 2
	errDiskFull      = 3 // "Disk full or allocation exceeded": the image cache is full
	errIllegalOp     = 4
	errUnknownTID    = 5
	errOptionRefused = 8
)

// Block size limits: RFC 2348 allows 8..65464; 512 is RFC 1350's only size.
const (
	defaultBlockSize = 512
	minBlockSize     = 8
	maxBlockSize     = 65464
	// ipUDPTFTPOverhead is what one DATA packet adds to its payload on the
	// wire: 20 (IPv4) + 8 (UDP) + 4 (TFTP header).
	ipUDPTFTPOverhead = 32
)

// maxRequestLen bounds a request packet; RFC 1350 requests fit in 512
// bytes, but option lists (RFC 2347) may be longer.
const maxRequestLen = 1024

var errBadRequest = errors.New("malformed TFTP request")

// option is one name/value pair of a request, name lower-cased.
type option struct{ name, value string }

// request is a parsed RRQ or WRQ.
type request struct {
	op   uint16
	file string
	mode string // lower-cased
	opts []option
}

// opt returns the value of the named option and whether it was present.
func (r *request) opt(name string) (string, bool) {
	for _, o := range r.opts {
		if o.name == name {
			return o.value, true
		}
	}
	return "", false
}

// parseRequest parses an RRQ or WRQ:
//
//	| opcode | filename | 0 | mode | 0 | opt1 | 0 | value1 | 0 | ...
//
// Anything else (another opcode, no NUL after the mode, an empty name) is
// errBadRequest. A trailing option name without a value is ignored, as
// RFC 2347 servers do.
func parseRequest(b []byte) (request, error) {
	if len(b) < 4 {
		return request{}, fmt.Errorf("%w: %d bytes", errBadRequest, len(b))
	}
	if len(b) > maxRequestLen {
		return request{}, fmt.Errorf("%w: %d bytes, over %d", errBadRequest, len(b), maxRequestLen)
	}
	op := binary.BigEndian.Uint16(b)
	if op != opRRQ && op != opWRQ {
		return request{}, fmt.Errorf("%w: opcode %d is not RRQ or WRQ", errBadRequest, op)
	}
	if b[len(b)-1] != 0 {
		return request{}, fmt.Errorf("%w: not NUL-terminated", errBadRequest)
	}
	fields := bytes.Split(b[2:len(b)-1], []byte{0})
	if len(fields) < 2 {
		return request{}, fmt.Errorf("%w: no mode", errBadRequest)
	}
	r := request{op: op, file: string(fields[0]), mode: strings.ToLower(string(fields[1]))}
	if r.file == "" {
		return request{}, fmt.Errorf("%w: empty file name", errBadRequest)
	}
	for i := 2; i+1 < len(fields); i += 2 {
		name := strings.ToLower(string(fields[i]))
		if name == "" {
			continue
		}
		r.opts = append(r.opts, option{name: name, value: string(fields[i+1])})
	}
	return r, nil
}

// isRequest reports whether b carries an RRQ or WRQ opcode.
func isRequest(b []byte) bool {
	return len(b) >= 2 && b[0] == 0 && (b[1] == opRRQ || b[1] == opWRQ)
}

// Window size limits (RFC 7440 allows 1..65535).
const (
	defaultMaxWindow = 64
	// defaultUBootMaxWindow is the windowsize cap for U-Boot clients:
	// U-Boot under virtio-net hangs at 32 and over.
	defaultUBootMaxWindow = 16
	// maxWindow is half the block-number space: an ACK then maps to one
	// block of the window unambiguously, and a stale ACK from before the
	// window cannot pass for a new one.
	maxWindow = 32768
	// maxWindowBytes bounds the blocks one transfer keeps for resending.
	maxWindowBytes = 4 << 20
)

// limits is what the server allows for the options of one request.
type limits struct {
	maxBlock   int           // largest blksize, from the MTU and config
	maxWindow  int           // largest windowsize, from config
	maxTimeout time.Duration // longest timeout option accepted; 0: 255 s
}

// negotiated is what the server agreed to for one read transfer.
type negotiated struct {
	blockSize  int
	windowSize int           // 1: lock-step
	timeout    time.Duration // the client's timeout option; 0 when not asked
	tsize      bool          // the client asked for tsize
	oack       []option      // options to acknowledge; empty: plain RFC 1350, no OACK
	// timeoutRefused is a valid timeout option over lim.maxTimeout, left
	// out of the OACK ("" when none).
	timeoutRefused string
}

// negotiate picks the options of an RRQ the server accepts: blksize (capped
// at lim.maxBlock), windowsize (RFC 7440, capped at lim.maxWindow and so
// that a window holds at most maxWindowBytes), timeout (RFC 2349, 1..255 s,
// taken as asked up to lim.maxTimeout, else left out: RFC 2349 has the
// server echo the value or ignore the option, not lower it) and tsize
// (answered with size). Only options the client
// asked for are acknowledged (EFI clients reject others); unknown or bad
// ones are left out, which RFC 2347 allows. A request with no accepted
// option gets no OACK at all.
func negotiate(r *request, lim limits, size int64) negotiated {
	n := negotiated{blockSize: defaultBlockSize, windowSize: 1}
	seen := map[string]bool{}
	window := 0
	for _, o := range r.opts {
		if seen[o.name] {
			continue
		}
		seen[o.name] = true
		switch o.name {
		case "blksize":
			v, err := strconv.Atoi(o.value)
			if err != nil || v < minBlockSize || v > maxBlockSize {
				continue
			}
			v = min(v, lim.maxBlock)
			n.blockSize = v
			n.oack = append(n.oack, option{"blksize", strconv.Itoa(v)})
		case "windowsize":
			v, err := strconv.Atoi(o.value)
			if err != nil || v < 1 || v > 65535 {
				continue
			}
			// The value depends on the block size, which may come later.
			window = v
			n.oack = append(n.oack, option{"windowsize", ""})
		case "timeout":
			v, err := strconv.Atoi(o.value)
			if err != nil || v < 1 || v > 255 {
				continue
			}
			if lim.maxTimeout > 0 && time.Duration(v)*time.Second > lim.maxTimeout {
				n.timeoutRefused = o.value
				continue
			}
			n.timeout = time.Duration(v) * time.Second
			n.oack = append(n.oack, option{"timeout", strconv.Itoa(v)})
		case "tsize":
			if size < 0 {
				continue
			}
			n.tsize = true
			n.oack = append(n.oack, option{"tsize", strconv.FormatInt(size, 10)})
		}
	}
	if window > 0 {
		n.windowSize = max(1, min(window, lim.maxWindow, maxWindow, maxWindowBytes/n.blockSize))
		for i := range n.oack {
			if n.oack[i].name == "windowsize" {
				n.oack[i].value = strconv.Itoa(n.windowSize)
			}
		}
	}
	return n
}

// appendOACK appends an OACK packet.
func appendOACK(b []byte, opts []option) []byte {
	b = binary.BigEndian.AppendUint16(b, opOACK)
	for _, o := range opts {
		b = append(b, o.name...)
		b = append(b, 0)
		b = append(b, o.value...)
		b = append(b, 0)
	}
	return b
}

// appendError appends an ERROR packet.
func appendError(b []byte, code uint16, msg string) []byte {
	b = binary.BigEndian.AppendUint16(b, opERROR)
	b = binary.BigEndian.AppendUint16(b, code)
	b = append(b, msg...)
	return append(b, 0)
}

// reply is a packet a client sends during a read transfer.
type reply struct {
	op    uint16
	block uint16 // ACK
	code  uint16 // ERROR
	msg   string // ERROR
}

// parseReply parses an ACK or ERROR; anything else is an error.
func parseReply(b []byte) (reply, error) {
	if len(b) < 4 {
		return reply{}, fmt.Errorf("short packet: %d bytes", len(b))
	}
	r := reply{op: binary.BigEndian.Uint16(b)}
	switch r.op {
	case opACK:
		r.block = binary.BigEndian.Uint16(b[2:])
	case opERROR:
		r.code = binary.BigEndian.Uint16(b[2:])
		msg := b[4:]
		if i := bytes.IndexByte(msg, 0); i >= 0 {
			msg = msg[:i]
		}
		r.msg = string(msg)
	default:
		return reply{}, fmt.Errorf("unexpected opcode %d during a read transfer", r.op)
	}
	return r, nil
}

// The client's side of the codec (client.go).

// packet is one parsed server packet. Payload aliases the read buffer.
type packet struct {
	op      uint16
	block   uint16            // DATA
	payload []byte            // DATA
	code    uint16            // ERROR
	msg     string            // ERROR
	opts    map[string]string // OACK, names lower-cased
}

// parseServerPacket parses what a server may send a reading client: DATA, ERROR
// or OACK. Anything else is ErrMalformed.
func parseServerPacket(b []byte) (packet, error) {
	if len(b) < 4 {
		return packet{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	p := packet{op: binary.BigEndian.Uint16(b)}
	switch p.op {
	case opDATA:
		p.block = binary.BigEndian.Uint16(b[2:])
		p.payload = b[4:]
	case opERROR:
		p.code = binary.BigEndian.Uint16(b[2:])
		msg := b[4:]
		if i := bytes.IndexByte(msg, 0); i >= 0 {
			msg = msg[:i]
		}
		p.msg = strings.ToValidUTF8(string(msg), "?")
	case opOACK:
		fields := bytes.Split(b[2:], []byte{0})
		// NUL-terminated fields: the split leaves one empty tail.
		if len(fields) < 3 || len(fields[len(fields)-1]) != 0 || (len(fields)-1)%2 != 0 {
			return packet{}, fmt.Errorf("%w: OACK options are not NUL-terminated name/value pairs", ErrMalformed)
		}
		p.opts = make(map[string]string, (len(fields)-1)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			name := strings.ToLower(string(fields[i]))
			if name == "" {
				return packet{}, fmt.Errorf("%w: OACK with an empty option name", ErrMalformed)
			}
			p.opts[name] = string(fields[i+1])
		}
	default:
		return packet{}, fmt.Errorf("%w: opcode %d", ErrMalformed, p.op)
	}
	return p, nil
}

// appendRRQ builds a read request for file in octet mode with the options
// in order (name, value, name, value...).
func appendRRQ(b []byte, file string, opts ...string) []byte {
	b = binary.BigEndian.AppendUint16(b, opRRQ)
	b = append(append(b, file...), 0)
	b = append(b, "octet"...)
	b = append(b, 0)
	for _, o := range opts {
		b = append(append(b, o...), 0)
	}
	return b
}

func appendACK(b []byte, block uint16) []byte {
	b = binary.BigEndian.AppendUint16(b, opACK)
	return binary.BigEndian.AppendUint16(b, block)
}
