//go:build linux

package tftp

import (
	"net/netip"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/sockopt"
)

// shareAddr sets SO_REUSEADDR, so a transfer socket can bind the listening
// port too. Linux delivers a datagram to the socket connected to its sender
// before an unconnected one on the same port, so each single-port transfer
// gets its own socket while new requests still reach the listener.
func shareAddr(network, address string, c syscall.RawConn) error {
	return sockopt.ReuseAddr(network, address, c)
}

// recvQueued reads one datagram already queued on fd, without waiting,
// and its sender; from is nil when none is queued (or on any error).
func recvQueued(fd int, buf []byte) (n int, from *netip.AddrPort, err error) {
	n, sa, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
	if err != nil {
		return 0, nil, err
	}
	sa4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return 0, nil, nil
	}
	ap := netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), uint16(sa4.Port))
	return n, &ap, nil
}

// testHookBound, when set (tests), runs between a single-port lock-step
// transfer socket's bind and its connect.
var testHookBound atomic.Pointer[func()]
