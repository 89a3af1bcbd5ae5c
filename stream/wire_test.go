package stream

import (
	"bytes"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/measure"
)

// ms is a handy time unit for the tables.
const ms = time.Millisecond

func TestDatagramRoundTrip(t *testing.T) {
	b := make([]byte, 100)
	in := datagram{session: 0x0102030405060708, seq: 42, sent: 1234567 * time.Microsecond}
	in.put(b)
	got, err := parseDatagram(b)
	if err != nil || got != in {
		t.Errorf("parse(put(%+v)) = %+v, %v", in, got, err)
	}
	if _, err := parseDatagram(b[:headerLen-1]); err == nil {
		t.Errorf("short datagram parsed")
	}
	b[0] ^= 0xff
	if _, err := parseDatagram(b); err == nil {
		t.Errorf("datagram without magic parsed")
	}
}

func FuzzParseDatagram(f *testing.F) {
	b := make([]byte, headerLen)
	datagram{session: 7, seq: 9, sent: ms}.put(b)
	f.Add(b)
	f.Add([]byte("PXU1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseDatagram(b)
		if err != nil {
			return
		}
		u := measure.NewUDPRecv(0, 1<<16)
		u.Add(d.seq, len(b), -d.sent) // any header is safe to account
		out := make([]byte, headerLen)
		d.put(out)
		if !bytes.Equal(out, b[:headerLen]) {
			t.Errorf("put(parse(%x)) = %x", b[:headerLen], out)
		}
	})
}

// FuzzControl feeds a server-side control parse (hello, then a request
// frame) and a client-side message frame arbitrary bytes.
func FuzzControl(f *testing.F) {
	var ok bytes.Buffer
	ok.WriteString(magic + "C")
	writeFrame(&ok, request{Version: 1, Proto: "udp", Dir: "rx", DurationMs: 1000, IntervalMs: 1000, Rate: 1e6, PacketSize: 1000})
	f.Add(ok.Bytes())
	f.Add([]byte(magic + "D0123456789abcdef"))
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		if kind, _, err := readHello(r); err == nil && kind == kindControl {
			var req request
			if readFrame(r, maxRequest, &req) == nil {
				_ = req.validate()
			}
		}
		var m message
		_ = readFrame(bytes.NewReader(b), maxResult, &m)
	})
}

func TestDirectionText(t *testing.T) {
	for _, d := range []Direction{Tx, Rx} {
		b, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Direction
		if err := got.UnmarshalText(b); err != nil || got != d {
			t.Errorf("round trip of %v: %v, %v", d, got, err)
		}
	}
	if _, err := ParseDirection("up"); err == nil {
		t.Errorf("ParseDirection(up) succeeded")
	}
}
