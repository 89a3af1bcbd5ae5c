//go:build linux

package perfsrv

import (
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"
)

// sendNoWait sends b to to on the shared UDP socket without waiting: the
// socket's reader calls it, and a reply to an address whose ARP nobody
// answers sits in the neighbour queue holding send buffer, which would
// stall the reader for every client. What the kernel will not take now is
// dropped and counted.
func (s *Iperf2) sendNoWait(b []byte, to netip.AddrPort) {
	rc, err := s.udp.SyscallConn()
	if err != nil {
		return
	}
	var serr error
	_ = rc.Write(func(fd uintptr) bool {
		var sa unix.Sockaddr
		if dom, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN); err == nil && dom == unix.AF_INET6 {
			sa = &unix.SockaddrInet6{Port: int(to.Port()), Addr: to.Addr().As16()}
		} else {
			sa = &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().Unmap().As4()}
		}
		serr = unix.Sendto(int(fd), b, unix.MSG_DONTWAIT, sa)
		return true // never wait for room
	})
	switch {
	case serr == nil:
	case errors.Is(serr, unix.EAGAIN) || errors.Is(serr, unix.ENOBUFS):
		s.refuse.Refuse("iperf2: UDP reply dropped (send buffer full)", to.Addr().Unmap().String())
	default: // no route to a forged source, an ICMP error queued on the socket
		s.refuse.Refuse("iperf2: UDP reply failed", to.Addr().Unmap().String(), "err", serr)
	}
}
