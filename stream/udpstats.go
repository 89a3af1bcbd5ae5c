package stream

import "time"

// maxSeqBits bounds the receiver's duplicate bitmap (16 MiB), whatever
// sequence numbers a peer sends.
const maxSeqBits = 1 << 27

// udpRecv is a UDP receiver's accounting, by sequence numbers and sender
// timestamps, as iperf3 does it:
//
//   - a datagram whose sequence number is below the highest seen so far is
//     out of order; one seen before is a duplicate and otherwise ignored;
//   - lost = expected - received, expected being the highest sequence + 1
//     (or, at the end, the sender's count if larger: tail losses count);
//   - jitter is RFC 3550's interarrival jitter over every datagram in
//     arrival order: D = (Rj - Sj) - (Ri - Si), J += (|D| - J)/16.
//
// Not safe for concurrent use.
type udpRecv struct {
	limit    uint64 // sequence numbers at or above are dropped as bad
	seen     []uint64
	received int64
	bytes    int64
	next     uint64 // highest sequence + 1
	ooo      int64
	dups     int64
	bad      int64
	jitter   float64 // ns
	prev     time.Duration
	havePrev bool
}

func newUDPRecv(limit uint64) *udpRecv {
	return &udpRecv{limit: min(limit, maxSeqBits)}
}

// expectedPackets is the sequence limit for a test: twice what the rate
// allows, plus slack.
func expectedPackets(rate int64, size int, d time.Duration) uint64 {
	n := float64(rate) / 8 / float64(size) * d.Seconds()
	return uint64(2*n) + 1024
}

// add accounts one datagram of size bytes, sent at the sender's clock sent
// and arrived at the receiver's clock arrived. It reports whether the
// datagram was counted (false: duplicate or out of range).
func (u *udpRecv) add(seq uint64, size int, sent, arrived time.Duration) bool {
	if seq >= u.limit {
		u.bad++
		return false
	}
	w, bit := seq/64, uint64(1)<<(seq%64)
	if w >= uint64(len(u.seen)) {
		n := max(2*uint64(len(u.seen)), w+1, 64)
		n = min(n, (u.limit+63)/64)
		s := make([]uint64, n)
		copy(s, u.seen)
		u.seen = s
	}
	if u.seen[w]&bit != 0 {
		u.dups++
		return false
	}
	u.seen[w] |= bit
	u.received++
	u.bytes += int64(size)
	if seq < u.next {
		u.ooo++
	} else {
		u.next = seq + 1
	}
	transit := arrived - sent
	if u.havePrev {
		d := float64(transit - u.prev)
		if d < 0 {
			d = -d
		}
		u.jitter += (d - u.jitter) / 16
	}
	u.prev, u.havePrev = transit, true
	return true
}

// stats is the cumulative view; sent is the sender's datagram count when
// known (0 otherwise).
func (u *udpRecv) stats(sent int64) Stats {
	expected := max(int64(u.next), sent)
	s := Stats{Bytes: u.bytes, Packets: u.received, Lost: expected - u.received, OutOfOrder: u.ooo,
		Duplicates: u.dups, JitterMs: u.jitter / 1e6}
	if expected > 0 {
		s.LostPercent = 100 * float64(s.Lost) / float64(expected)
	}
	return s
}

// delta turns two cumulative snapshots into one interval: counters are
// differences, gauges (cwnd, RTT, jitter) are the later value.
func delta(prev, cur Stats, start, end time.Duration) Stats {
	s := Stats{Start: start, End: end, Bytes: cur.Bytes - prev.Bytes, Retransmits: cur.Retransmits - prev.Retransmits,
		SndCwnd: cur.SndCwnd, RTT: cur.RTT, Packets: cur.Packets - prev.Packets, Lost: cur.Lost - prev.Lost,
		OutOfOrder: cur.OutOfOrder - prev.OutOfOrder, Duplicates: cur.Duplicates - prev.Duplicates, JitterMs: cur.JitterMs}
	s.BitsPerSecond = bps(s.Bytes, end-start)
	if exp := s.Packets + s.Lost; exp > 0 {
		s.LostPercent = 100 * float64(s.Lost) / float64(exp)
	}
	return s
}
