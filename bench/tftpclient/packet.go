package tftpclient

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TFTP opcodes (RFC 1350, RFC 2347).
const (
	opRRQ   = 1
	opDATA  = 3
	opACK   = 4
	opERROR = 5
	opOACK  = 6
)

// errUnknownTID is RFC 1350's error code for a packet from a stranger.
const errUnknownTID = 5

// ErrMalformed marks a packet that is not a TFTP packet a reading client
// can take (too short, unknown opcode, option list not NUL-terminated).
var ErrMalformed = errors.New("malformed TFTP packet")

// packet is one parsed server packet. Payload aliases the read buffer.
type packet struct {
	op      uint16
	block   uint16            // DATA
	payload []byte            // DATA
	code    uint16            // ERROR
	msg     string            // ERROR
	opts    map[string]string // OACK, names lower-cased
}

// parsePacket parses what a server may send a reading client: DATA, ERROR
// or OACK. Anything else is ErrMalformed.
func parsePacket(b []byte) (packet, error) {
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

func appendError(b []byte, code uint16, msg string) []byte {
	b = binary.BigEndian.AppendUint16(b, opERROR)
	b = binary.BigEndian.AppendUint16(b, code)
	return append(append(b, msg...), 0)
}

// optInt reads a numeric option value of the OACK within lo..hi.
func optInt(opts map[string]string, name string, lo, hi int64) (int64, bool, error) {
	v, ok := opts[name]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, true, fmt.Errorf("%w: OACK %s=%q is not a number in %d..%d", ErrMalformed, name, v, lo, hi)
	}
	return n, true, nil
}
