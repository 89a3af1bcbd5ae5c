package stream

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

type arrival struct {
	seq           uint64
	sent, arrived time.Duration
}

// ms is a handy time unit for the tables.
const ms = time.Millisecond

// rfc3550 is the reference jitter: J += (|D| - J)/16 over arrivals in
// order, D the difference of consecutive transit times, in ms.
func rfc3550(as []arrival) float64 {
	var j float64
	for i := 1; i < len(as); i++ {
		d := float64((as[i].arrived-as[i].sent)-(as[i-1].arrived-as[i-1].sent)) / 1e6
		j += (math.Abs(d) - j) / 16
	}
	return j
}

func TestUDPRecv(t *testing.T) {
	// steady: every 1 ms, constant 5 ms transit.
	steady := func(n int) []arrival {
		var as []arrival
		for i := range n {
			as = append(as, arrival{uint64(i), time.Duration(i) * ms, time.Duration(i)*ms + 5*ms})
		}
		return as
	}
	for name, tc := range map[string]struct {
		in       []arrival
		sent     int64
		want     Stats
		jitterOf []arrival // arrivals the jitter is computed over (nil: in)
	}{
		"in order": {in: steady(10), sent: 10, want: Stats{Packets: 10, Bytes: 1000}},
		"gap": {in: []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}, {4, 4 * ms, 9 * ms}, {5, 5 * ms, 10 * ms}}, sent: 6,
			want: Stats{Packets: 4, Bytes: 400, Lost: 2, LostPercent: 100 * 2.0 / 6}},
		"tail loss counts once the sender's count is known": {in: steady(8), sent: 10,
			want: Stats{Packets: 8, Bytes: 800, Lost: 2, LostPercent: 20}},
		"tail loss unknown without the sender's count": {in: steady(8), sent: 0, want: Stats{Packets: 8, Bytes: 800}},
		"reordered: late one is out of order, not lost": {
			in:   []arrival{{0, 0, 5 * ms}, {2, 2 * ms, 7 * ms}, {1, ms, 8 * ms}, {3, 3 * ms, 8 * ms}},
			sent: 4, want: Stats{Packets: 4, Bytes: 400, OutOfOrder: 1}},
		"duplicates are counted and ignored": {
			in:   []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}, {1, ms, 6 * ms}, {2, 2 * ms, 7 * ms}, {0, 0, 8 * ms}},
			sent: 3, want: Stats{Packets: 3, Bytes: 300, Duplicates: 2},
			jitterOf: []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}, {2, 2 * ms, 7 * ms}}},
		"jitter from varying transit": {
			in:   []arrival{{0, 0, 5 * ms}, {1, 10 * ms, 17 * ms}, {2, 20 * ms, 25 * ms}, {3, 30 * ms, 39 * ms}},
			sent: 4, want: Stats{Packets: 4, Bytes: 400}},
		"out of range sequence is dropped": {
			in:   []arrival{{0, 0, 5 * ms}, {1 << 40, ms, 6 * ms}, {1, ms, 6 * ms}},
			sent: 2, want: Stats{Packets: 2, Bytes: 200}, jitterOf: []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}}},
		"nothing arrived": {in: nil, sent: 5, want: Stats{Lost: 5, LostPercent: 100}},
	} {
		t.Run(name, func(t *testing.T) {
			u := newUDPRecv(1000)
			for _, a := range tc.in {
				u.add(a.seq, 100, a.sent, a.arrived)
			}
			got := u.stats(tc.sent)
			jof := tc.jitterOf
			if jof == nil {
				jof = tc.in
			}
			tc.want.JitterMs = rfc3550(jof)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUDPRecvJitterValue pins the formula to a hand-computed value: transits
// 5, 7, 5, 9 ms give D = 2, -2, 4 and J = 0.125, 0.2421875, 0.4770508 ms.
func TestUDPRecvJitterValue(t *testing.T) {
	u := newUDPRecv(10)
	for i, transit := range []time.Duration{5, 7, 5, 9} {
		sent := time.Duration(i) * 10 * ms
		u.add(uint64(i), 1, sent, sent+transit*ms)
	}
	if got, want := u.stats(0).JitterMs, 0.4770507812; math.Abs(got-want) > 1e-9 {
		t.Errorf("jitter %v ms, want %v", got, want)
	}
}

func TestDelta(t *testing.T) {
	prev := Stats{Bytes: 1000, Packets: 10, Lost: 1, Retransmits: 3, OutOfOrder: 1}
	cur := Stats{Bytes: 3500, Packets: 30, Lost: 6, Retransmits: 5, OutOfOrder: 2, SndCwnd: 64000, JitterMs: 0.5, RTT: ms}
	got := delta(prev, cur, time.Second, 2*time.Second)
	want := Stats{Start: time.Second, End: 2 * time.Second, Bytes: 2500, BitsPerSecond: 20000, Packets: 20, Lost: 5,
		LostPercent: 20, Retransmits: 2, OutOfOrder: 1, SndCwnd: 64000, JitterMs: 0.5, RTT: ms}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
}

func TestPacer(t *testing.T) {
	now := time.Unix(0, 0)
	p := newPacer(8_000_000, 1000, 4, now) // 1e6 bytes/s: a packet per ms; depth 10 ms
	if k := p.take(now, 1000, 32); k != 1 {
		t.Errorf("first take: %d packets, want the initial 1", k)
	}
	if w := p.wait(1000); w != ms {
		t.Errorf("wait %v, want 1ms", w)
	}
	// A late wake-up of 3.5 ms owes 3 packets and keeps half a token.
	if k := p.take(now.Add(3500*time.Microsecond), 1000, 32); k != 3 {
		t.Errorf("after 3.5 ms: %d packets, want 3", k)
	}
	// A stall of a second is capped at the 10 ms depth.
	if k := p.take(now.Add(time.Second), 1000, 32); k != 10 {
		t.Errorf("after a stall: %d packets, want 10 (the depth)", k)
	}
	// Over a long run the count matches the rate exactly.
	p = newPacer(100_000_000, 1448, udpBatch, now)
	var sent int
	for t := now; t.Before(now.Add(time.Second)); t = t.Add(1300 * time.Microsecond) {
		sent += p.take(t, 1448, udpBatch)
	}
	if want := 100_000_000 / 8 / 1448; sent < want-udpBatch || sent > want+udpBatch {
		t.Errorf("1 s at 100 Mbit/s in 1.3 ms steps: %d packets, want about %d", sent, want)
	}
}

func TestBatchFor(t *testing.T) {
	for name, tc := range map[string]struct {
		rate int64
		size int
		want int
	}{
		"1 Gbit/s waits for a full batch":    {1e9, 1448, udpBatch},
		"100 Mbit/s waits a millisecond":     {100e6, 1448, 8},
		"10 Mbit/s wakes for every datagram": {10e6, 1448, 1},
		"jumbo datagrams at 1 Gbit/s":        {1e9, 65000, 1},
	} {
		if got := batchFor(tc.rate, tc.size, udpBatch); got != tc.want {
			t.Errorf("%s: batchFor(%d, %d) = %d, want %d", name, tc.rate, tc.size, got, tc.want)
		}
	}
}

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
		u := newUDPRecv(1 << 16)
		u.add(d.seq, len(b), d.sent, 0) // any header is safe to account
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
