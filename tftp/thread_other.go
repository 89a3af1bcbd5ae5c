//go:build !linux

package tftp

import (
	"context"
	"net/netip"
)

// defaultTransferThreads is Config.TransferThreads' default.
const defaultTransferThreads = 16

// threadLink is Linux only: elsewhere every transfer waits in the poller.
func (s *Server) threadLink(context.Context, context.Context, netip.AddrPort, netip.Addr) link {
	s.polled.Add(1)
	return nil
}

// cpuRiders is Linux only (threadLink.pin).
type cpuRiders struct{}

// threadCap is Stats.ThreadsCap: no threads off Linux.
func (s *Server) threadCap() int64 { return 0 }
