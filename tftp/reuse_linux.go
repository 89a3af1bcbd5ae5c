//go:build linux

package tftp

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// shareAddr sets SO_REUSEADDR, so a transfer socket can bind the listening
// port too. Linux delivers a datagram to the socket connected to its sender
// before an unconnected one on the same port, so each single-port transfer
// gets its own socket while new requests still reach the listener.
func shareAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
