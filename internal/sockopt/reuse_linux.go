package sockopt

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ReuseAddr is a net.ListenConfig or net.Dialer Control that sets
// SO_REUSEADDR, so that more sockets may bind the same UDP port: Linux
// hands a datagram to the socket connected to its sender before an
// unconnected one on that port.
func ReuseAddr(_, _ string, c syscall.RawConn) error {
	return Control(c, func(fd uintptr) error {
		return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	})
}
