package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
	"time"

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
	lim := limits{maxBlock: 1468, maxWindow: 64, maxTimeout: 10 * time.Second}
	tests := map[string]struct {
		opts []option
		lim  limits // lim when zero
		size int64
		want negotiated
	}{
		"no options: plain RFC 1350, no OACK": {
			size: 10,
			want: negotiated{blockSize: 512, windowSize: 1},
		},
		"unknown and bad options only: no OACK": {
			opts: []option{{"timeout", "0"}, {"windowsize", "0"}, {"foo", "bar"}},
			size: 10,
			want: negotiated{blockSize: 512, windowSize: 1},
		},
		"blksize capped by MTU limit, tsize answered": {
			opts: []option{{"blksize", "65464"}, {"tsize", "0"}},
			size: 123456,
			want: negotiated{blockSize: 1468, windowSize: 1, tsize: true,
				oack: []option{{"blksize", "1468"}, {"tsize", "123456"}}},
		},
		"smaller blksize kept": {
			opts: []option{{"blksize", "1024"}},
			size: 1,
			want: negotiated{blockSize: 1024, windowSize: 1, oack: []option{{"blksize", "1024"}}},
		},
		"blksize under 8 ignored": {
			opts: []option{{"blksize", "7"}},
			want: negotiated{blockSize: 512, windowSize: 1},
		},
		"blksize not a number ignored": {
			opts: []option{{"blksize", "big"}, {"tsize", "0"}},
			want: negotiated{blockSize: 512, windowSize: 1, tsize: true, oack: []option{{"tsize", "0"}}},
		},
		"repeated option: first wins": {
			opts: []option{{"blksize", "800"}, {"blksize", "900"}},
			want: negotiated{blockSize: 800, windowSize: 1, oack: []option{{"blksize", "800"}}},
		},
		"windowsize alone": {
			opts: []option{{"windowsize", "16"}},
			want: negotiated{blockSize: 512, windowSize: 16, oack: []option{{"windowsize", "16"}}},
		},
		"windowsize 1 acknowledged": {
			opts: []option{{"windowsize", "1"}},
			want: negotiated{blockSize: 512, windowSize: 1, oack: []option{{"windowsize", "1"}}},
		},
		"windowsize capped by config, order kept": {
			opts: []option{{"windowsize", "65535"}, {"blksize", "1468"}, {"tsize", "0"}},
			size: 7,
			want: negotiated{blockSize: 1468, windowSize: 64, tsize: true,
				oack: []option{{"windowsize", "64"}, {"blksize", "1468"}, {"tsize", "7"}}},
		},
		"windowsize capped at half the block numbers": {
			opts: []option{{"windowsize", "65535"}, {"blksize", "8"}},
			lim:  limits{maxBlock: 1468, maxWindow: 65535},
			want: negotiated{blockSize: 8, windowSize: 32768,
				oack: []option{{"windowsize", "32768"}, {"blksize", "8"}}},
		},
		"windowsize capped to 4 MiB of blocks": {
			opts: []option{{"blksize", "65464"}, {"windowsize", "1000"}},
			lim:  limits{maxBlock: 65464, maxWindow: 65535},
			want: negotiated{blockSize: 65464, windowSize: 64,
				oack: []option{{"blksize", "65464"}, {"windowsize", "64"}}},
		},
		"windowsize out of range ignored": {
			opts: []option{{"windowsize", "65536"}, {"blksize", "1468"}},
			want: negotiated{blockSize: 1468, windowSize: 1, oack: []option{{"blksize", "1468"}}},
		},
		"timeout taken as asked": {
			opts: []option{{"timeout", "3"}, {"windowsize", "8"}},
			want: negotiated{blockSize: 512, windowSize: 8, timeout: 3 * time.Second,
				oack: []option{{"timeout", "3"}, {"windowsize", "8"}}},
		},
		"timeout over 255 ignored": {
			opts: []option{{"timeout", "256"}},
			want: negotiated{blockSize: 512, windowSize: 1},
		},
		"timeout at the cap taken": {
			opts: []option{{"timeout", "10"}},
			want: negotiated{blockSize: 512, windowSize: 1, timeout: 10 * time.Second, oack: []option{{"timeout", "10"}}},
		},
		"timeout over the cap left out, not lowered (RFC 2349)": {
			opts: []option{{"timeout", "255"}, {"blksize", "1468"}},
			want: negotiated{blockSize: 1468, windowSize: 1, oack: []option{{"blksize", "1468"}}, timeoutRefused: "255"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := request{op: opRRQ, file: "f", mode: "octet", opts: tc.opts}
			l := tc.lim
			if l == (limits{}) {
				l = lim
			}
			got := negotiate(&r, l, tc.size)
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
// parsed request is well formed, and that negotiation stays in bounds and
// acknowledges only options the client sent, with the values agreed.
func FuzzParseRequest(f *testing.F) {
	f.Add(rq(opRRQ, "pxelinux.0", "octet"))
	f.Add(rq(opRRQ, "a", "octet", "blksize", "1468", "tsize", "0", "windowsize", "16"))
	f.Add(rq(opRRQ, "a", "octet", "WindowSize", "65535", "timeout", "255", "blksize", "8"))
	f.Add(rq(opRRQ, "a", "octet", "windowsize", "-1", "windowsize", "4", "timeout", "0"))
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
		for _, lim := range []limits{{1468, 64, 10 * time.Second}, {65464, 65535, 0}, {8, 1, time.Second}} {
			n := negotiate(&r, lim, 1000)
			if n.blockSize != defaultBlockSize && (n.blockSize < minBlockSize || n.blockSize > lim.maxBlock) {
				t.Fatalf("block size %d out of bounds %+v", n.blockSize, lim)
			}
			if n.windowSize < 1 || n.windowSize > lim.maxWindow || n.windowSize > maxWindow ||
				n.windowSize > 1 && n.windowSize*n.blockSize > maxWindowBytes {
				t.Fatalf("window size %d out of bounds %+v (blksize %d)", n.windowSize, lim, n.blockSize)
			}
			if n.timeout != 0 && (n.timeout < time.Second || n.timeout > 255*time.Second ||
				lim.maxTimeout > 0 && n.timeout > lim.maxTimeout) {
				t.Fatalf("timeout %s out of bounds", n.timeout)
			}
			if len(n.oack) > 4 {
				t.Fatalf("OACK carries %d options", len(n.oack))
			}
			agreed := map[string]string{"blksize": strconv.Itoa(n.blockSize), "windowsize": strconv.Itoa(n.windowSize),
				"timeout": strconv.Itoa(int(n.timeout / time.Second)), "tsize": "1000"}
			for _, o := range n.oack {
				if _, asked := r.opt(o.name); !asked {
					t.Fatalf("OACK has %q, which the client did not ask for", o.name)
				}
				if o.value != agreed[o.name] {
					t.Fatalf("OACK %s=%s, but the transfer uses %s", o.name, o.value, agreed[o.name])
				}
			}
		}
		_, _ = parseReply(b)
	})
}
