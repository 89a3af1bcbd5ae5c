package measure

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

type arrival struct {
	seq           uint64
	sent, arrived time.Duration
}

const ms = time.Millisecond

// rfc3550 is the reference jitter of RFC 3550 section 6.4.1 written out
// from the text: D(i,j) = (Rj - Ri) - (Sj - Si), J(i) = J(i-1) +
// (|D(i-1,i)| - J(i-1))/16, over arrivals in order; seconds.
func rfc3550(as []arrival) float64 {
	var j float64
	for i := 1; i < len(as); i++ {
		d := (as[i].arrived - as[i-1].arrived).Seconds() - (as[i].sent - as[i-1].sent).Seconds()
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
		want     Sample
		jitterOf []arrival // arrivals the jitter is computed over (nil: in)
	}{
		"in order": {in: steady(10), sent: 10, want: Sample{Packets: 10, Bytes: 1000}},
		"gap": {in: []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}, {4, 4 * ms, 9 * ms}, {5, 5 * ms, 10 * ms}}, sent: 6,
			want: Sample{Packets: 4, Bytes: 400, Lost: 2}},
		"tail loss counts once the sender's count is known": {in: steady(8), sent: 10,
			want: Sample{Packets: 8, Bytes: 800, Lost: 2}},
		"tail loss unknown without the sender's count": {in: steady(8), sent: 0, want: Sample{Packets: 8, Bytes: 800}},
		"reordered: late one is out of order, not lost": {
			in:   []arrival{{0, 0, 5 * ms}, {2, 2 * ms, 7 * ms}, {1, ms, 8 * ms}, {3, 3 * ms, 8 * ms}},
			sent: 4, want: Sample{Packets: 4, Bytes: 400, OutOfOrder: 1}},
		"duplicates are counted and ignored": {
			in:   []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}, {1, ms, 6 * ms}, {2, 2 * ms, 7 * ms}, {0, 0, 8 * ms}},
			sent: 3, want: Sample{Packets: 3, Bytes: 300, Duplicates: 2},
			jitterOf: []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}, {2, 2 * ms, 7 * ms}}},
		"jitter from varying transit": {
			in:   []arrival{{0, 0, 5 * ms}, {1, 10 * ms, 17 * ms}, {2, 20 * ms, 25 * ms}, {3, 30 * ms, 39 * ms}},
			sent: 4, want: Sample{Packets: 4, Bytes: 400}},
		"out of range sequence is dropped": {
			in:   []arrival{{0, 0, 5 * ms}, {1 << 40, ms, 6 * ms}, {1, ms, 6 * ms}},
			sent: 2, want: Sample{Packets: 2, Bytes: 200}, jitterOf: []arrival{{0, 0, 5 * ms}, {1, ms, 6 * ms}}},
		"nothing arrived": {in: nil, sent: 5, want: Sample{Lost: 5}},
	} {
		t.Run(name, func(t *testing.T) {
			u := NewUDPRecv(0, 1000)
			for _, a := range tc.in {
				u.Add(a.seq, 100, a.arrived-a.sent)
			}
			got := u.Sample(0, tc.sent)
			jof := tc.jitterOf
			if jof == nil {
				jof = tc.in
			}
			tc.want.Jitter = rfc3550(jof)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("sample (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJitterValue pins the formula to a hand-computed value: transits
// 5, 7, 5, 9 ms give D = 2, -2, 4 and J = 0.125, 0.2421875, 0.4770508 ms.
func TestJitterValue(t *testing.T) {
	var j Jitter
	for _, transit := range []time.Duration{5, 7, 5, 9} {
		j.Add(transit * ms)
	}
	if got, want := j.Seconds()*1000, 0.4770507812; math.Abs(got-want) > 1e-9 {
		t.Errorf("jitter %v ms, want %v", got, want)
	}
}

// TestJitterRFC3550: on a constructed sequence (a 1 ms sender clock, a
// receiver clock 3 s off and running 10 ppm fast, transit 2 ms with
// spikes and a sawtooth), Jitter equals RFC 3550's formula computed from
// the arrival and send times, whatever the clocks' offset.
func TestJitterRFC3550(t *testing.T) {
	var as []arrival
	for i := range 2000 {
		sent := time.Duration(i) * ms
		transit := 2*ms + time.Duration(i%7)*100*time.Microsecond
		if i%97 == 0 {
			transit += 15 * ms
		}
		arrived := 3*time.Second + time.Duration(float64(sent+transit)*(1+1e-5))
		as = append(as, arrival{uint64(i), sent, arrived})
	}
	var j Jitter
	u := NewUDPRecv(0, 0)
	for _, a := range as {
		j.Add(a.arrived - a.sent)
		u.Add(a.seq, 1000, a.arrived-a.sent)
	}
	want := rfc3550(as)
	if want < 100e-6 {
		t.Fatalf("reference jitter %v s: the sequence does not vary", want)
	}
	for name, got := range map[string]float64{"Jitter": j.Seconds(), "UDPRecv": u.Jitter()} {
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: %.9f s, RFC 3550 %.9f s", name, got, want)
		}
	}
}

// iperf3Recv is iperf_udp_recv's accounting (iperf3 3.12 src/iperf_udp.c):
// packet_count, cnt_error and outoforder_packets.
type iperf3Recv struct{ packets, lost, ooo int64 }

func (r *iperf3Recv) add(seq int64) {
	if seq >= r.packets+1 {
		if seq > r.packets+1 {
			r.lost += seq - 1 - r.packets
		}
		r.packets = seq
	} else {
		r.ooo++
		if r.lost > 0 {
			r.lost--
		}
	}
}

// TestUDPRecvIperf3: without duplicates, UDPRecv from 1 gives iperf3's
// own figures on random loss and reordering: Highest is packet_count,
// Lost cnt_error, OutOfOrder outoforder_packets.
func TestUDPRecvIperf3(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var seqs []int64
		for s := int64(1); s <= 5000; s++ {
			if rng.IntN(100) < round%10 {
				continue // lost
			}
			seqs = append(seqs, s)
		}
		// Reorder: swap neighbours within a few places.
		for i := range seqs {
			if j := i + rng.IntN(5); rng.IntN(20) == 0 && j < len(seqs) {
				seqs[i], seqs[j] = seqs[j], seqs[i]
			}
		}
		var ref iperf3Recv
		u := NewUDPRecv(1, 0)
		for _, s := range seqs {
			ref.add(s)
			if !u.Add(uint64(s), 100, 0) {
				t.Fatalf("round %d: seq %d not counted", round, s)
			}
		}
		got := iperf3Recv{packets: int64(u.Highest()), lost: u.Lost(0), ooo: u.Sample(0, 0).OutOfOrder}
		if got != ref {
			t.Errorf("round %d: UDPRecv %+v, iperf3 %+v", round, got, ref)
		}
	}
}

// TestUDPRecvWindow: duplicates are told from late datagrams within the
// window; far behind it a datagram counts once, as out of order; a jump
// past the window forgets what it held.
func TestUDPRecvWindow(t *testing.T) {
	u := NewUDPRecv(0, 0)
	for s := range uint64(winBits + 10) {
		if s == 5 || s == 200 {
			continue // lost until late
		}
		u.Add(s, 1, 0)
	}
	if u.Add(100, 1, 0) {
		t.Errorf("duplicate of 100 counted")
	}
	if !u.Add(200, 1, 0) {
		t.Errorf("late 200 (within the window) not counted")
	}
	if u.Add(200, 1, 0) {
		t.Errorf("second 200 counted")
	}
	if !u.Add(5, 1, 0) {
		t.Errorf("late 5 (behind the window) not counted")
	}
	s := u.Sample(0, 0)
	if s.Packets != winBits+10 || s.Lost != 0 || s.OutOfOrder != 2 || s.Duplicates != 2 {
		t.Errorf("after the late ones: %+v", s)
	}
	// A jump of more than the window: the skipped numbers are lost, and
	// the ones the window held before are not taken for duplicates of
	// the new ones.
	next := uint64(winBits + 10)
	far := next + 3*winBits + 7
	u.Add(far, 1, 0)
	if !u.Add(far-1, 1, 0) {
		t.Errorf("late %d after a jump not counted", far-1)
	}
	if got, want := u.Lost(0), int64(far+1-next-2); got != want {
		t.Errorf("lost after a jump %d, want %d", got, want)
	}
	// Word-sized and odd forward gaps clear exactly the skipped bits.
	for _, gap := range []uint64{1, 63, 64, 65, 130, winBits - 1} {
		u := NewUDPRecv(0, 0)
		for s := range uint64(3 * winBits) {
			u.Add(s, 1, 0)
		}
		top := u.Highest()
		u.Add(top+gap+1, 1, 0)
		for s := top + 1; s <= top+gap; s++ {
			if !u.Add(s, 1, 0) {
				t.Fatalf("gap %d: skipped %d taken for a duplicate", gap, s)
			}
		}
		if d := u.Sample(0, 0).Duplicates; d != 0 {
			t.Errorf("gap %d: %d duplicates", gap, d)
		}
	}
}

func TestUDPRecvBad(t *testing.T) {
	u := NewUDPRecv(1, 10)
	for _, s := range []uint64{0, 10, 1 << 63} {
		if u.Add(s, 1, 0) {
			t.Errorf("seq %d counted", s)
		}
	}
	if u.Bad() != 3 || u.Received() != 0 || u.Highest() != 0 {
		t.Errorf("bad %d, received %d, highest %d", u.Bad(), u.Received(), u.Highest())
	}
}

func TestExpectedPackets(t *testing.T) {
	// 8 Mbit/s of 1000-byte datagrams for 2 s: 2000, twice that plus slack.
	if got := ExpectedPackets(8e6, 1000, 2*time.Second); got != 2*2000+1024 {
		t.Errorf("ExpectedPackets = %d", got)
	}
}

func BenchmarkUDPRecvAdd(b *testing.B) {
	u := NewUDPRecv(0, 1<<27)
	var seq uint64
	for b.Loop() {
		// in order, one in 64 swapped with its neighbour
		s := seq
		if seq%64 == 1 {
			s = seq + 1
		} else if seq%64 == 2 {
			s = seq - 1
		}
		u.Add(s%(1<<26), 1448, time.Duration(seq%7)*time.Microsecond)
		seq++
	}
}
