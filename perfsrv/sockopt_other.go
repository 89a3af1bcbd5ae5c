//go:build !linux

package perfsrv

import (
	"net"
	"syscall"
)

func setCongestion(net.Conn, string) error                       { return nil }
func congestion(net.Conn) string                                 { return "" }
func reuseAddr(network, address string, c syscall.RawConn) error { return nil }
