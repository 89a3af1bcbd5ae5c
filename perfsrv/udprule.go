package perfsrv

import "fmt"

// The UDP packet budget, iperf3's and iperf 2's alike (see
// perfsrv/DESIGN.md#udp-packet-budget-row-6): a
// datagram costs the server about the same CPU whatever its size (a
// system call, the veth's transmit, a checksum), so bits/s alone do not
// bound a UDP test. A test asks at least MinUDPLen bytes a datagram and
// at most MaxPPS datagrams/s, rate / (8 x len) over its streams and
// directions; the UDP tests running at once share MaxPPSTotal (ppsPool).

// udpPacketRule says why a UDP test of rate bits/s per stream (0: no
// bound) in datagrams of size bytes, over streams and dirs, is over the
// budget ("" when within), and the datagrams/s it asks. section names the
// config keys in the message (iperf3, iperf2).
func udpPacketRule(l Limits, section string, rate int64, size int, streams, dirs int64) (pps int64, why string) {
	if size < l.MinUDPLen {
		return 0, fmt.Sprintf("-u -l %d: UDP datagrams of at least %d bytes (%s.min_udp_len)", size, l.MinUDPLen, section)
	}
	if rate <= 0 {
		return 0, fmt.Sprintf("-u -b 0: an unbounded rate; at most %d datagrams/s per test (%s.max_pps)", l.MaxPPS, section)
	}
	pps = rate / (8 * int64(size)) * streams * dirs
	if pps > l.MaxPPS {
		return pps, fmt.Sprintf("-b %d / (8 x -l %d) x %d streams x %d directions = %d datagrams/s: at most %d per test (%s.max_pps)",
			rate, size, streams, dirs, pps, l.MaxPPS, section)
	}
	return pps, ""
}

// ppsPool is the datagrams/s the running UDP tests were admitted with,
// within a total; the caller's lock guards it.
type ppsPool struct{ used int64 }

// take admits n more unless that makes more than max (false).
func (p *ppsPool) take(n, max int64) bool {
	if p.used+n > max {
		return false
	}
	p.used += n
	return true
}

func (p *ppsPool) give(n int64) { p.used -= n }
