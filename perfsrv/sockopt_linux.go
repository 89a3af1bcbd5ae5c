//go:build linux

package perfsrv

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpState is what TCP_INFO says about a sending socket.
type tcpState struct {
	retransmits uint32 // total segments sent again
	cwnd        uint32 // bytes: snd_cwnd * snd_mss, as iperf3 prints it
	rtt         time.Duration
	sndWnd      uint32 // window the peer advertised
	acked       int64  // bytes the peer acknowledged
	ok          bool
}

func readTCPInfo(c net.Conn) tcpState {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return tcpState{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return tcpState{}
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return tcpState{}
	}
	return tcpState{retransmits: info.Total_retrans, cwnd: info.Snd_cwnd * info.Snd_mss,
		rtt: time.Duration(info.Rtt) * time.Microsecond, sndWnd: info.Snd_wnd, acked: int64(info.Bytes_acked), ok: true}
}

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
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, algo)
	}); err != nil {
		return err
	}
	return serr
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
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	return serr
}
