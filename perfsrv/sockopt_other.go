//go:build !linux

package perfsrv

import (
	"net"
	"syscall"
	"time"
)

type tcpState struct {
	retransmits uint32
	cwnd        uint32
	rtt         time.Duration
	sndWnd      uint32
	acked       int64
	ok          bool
}

func readTCPInfo(net.Conn) tcpState                              { return tcpState{} }
func setCongestion(net.Conn, string) error                       { return nil }
func congestion(net.Conn) string                                 { return "" }
func reuseAddr(network, address string, c syscall.RawConn) error { return nil }
