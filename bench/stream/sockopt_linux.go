//go:build linux

package stream

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpInfo reads the sending side's figures from TCP_INFO: total
// retransmits, cwnd in bytes (snd_cwnd * snd_mss, as iperf3 prints it) and
// the smoothed RTT. ok is false when the socket cannot be read.
func tcpInfo(c net.Conn) (s Stats, ok bool) {
	sc, isSC := c.(syscall.Conn)
	if !isSC {
		return s, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return s, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return s, false
	}
	return Stats{Retransmits: int64(info.Total_retrans), SndCwnd: int64(info.Snd_cwnd) * int64(info.Snd_mss),
		RTT: time.Duration(info.Rtt) * time.Microsecond}, true
}

// bufControl sets SO_RCVBUF and SO_SNDBUF (when non-zero) before a socket
// connects, so the window scale in the SYN matches the buffer.
func bufControl(rcv, snd int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if rcv > 0 {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcv)
			}
			if serr == nil && snd > 0 {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, snd)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}
