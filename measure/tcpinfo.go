package measure

import "time"

// TCPInfo is what pxeperf reads of a socket's TCP_INFO (Linux's struct
// tcp_info; elsewhere nothing can be read).
type TCPInfo struct {
	State       uint8  // tcpi_state (TCPCloseWait: the peer's FIN came)
	BytesAcked  uint64 // tcpi_bytes_acked: bytes the peer acknowledged (the SYN and FIN count one each)
	Retransmits uint32 // tcpi_total_retrans
	SndCwnd     uint32 // congestion window, segments
	MSS         uint32 // tcpi_snd_mss
	SndWnd      uint32 // the window the peer advertises now, bytes
	PMTU        uint32
	RTT         time.Duration // smoothed
	MinRTT      time.Duration
	RTTVar      time.Duration
	// DeliveryRate is the kernel's estimate, bytes/s.
	DeliveryRate  uint64
	RWndLimited   time.Duration // time limited by the peer's window
	SndBufLimited time.Duration // time limited by the send buffer
}

// TCPCloseWait is TCP_CLOSE_WAIT of the kernel's tcp_states.h: the peer
// has closed its side, this one has not yet.
const TCPCloseWait = 8

// Cwnd is the congestion window in bytes (snd_cwnd * snd_mss), as iperf3
// prints it.
func (i TCPInfo) Cwnd() uint32 { return i.SndCwnd * i.MSS }

// Sample is the reading the interval sampler cuts: Bytes are the bytes the
// peer acknowledged, with the sender's retransmits, cwnd, window and RTT.
func (i TCPInfo) Sample(at time.Duration) Sample {
	return Sample{At: at, Bytes: int64(i.BytesAcked), Retransmits: int64(i.Retransmits),
		Cwnd: int64(i.Cwnd()), SndWnd: int64(i.SndWnd), RTT: i.RTT}
}
