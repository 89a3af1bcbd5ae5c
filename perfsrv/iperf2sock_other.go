//go:build !linux

package perfsrv

import "net/netip"

// sendNoWait sends b to to on the shared UDP socket (Linux sends without
// waiting; serving is for Linux).
func (s *Iperf2) sendNoWait(b []byte, to netip.AddrPort) {
	_, _ = s.udp.WriteToUDPAddrPort(b, to)
}
