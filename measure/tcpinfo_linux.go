//go:build linux

package measure

import (
	"errors"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Probe reads TCP_INFO (and SIOCOUTQ) of one connection's socket into its
// own buffer, so a reading allocates nothing: a sampler reads thousands a
// second. A nil Probe reads nothing. Not safe for concurrent Reads; Outq
// has a buffer of its own and may run beside a Read.
type Probe struct {
	rc   syscall.RawConn
	info unix.TCPInfo
	err  syscall.Errno
	ctl  func(fd uintptr) // bound once: Control with it does not allocate
	q    int32
	qerr syscall.Errno
	qctl func(fd uintptr)
}

// NewProbe is a probe of c's socket; nil when c has none.
func NewProbe(c net.Conn) *Probe {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &Probe{rc: rc}
	p.ctl = func(fd uintptr) {
		n := uint32(unsafe.Sizeof(p.info))
		// Raw: getsockopt never blocks, and a call the scheduler sees
		// as a system call can wake sysmon into retaking the P.
		_, _, p.err = unix.RawSyscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
			uintptr(unsafe.Pointer(&p.info)), uintptr(unsafe.Pointer(&n)), 0)
	}
	p.qctl = func(fd uintptr) {
		_, _, p.qerr = unix.RawSyscall(unix.SYS_IOCTL, fd, unix.SIOCOUTQ, uintptr(unsafe.Pointer(&p.q)))
	}
	return p
}

// Read reads TCP_INFO; false when it cannot be read (closed, not TCP, nil).
func (p *Probe) Read() (TCPInfo, bool) {
	if p == nil {
		return TCPInfo{}, false
	}
	if err := p.rc.Control(p.ctl); err != nil || p.err != 0 {
		return TCPInfo{}, false
	}
	return fromKernel(&p.info), true
}

// Outq is how many bytes the socket holds that the peer has not yet
// acknowledged, sent or not (SIOCOUTQ); -1 when it cannot be read.
func (p *Probe) Outq() int {
	if p == nil {
		return -1
	}
	if err := p.rc.Control(p.qctl); err != nil || p.qerr != 0 {
		return -1
	}
	return int(p.q)
}

// ReadTCPInfo reads c's TCP_INFO once. The error is Control's (wrapping
// net.ErrClosed for a closed connection) or getsockopt's.
func ReadTCPInfo(c net.Conn) (TCPInfo, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return TCPInfo{}, errNotSocket
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return TCPInfo{}, err
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return TCPInfo{}, err
	}
	if gerr != nil {
		return TCPInfo{}, gerr
	}
	return fromKernel(info), nil
}

var errNotSocket = errors.New("measure: not a socket")

func fromKernel(i *unix.TCPInfo) TCPInfo {
	us := func(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }
	return TCPInfo{State: i.State, BytesAcked: i.Bytes_acked, Retransmits: i.Total_retrans,
		SndCwnd: i.Snd_cwnd, MSS: i.Snd_mss, SndWnd: i.Snd_wnd, PMTU: i.Pmtu,
		RTT: us(uint64(i.Rtt)), MinRTT: us(uint64(i.Min_rtt)), RTTVar: us(uint64(i.Rttvar)),
		DeliveryRate: i.Delivery_rate, RWndLimited: us(i.Rwnd_limited), SndBufLimited: us(i.Sndbuf_limited)}
}
