//go:build !linux

package stream

import (
	"net"
	"syscall"
)

// bufControl sets the socket buffers before connect.
func bufControl(rcv, snd int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if rcv > 0 {
				serr = syscall.SetsockoptInt(sockfd(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcv)
			}
			if serr == nil && snd > 0 {
				serr = syscall.SetsockoptInt(sockfd(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, snd)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

const udpServerRcvbuf = 4 << 20

// growRcvbuf raises c's receive buffer as far as the system allows.
func growRcvbuf(c *net.UDPConn, n int) { _ = c.SetReadBuffer(n) }
