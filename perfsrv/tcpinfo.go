package perfsrv

import (
	"net"
	"time"

	meas "github.com/pxeperf/pxeperf/measure"
)

// tcpState is what perfsrv keeps of a sending socket's TCP_INFO
// (measure.ReadTCPInfo).
type tcpState struct {
	retransmits uint32 // total segments sent again
	cwnd        uint32 // bytes: snd_cwnd * snd_mss, as iperf3 prints it
	rtt         time.Duration
	sndWnd      uint32 // window the peer advertised
	acked       int64  // bytes the peer acknowledged
	ok          bool   // false: TCP_INFO could not be read (not Linux, closed)
}

func readTCPInfo(c net.Conn) tcpState {
	i, err := meas.ReadTCPInfo(c)
	if err != nil {
		return tcpState{}
	}
	return tcpState{retransmits: i.Retransmits, cwnd: i.Cwnd(), rtt: i.RTT, sndWnd: i.SndWnd,
		acked: int64(i.BytesAcked), ok: true}
}
