//go:build !linux

package tftp

import "net"

// forceRcvbuf sets c's receive buffer to n, as far as the system allows
// (SO_RCVBUFFORCE is Linux only).
func forceRcvbuf(c *net.UDPConn, n int) { _ = c.SetReadBuffer(n) }
