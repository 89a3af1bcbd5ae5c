//go:build linux

package perfsrv

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/sockopt"
)

// setCongestion sets TCP_CONGESTION (iperf3 -C); an unknown algorithm is
// the client's choice to make, so failures are only logged by the caller.
func setCongestion(c net.Conn, algo string) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	return sockopt.Control(rc, func(fd uintptr) error {
		return unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, algo)
	})
}

// congestion names the socket's algorithm, "" when unknown.
func congestion(c net.Conn) string {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return ""
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return ""
	}
	var s string
	_ = rc.Control(func(fd uintptr) {
		s, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	return s
}

// reuseAddr lets the per-stream UDP sockets share the listening port: Linux
// hands a connected socket its peer's datagrams before the unconnected one.
func reuseAddr(network, address string, c syscall.RawConn) error {
	return sockopt.ReuseAddr(network, address, c)
}
