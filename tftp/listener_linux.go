//go:build linux

package tftp

import (
	"net/netip"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// sendRefusal sends a refusal's ERROR packet without ever waiting; an
// error means the kernel did not take it.
//
// A reply to an on-link address that answers no ARP waits in the kernel's
// neighbour queue (3 s by default) charged to the socket that sent it, so a
// flood of forged requests fills a shared socket's buffer: sent from the
// listener, every later reply, a real board's too, waited behind them
// (~90 a second drained; 89,839 goroutines and a board unanswered for over
// 10 s). So in the default mode each ERROR leaves from a socket of its own,
// opened and closed around one send, as a transfer's first reply does (a
// new TID, RFC 1350; in.tftpd and atftpd answer refusals so too). In
// single-port mode replies must come from the listening port: the send
// there never waits, and one the socket will not take is dropped.
func (s *Server) sendRefusal(b []byte, peer netip.AddrPort, local netip.Addr) error {
	to := &unix.SockaddrInet4{Addr: peer.Addr().As4(), Port: int(peer.Port())}
	var serr error
	if s.cfg.SinglePort {
		var oob []byte
		if local.IsValid() {
			oob = (&ipv4.ControlMessage{Src: local.AsSlice()}).Marshal()
		}
		rc, err := s.conn.SyscallConn()
		if err == nil {
			err = rc.Control(func(fd uintptr) {
				_, serr = unix.SendmsgN(int(fd), b, oob, to, unix.MSG_DONTWAIT)
			})
		}
		if err != nil {
			return err
		}
		return serr
	}
	err := s.openIn(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if local.IsValid() {
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: local.As4()}); err != nil {
				return err
			}
		}
		serr = unix.Sendto(fd, b, unix.MSG_DONTWAIT, to)
		return nil
	})
	if err != nil {
		return err
	}
	return serr
}

// listenerRcvbuf is the listening socket's receive buffer: 30,000 forged
// RRQs in 3 s overflowed the default 208 KiB 267 times while the process
// was busy, and a real board's RRQ lost there waits for its client's
// resend (seconds). 4 MiB holds about half a second of such a flood.
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
