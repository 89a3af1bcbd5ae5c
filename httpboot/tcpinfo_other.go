//go:build !linux

package httpboot

import (
	"net"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// tcpProbe is Linux-only; elsewhere fetches carry no TCP info and stall
// detection counts written bytes only.
type tcpProbe struct{}

type tcpSample struct {
	acked   uint64
	sndWnd  uint32
	retrans uint32
	cwnd    uint32
	rtt     time.Duration
}

func newTCPProbe(net.Conn) *tcpProbe                   { return nil }
func (p *tcpProbe) sample() (tcpSample, bool)          { return tcpSample{}, false }
func (p *tcpProbe) outq() int                          { return -1 }
func (p *tcpProbe) final(maxWnd uint32) *event.TCPInfo { return nil }

// peerClosed is Linux-only (TCP_INFO's state); elsewhere a client's
// closed connection counts until the server has closed it too.
func peerClosed(net.Conn) bool { return false }
