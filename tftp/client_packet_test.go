package tftp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseServerPacket(t *testing.T) {
	tests := map[string]struct {
		in   []byte
		want packet
		bad  bool
	}{
		"data":               {in: []byte{0, 3, 0xff, 0xfe, 'a', 'b'}, want: packet{op: opDATA, block: 65534, payload: []byte("ab")}},
		"empty data":         {in: []byte{0, 3, 0, 7}, want: packet{op: opDATA, block: 7, payload: []byte{}}},
		"error":              {in: append([]byte{0, 5, 0, 1}, "File not found\x00"...), want: packet{op: opERROR, code: 1, msg: "File not found"}},
		"error without nul":  {in: append([]byte{0, 5, 0, 2}, "denied"...), want: packet{op: opERROR, code: 2, msg: "denied"}},
		"error bad utf8":     {in: []byte{0, 5, 0, 0, 0xff, 0}, want: packet{op: opERROR, msg: "?"}},
		"oack":               {in: append([]byte{0, 6}, "BLKSIZE\x001468\x00tsize\x00100\x00"...), want: packet{op: opOACK, opts: map[string]string{"blksize": "1468", "tsize": "100"}}},
		"oack unterminated":  {in: append([]byte{0, 6}, "blksize\x001468"...), bad: true},
		"oack odd fields":    {in: append([]byte{0, 6}, "blksize\x00"...), bad: true},
		"oack empty name":    {in: append([]byte{0, 6}, "\x001\x00"...), bad: true},
		"short":              {in: []byte{0, 3, 1}, bad: true},
		"ack is not for us":  {in: []byte{0, 4, 0, 1}, bad: true},
		"rrq is not for us":  {in: appendRRQ(nil, "f"), bad: true},
		"unknown opcode":     {in: []byte{0, 9, 0, 0}, bad: true},
		"oack no option":     {in: []byte{0, 6, 0, 0}, bad: true},
		"oack value missing": {in: append([]byte{0, 6}, "a\x00b\x00c\x00"...), bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseServerPacket(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrMalformed) {
					t.Errorf("err %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(packet{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTakeOptions(t *testing.T) {
	tests := map[string]struct {
		opts map[string]string
		ask  ClientOptions
		want ClientStats
		bad  bool
	}{
		"all":               {opts: map[string]string{"blksize": "1468", "windowsize": "16", "tsize": "9"}, ask: ClientOptions{BlkSize: 1468, WindowSize: 16}, want: ClientStats{OACK: true, BlkSize: 1468, WindowSize: 16, TSize: 9}},
		"lowered":           {opts: map[string]string{"blksize": "1024", "windowsize": "8"}, ask: ClientOptions{BlkSize: 1468, WindowSize: 16}, want: ClientStats{OACK: true, BlkSize: 1024, WindowSize: 8, TSize: -1}},
		"raised blksize":    {opts: map[string]string{"blksize": "2000"}, ask: ClientOptions{BlkSize: 1468}, bad: true},
		"raised window":     {opts: map[string]string{"windowsize": "32"}, ask: ClientOptions{WindowSize: 16}, bad: true},
		"not asked":         {opts: map[string]string{"blksize": "512"}, bad: true},
		"unknown option":    {opts: map[string]string{"multicast": "1"}, bad: true},
		"negative tsize":    {opts: map[string]string{"tsize": "-1"}, bad: true},
		"blksize not a num": {opts: map[string]string{"blksize": "x"}, ask: ClientOptions{BlkSize: 512}, bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := ClientStats{BlkSize: 512, WindowSize: 1, TSize: -1}
			err := (&fetch{st: &st}).takeOptions(tc.opts, tc.ask)
			if (err != nil) != tc.bad {
				t.Fatalf("err %v, want bad %v", err, tc.bad)
			}
			if !tc.bad {
				if diff := cmp.Diff(tc.want, st); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

// FuzzParsePacket: whatever arrives, parsing neither panics nor returns a
// payload outside the packet, and what parses keeps its opcode and block.
func FuzzParseServerPacket(f *testing.F) {
	f.Add([]byte{0, 3, 0, 1, 'x'})
	f.Add(append([]byte{0, 6}, "blksize\x001468\x00windowsize\x0016\x00tsize\x0012\x00"...))
	f.Add(append([]byte{0, 5, 0, 1}, "nope\x00"...))
	f.Add([]byte{0, 6, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseServerPacket(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if int(p.op) != int(b[0])<<8|int(b[1]) {
			t.Fatalf("opcode %d from %x", p.op, b[:2])
		}
		switch p.op {
		case opDATA:
			if !bytes.Equal(p.payload, b[4:]) || int(p.block) != int(b[2])<<8|int(b[3]) {
				t.Fatalf("data block %d payload %x from %x", p.block, p.payload, b)
			}
		case opOACK:
			if len(p.opts) == 0 {
				t.Fatal("an OACK without options parsed")
			}
			st := ClientStats{}
			_ = (&fetch{st: &st}).takeOptions(p.opts, ClientOptions{BlkSize: 1468, WindowSize: 64})
			if st.BlkSize < 0 || st.BlkSize > 1468 || st.WindowSize < 0 || st.WindowSize > 64 {
				t.Fatalf("options taken beyond what was asked: %+v", st)
			}
		}
	})
}

func TestClientOptionsValidate(t *testing.T) {
	tests := map[string]struct {
		opt  ClientOptions
		fail bool
	}{
		"defaults":         {},
		"rfc limits":       {opt: ClientOptions{BlkSize: 8, WindowSize: 65535}},
		"blksize too big":  {opt: ClientOptions{BlkSize: 65465}, fail: true},
		"blksize too low":  {opt: ClientOptions{BlkSize: 7}, fail: true},
		"window too big":   {opt: ClientOptions{WindowSize: 65536}, fail: true},
		"negative timeout": {opt: ClientOptions{Timeout: -1}, fail: true},
	}
	for name, tc := range tests {
		if err := tc.opt.validate(); (err != nil) != tc.fail {
			t.Errorf("%s: err %v, want fail %v", name, err, tc.fail)
		}
	}
}
