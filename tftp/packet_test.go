package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rq builds a request packet from op, file, mode and option pairs.
func rq(op uint16, fields ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, op)
	for _, f := range fields {
		b = append(b, f...)
		b = append(b, 0)
	}
	return b
}

func TestParseRequest(t *testing.T) {
	tests := map[string]struct {
		in      []byte
		want    request
		wantErr bool
	}{
		"plain RRQ": {
			in:   rq(opRRQ, "pxelinux.0", "octet"),
			want: request{op: opRRQ, file: "pxelinux.0", mode: "octet"},
		},
		"mode and option names are case-insensitive": {
			in: rq(opRRQ, "a", "OCTET", "BLKSIZE", "1468", "TSize", "0"),
			want: request{op: opRRQ, file: "a", mode: "octet",
				opts: []option{{"blksize", "1468"}, {"tsize", "0"}}},
		},
		"WRQ": {
			in:   rq(opWRQ, "up", "netascii"),
			want: request{op: opWRQ, file: "up", mode: "netascii"},
		},
		"trailing option name without value is ignored": {
			in:   rq(opRRQ, "a", "octet", "blksize"),
			want: request{op: opRRQ, file: "a", mode: "octet"},
		},
		"file name keeps slashes and dots for the store to judge": {
			in:   rq(opRRQ, "../etc/passwd", "octet"),
			want: request{op: opRRQ, file: "../etc/passwd", mode: "octet"},
		},
		"empty option name skipped": {
			in:   rq(opRRQ, "a", "octet", "", "x", "tsize", "0"),
			want: request{op: opRRQ, file: "a", mode: "octet", opts: []option{{"tsize", "0"}}},
		},
		"too short":          {in: []byte{0, 1, 0}, wantErr: true},
		"DATA is no request": {in: []byte{0, 3, 0, 1, 'x'}, wantErr: true},
		"ACK is no request":  {in: []byte{0, 4, 0, 1}, wantErr: true},
		"no mode":            {in: rq(opRRQ, "file"), wantErr: true},
		"not NUL-terminated": {in: append(rq(opRRQ, "file"), "octet"...), wantErr: true},
		"empty file name":    {in: rq(opRRQ, "", "octet"), wantErr: true},
		"oversized":          {in: rq(opRRQ, string(bytes.Repeat([]byte("a"), 2000)), "octet"), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseRequest(tc.in)
			if tc.wantErr {
				if !errors.Is(err, errBadRequest) {
					t.Fatalf("parseRequest = %+v, %v; want errBadRequest", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(request{}, option{})); diff != "" {
				t.Errorf("parseRequest (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNegotiate(t *testing.T) {
	tests := map[string]struct {
		opts   []option
		maxBlk int
		size   int64
		want   negotiated
	}{
		"no options: plain RFC 1350, no OACK": {
			maxBlk: 1468, size: 10,
			want: negotiated{blockSize: 512},
		},
		"unknown options only: no OACK": {
			opts:   []option{{"timeout", "5"}, {"windowsize", "16"}, {"foo", "bar"}},
			maxBlk: 1468, size: 10,
			want: negotiated{blockSize: 512},
		},
		"blksize capped by MTU limit, tsize answered": {
			opts:   []option{{"blksize", "65464"}, {"tsize", "0"}},
			maxBlk: 1468, size: 123456,
			want: negotiated{blockSize: 1468, tsize: true,
				oack: []option{{"blksize", "1468"}, {"tsize", "123456"}}},
		},
		"smaller blksize kept": {
			opts:   []option{{"blksize", "1024"}},
			maxBlk: 1468, size: 1,
			want: negotiated{blockSize: 1024, oack: []option{{"blksize", "1024"}}},
		},
		"blksize under 8 ignored": {
			opts:   []option{{"blksize", "7"}},
			maxBlk: 1468,
			want:   negotiated{blockSize: 512},
		},
		"blksize not a number ignored": {
			opts:   []option{{"blksize", "big"}, {"tsize", "0"}},
			maxBlk: 1468, size: 0,
			want: negotiated{blockSize: 512, tsize: true, oack: []option{{"tsize", "0"}}},
		},
		"repeated option: first wins": {
			opts:   []option{{"blksize", "800"}, {"blksize", "900"}},
			maxBlk: 1468,
			want:   negotiated{blockSize: 800, oack: []option{{"blksize", "800"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := request{op: opRRQ, file: "f", mode: "octet", opts: tc.opts}
			got := negotiate(&r, tc.maxBlk, tc.size)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(negotiated{}, option{})); diff != "" {
				t.Errorf("negotiate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBlockLimit(t *testing.T) {
	tests := map[string]struct{ mtu, limit, want int }{
		"ethernet":          {1500, 0, 1468},
		"unknown MTU":       {0, 0, 1468},
		"jumbo":             {9000, 0, 8968},
		"loopback":          {65536, 0, 65464},
		"config cap":        {1500, 1024, 1024},
		"cap above MTU":     {1500, 8192, 1468},
		"tiny cap honoured": {1500, 256, 256},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := blockLimit(tc.mtu, tc.limit); got != tc.want {
				t.Errorf("blockLimit(%d, %d) = %d, want %d", tc.mtu, tc.limit, got, tc.want)
			}
		})
	}
}

func TestParseReply(t *testing.T) {
	tests := map[string]struct {
		in      []byte
		want    reply
		wantErr bool
	}{
		"ack":                 {in: []byte{0, 4, 0x12, 0x34}, want: reply{op: opACK, block: 0x1234}},
		"error":               {in: append([]byte{0, 5, 0, 8}, "no\x00"...), want: reply{op: opERROR, code: 8, msg: "no"}},
		"error without NUL":   {in: append([]byte{0, 5, 0, 0}, "x"...), want: reply{op: opERROR, msg: "x"}},
		"short":               {in: []byte{0, 4, 0}, wantErr: true},
		"data is unexpected":  {in: []byte{0, 3, 0, 1}, wantErr: true},
		"rrq in mid-transfer": {in: rq(opRRQ, "a", "octet"), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseReply(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseReply err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(reply{})); diff != "" {
				t.Errorf("parseReply (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseRequest checks that any datagram parses without a panic, that a
// parsed request is well formed, and that negotiation stays in bounds.
func FuzzParseRequest(f *testing.F) {
	f.Add(rq(opRRQ, "pxelinux.0", "octet"))
	f.Add(rq(opRRQ, "a", "octet", "blksize", "1468", "tsize", "0", "windowsize", "16"))
	f.Add(rq(opWRQ, "a", "netascii"))
	f.Add([]byte{0, 1, 0, 0})
	f.Add([]byte{0, 4, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRequest(b)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error %v does not wrap errBadRequest", err)
			}
			return
		}
		if r.op != opRRQ && r.op != opWRQ || r.file == "" {
			t.Fatalf("accepted a bad request: %+v", r)
		}
		n := negotiate(&r, 1468, 1000)
		if n.blockSize < minBlockSize || n.blockSize > 1468 {
			t.Fatalf("block size %d out of bounds", n.blockSize)
		}
		if len(n.oack) > 2 {
			t.Fatalf("OACK carries %d options", len(n.oack))
		}
		_, _ = parseReply(b)
	})
}
