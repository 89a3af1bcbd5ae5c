//go:build !linux

package netstate

import (
	"fmt"
	"net"
)

// Elsewhere only the MTU is read.
type sysReader struct{}

func newSysReader() (*sysReader, error) { return &sysReader{}, nil }
func (s *sysReader) close() error       { return nil }

func (s *sysReader) read(iface string) (State, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return State{Iface: iface}, fmt.Errorf("interface %s: %w", iface, err)
	}
	return State{Iface: iface, MTU: ifc.MTU}, nil
}

// Kernel is unknown outside Linux.
func Kernel() string { return "" }
