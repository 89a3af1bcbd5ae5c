//go:build linux

package tftp

import (
	"context"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendRefusal sends a refusal's ERROR packet from a socket of its own,
// opened and closed around one send that never waits; an error means the
// kernel did not take it.
//
// A reply to an on-link address that answers no ARP waits in the kernel's
// neighbour queue (3 s by default) charged to the socket that sent it, so a
// flood of forged requests fills a shared socket's buffer: sent from the
// listener, every later reply, a real board's too, waited behind them
// (tftp/DESIGN.md#a-hostile-lab-network-round-two-issue-27). In the
// default mode the ERROR comes from a new port, as a
// transfer's first reply does (a new TID, RFC 1350; in.tftpd and atftpd
// answer refusals so too); in single-port mode from the listening port, on
// a socket connected to the client like a transfer's, which hands on what
// it took in before its connect (passOn).
func (s *Server) sendRefusal(base context.Context, b []byte, peer netip.AddrPort, local netip.Addr) error {
	to := &unix.SockaddrInet4{Addr: peer.Addr().As4(), Port: int(peer.Port())}
	var serr error
	err := s.openIn(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		la := &unix.SockaddrInet4{}
		if local.IsValid() {
			la.Addr = local.As4()
		}
		if s.cfg.SinglePort {
			la.Port = int(s.Addr().Port())
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
				return err
			}
		}
		if s.cfg.SinglePort || local.IsValid() {
			if err := unix.Bind(fd, la); err != nil {
				return err
			}
		}
		if !s.cfg.SinglePort {
			serr = unix.Sendto(fd, b, unix.MSG_DONTWAIT, to)
			return nil
		}
		if err := unix.Connect(fd, to); err != nil {
			return err
		}
		s.passOn(base, fd, local)
		serr = unix.Sendto(fd, b, unix.MSG_DONTWAIT, to)
		// The client's next request may come at once: what reached the
		// socket before it closes is the listener's.
		s.passOn(base, fd, local)
		return nil
	})
	if err != nil {
		return err
	}
	return serr
}

// listenerRcvbuf is the listening socket's receive buffer: a flood of
// forged RRQs overflowed the default while the process was busy, and a
// real board's RRQ lost there waits for its client's resend (seconds)
// (tftp/DESIGN.md#a-hostile-lab-network-round-two-issue-27).
const listenerRcvbuf = 4 << 20

// growRcvbuf sets the listening socket's receive buffer to
// listenerRcvbuf, past net.core.rmem_max when the process may
// (CAP_NET_ADMIN), else as far as it allows: best effort.
func growRcvbuf(rc syscall.RawConn) {
	_ = rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, listenerRcvbuf) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, listenerRcvbuf)
		}
	})
}
