//go:build linux

package stream

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/sockopt"
)

// bufControl sets SO_RCVBUF and SO_SNDBUF (when non-zero) before a socket
// connects, so the window scale in the SYN matches the buffer.
func bufControl(rcv, snd int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		return sockopt.Control(c, func(fd uintptr) error {
			if rcv > 0 {
				if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcv); err != nil {
					return err
				}
			}
			if snd > 0 {
				return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, snd)
			}
			return nil
		})
	}
}

// udpServerRcvbuf is the receive buffer of the server's shared UDP socket:
// at gigabit rates a tbf burst (or a pacer batch) is hundreds of
// datagrams, and with the kernel's default buffer the socket overflows
// (UdpRcvbufErrors) before the reader drains it, which shows as loss
// iperf3 does not see (see stream/DESIGN.md#udp-receive-buffer).
const udpServerRcvbuf = 4 << 20

// growRcvbuf raises c's SO_RCVBUF to n: SO_RCVBUFFORCE when privileged
// (past net.core.rmem_max), else as far as rmem_max allows.
func growRcvbuf(c *net.UDPConn, n int) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	var serr error
	_ = rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) })
	if serr != nil {
		_ = c.SetReadBuffer(n)
	}
}
