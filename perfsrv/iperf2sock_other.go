//go:build !linux

package perfsrv

import (
	"net"
	"net/netip"
)

// sendNoWait sends b to to on the shared UDP socket (Linux sends without
// waiting; serving is for Linux).
func (s *Iperf2) sendNoWait(b []byte, to netip.AddrPort) {
	_, _ = s.udp.WriteToUDPAddrPort(b, to)
}

// dropSmallDatagrams is Linux's socket filter; elsewhere short datagrams
// are read and refused one by one.
func dropSmallDatagrams(*net.UDPConn, int) error { return nil }
