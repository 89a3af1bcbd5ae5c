//go:build !linux

package stream

import (
	"net"
	"syscall"

	"github.com/pxeperf/pxeperf/internal/sockopt"
)

// bufControl sets the socket buffers before connect.
func bufControl(rcv, snd int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		return sockopt.Control(c, func(fd uintptr) error {
			if rcv > 0 {
				if err := syscall.SetsockoptInt(sockfd(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcv); err != nil {
					return err
				}
			}
			if snd > 0 {
				return syscall.SetsockoptInt(sockfd(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, snd)
			}
			return nil
		})
	}
}

const udpServerRcvbuf = 4 << 20

// growRcvbuf raises c's receive buffer as far as the system allows.
func growRcvbuf(c *net.UDPConn, n int) { _ = c.SetReadBuffer(n) }
