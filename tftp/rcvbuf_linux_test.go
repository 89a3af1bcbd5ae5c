//go:build linux

package tftp

import (
	"net"

	"golang.org/x/sys/unix"
)

// forceRcvbuf sets c's receive buffer to n, past net.core.rmem_max when
// root (SO_RCVBUFFORCE).
func forceRcvbuf(c *net.UDPConn, n int) {
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
		})
	}
}
