package measure

import "time"

// Jitter is RFC 3550's interarrival jitter (section 6.4.1, A.8) over
// datagrams in arrival order: with transit = arrival - the sender's
// timestamp, D = transit_j - transit_i of consecutive datagrams and
// J += (|D| - J) / 16. The clocks need not agree: only transit
// differences count. The zero value is ready.
type Jitter struct {
	j    float64 // ns
	prev time.Duration
	have bool
}

// Add accounts one datagram's transit time.
func (j *Jitter) Add(transit time.Duration) {
	if j.have {
		d := float64(transit - j.prev)
		if d < 0 {
			d = -d
		}
		j.j += (d - j.j) / 16
	}
	j.prev, j.have = transit, true
}

// Seconds is the jitter so far.
func (j *Jitter) Seconds() float64 { return j.j / 1e9 }

// winBits is how far behind the highest sequence number a UDPRecv tells a
// duplicate from a late datagram: 64 Ki datagrams (8 KiB a receiver),
// more than any reordering pxeperf has met, whatever sequence numbers a
// peer sends.
const winBits = 1 << 16

// UDPRecv is a UDP receiver's accounting by sequence numbers (the sender
// numbers its datagrams from First up) and sender timestamps:
//
//   - a datagram below the highest sequence number so far is out of
//     order; one seen before is a duplicate and otherwise ignored (within
//     the last 64 Ki sequence numbers; an older one counts as out of
//     order, as iperf does for all);
//   - lost = expected - received, expected running from First to the
//     highest sequence number (or, at the end, to the sender's count when
//     larger: tail losses count), never below 0;
//   - jitter is RFC 3550's over every counted datagram (Jitter).
//
// Without duplicates these are iperf3's figures (iperf_udp_recv:
// packet_count is Highest, cnt_error is Lost). Not safe for concurrent
// use.
type UDPRecv struct {
	first, limit uint64 // sequence numbers outside [first, limit) are bad
	win          [winBits / 64]uint64
	next         uint64 // highest sequence + 1; first until one arrives
	received     int64
	bytes        int64
	ooo, dups    int64
	bad          int64
	jitter       Jitter
}

// NewUDPRecv accounts sequence numbers from first up to, not including,
// limit (0: no limit); others are counted as bad and dropped.
func NewUDPRecv(first, limit uint64) *UDPRecv {
	if limit == 0 {
		limit = ^uint64(0)
	}
	return &UDPRecv{first: first, limit: limit, next: first}
}

// ExpectedPackets is a sequence limit for a test: twice what the rate
// allows, plus slack.
func ExpectedPackets(bitsPerSec int64, size int, d time.Duration) uint64 {
	n := float64(bitsPerSec) / 8 / float64(size) * d.Seconds()
	return uint64(2*n) + 1024
}

// Add accounts one datagram of size bytes with its transit time (arrival
// at the receiver's clock minus the sender's timestamp). It reports
// whether the datagram was counted (false: a duplicate or a bad sequence
// number).
func (u *UDPRecv) Add(seq uint64, size int, transit time.Duration) bool {
	if seq < u.first || seq >= u.limit {
		u.bad++
		return false
	}
	w, bit := &u.win[seq/64%uint64(len(u.win))], uint64(1)<<(seq%64)
	switch {
	case seq == u.next: // in order
		u.next++
	case seq > u.next:
		// Forward: the numbers skipped (and the window's oldest) are clear.
		u.clear(u.next, seq)
		u.next = seq + 1
	case u.next-seq > winBits:
		u.ooo++ // too late to tell a duplicate
		u.count(size, transit)
		return true
	case *w&bit != 0:
		u.dups++
		return false
	default:
		u.ooo++
	}
	*w |= bit
	u.count(size, transit)
	return true
}

// clear marks sequence numbers [a, b) not seen, a word at a time.
func (u *UDPRecv) clear(a, b uint64) {
	if b-a >= winBits {
		u.win = [winBits / 64]uint64{}
		return
	}
	for a < b {
		w := &u.win[a/64%uint64(len(u.win))]
		n := min(64-a%64, b-a) // bits of this word in the range
		*w &^= (^uint64(0) >> (64 - n)) << (a % 64)
		a += n
	}
}

func (u *UDPRecv) count(size int, transit time.Duration) {
	u.received++
	u.bytes += int64(size)
	u.jitter.Add(transit)
}

// Highest is the highest sequence number seen, First - 1 before any.
func (u *UDPRecv) Highest() uint64 { return u.next - 1 }

// Received is how many datagrams were counted (duplicates not).
func (u *UDPRecv) Received() int64 { return u.received }

// OutOfOrder is how many counted datagrams came below the highest
// sequence number.
func (u *UDPRecv) OutOfOrder() int64 { return u.ooo }

// Bad is how many datagrams had a sequence number out of range.
func (u *UDPRecv) Bad() int64 { return u.bad }

// Expected is how many datagrams were due: from First to the highest seen,
// or to the sender's count sent when that is larger (0: unknown).
func (u *UDPRecv) Expected(sent int64) int64 {
	return max(int64(u.next-u.first), sent)
}

// Lost is Expected - Received, never below 0.
func (u *UDPRecv) Lost(sent int64) int64 { return max(u.Expected(sent)-u.received, 0) }

// Jitter is the RFC 3550 jitter so far, seconds.
func (u *UDPRecv) Jitter() float64 { return u.jitter.Seconds() }

// Sample is the cumulative reading at at; sent as for Expected.
func (u *UDPRecv) Sample(at time.Duration, sent int64) Sample {
	return Sample{At: at, Bytes: u.bytes, Packets: u.received, Lost: u.Lost(sent), OutOfOrder: u.ooo,
		Duplicates: u.dups, Jitter: u.jitter.Seconds()}
}
