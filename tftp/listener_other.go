//go:build !linux

package tftp

import (
	"context"
	"net"
	"net/netip"
	"syscall"
)

// sendRefusal sends a refusal's ERROR from a socket of its own, as on
// Linux (listener_linux.go: a shared socket's buffer fills with replies to
// forged addresses that answer no ARP). Single-port mode is Linux only.
func (s *Server) sendRefusal(_ context.Context, b []byte, peer netip.AddrPort, local netip.Addr) error {
	var la *net.UDPAddr
	if local.IsValid() {
		la = &net.UDPAddr{IP: local.AsSlice()}
	}
	var c *net.UDPConn
	if err := s.openIn(func() (err error) {
		c, err = net.DialUDP("udp4", la, net.UDPAddrFromAddrPort(peer))
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_, err := c.Write(b)
	return err
}

// growRcvbuf is Linux only (SO_RCVBUFFORCE; listener_linux.go).
func growRcvbuf(syscall.RawConn) {}
