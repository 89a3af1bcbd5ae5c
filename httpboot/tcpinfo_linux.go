//go:build linux

package httpboot

import (
	"net"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"golang.org/x/sys/unix"
)

// tcpProbe reads TCP_INFO from one connection's socket.
type tcpProbe struct{ rc syscall.RawConn }

type tcpSample struct {
	acked  uint64 // tcpi_bytes_acked
	sndWnd uint32 // tcpi_snd_wnd: the window the client advertises now
}

func newTCPProbe(c net.Conn) *tcpProbe {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &tcpProbe{rc: rc}
}

func (p *tcpProbe) read() (*unix.TCPInfo, bool) {
	if p == nil {
		return nil, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := p.rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return nil, false
	}
	return info, true
}

func (p *tcpProbe) sample() (tcpSample, bool) {
	i, ok := p.read()
	if !ok {
		return tcpSample{}, false
	}
	return tcpSample{acked: i.Bytes_acked, sndWnd: i.Snd_wnd}, true
}

// final reads TCP_INFO at the end of a response. maxWnd is the largest
// tcpi_snd_wnd sampled during it. nil when the socket cannot be read.
func (p *tcpProbe) final(maxWnd uint32) *event.TCPInfo {
	i, ok := p.read()
	if !ok {
		return nil
	}
	us := func(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }
	return &event.TCPInfo{
		RTT:           us(uint64(i.Rtt)),
		MinRTT:        us(uint64(i.Min_rtt)),
		RTTVar:        us(uint64(i.Rttvar)),
		Retransmits:   i.Total_retrans,
		MaxSndWnd:     max(maxWnd, i.Snd_wnd),
		SndWnd:        i.Snd_wnd,
		SndCwnd:       i.Snd_cwnd,
		MSS:           i.Snd_mss,
		PMTU:          i.Pmtu,
		DeliveryRate:  i.Delivery_rate,
		RWndLimited:   us(i.Rwnd_limited),
		SndBufLimited: us(i.Sndbuf_limited),
	}
}
