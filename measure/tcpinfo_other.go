//go:build !linux

package measure

import (
	"errors"
	"net"
)

// Probe is Linux-only: elsewhere there is no TCP_INFO to read, transfers
// carry no TCP figures and callers count written bytes only.
type Probe struct{}

// NewProbe returns nil off Linux.
func NewProbe(net.Conn) *Probe { return nil }

// Read reads nothing off Linux.
func (p *Probe) Read() (TCPInfo, bool) { return TCPInfo{}, false }

// Outq is -1 (unknown) off Linux.
func (p *Probe) Outq() int { return -1 }

// ReadTCPInfo is errors.ErrUnsupported off Linux.
func ReadTCPInfo(net.Conn) (TCPInfo, error) { return TCPInfo{}, errors.ErrUnsupported }
