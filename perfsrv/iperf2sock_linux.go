//go:build linux

package perfsrv

import (
	"errors"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/sockopt"
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

// Classic BPF's ancillary load of a random number (linux/filter.h:
// SKF_AD_OFF + SKF_AD_RANDOM).
const skfAdRandom = 0xfffff000 + 56

// dropSmallDatagrams attaches a socket filter to the shared UDP socket
// that drops, in the kernel, datagrams shorter than minLen past a flow's
// first ones (sequence number above maxFirstSeq, FINs included), but one
// in smallSample. A flow of such datagrams is refused at its first
// datagrams (udprule.go: those still come through, so the refusal names
// the rule), yet its client sends on at its -b (iperf 2 has no control
// channel), and reading each one costs the server more than the test is
// worth (see perfsrv/DESIGN.md#iperf-2-udp-packet-budget). The filter sees
// the UDP header (8 bytes) before the datagram.
func dropSmallDatagrams(c *net.UDPConn, minLen int) error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_LEN},
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: 5, K: uint32(8 + minLen)},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 8}, // the datagram's sequence number
		{Code: unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, Jf: 3, K: maxFirstSeq},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdRandom},
		{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: smallSample - 1},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return sockopt.Control(rc, func(fd uintptr) error {
		return unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
			&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
	})
}
