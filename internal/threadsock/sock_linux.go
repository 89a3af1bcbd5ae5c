//go:build linux

package threadsock

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/sockopt"
)

// YieldEvery is the yield rule: a Sock's owner passes through Go's
// scheduler before a read once YieldEvery has gone by since it last did.
//
// A goroutine that only ever makes system calls never passes through the
// scheduler, and after 10 ms (the runtime's preemption limit) sysmon takes
// it for one that hogs its P: it signals the thread, takes the P away under
// each blocked read and polls until the goroutine is preempted, on the CPUs
// the peer needs. A yield well inside those 10 ms costs one hand-off and
// lets sysmon sleep (see tftp/DESIGN.md#lock-step-threads).
const YieldEvery = 8 * time.Millisecond

// rcvtoSlack is how much later than its deadline a read may time out, so
// that SO_RCVTIMEO is not set again for every read: each wait of a
// lock-step transfer starts a full timeout after the last, microseconds
// apart.
const rcvtoSlack = time.Millisecond

// Sock is a blocking UDP socket owned by one goroutine locked to its OS
// thread (see the package comment for its rules).
type Sock struct {
	f      *os.File
	rc     syscall.RawConn
	closed atomic.Bool // set before Close shuts the socket down under a read
	// yielded is when the owner last went through the scheduler
	// (YieldEvery).
	yielded time.Time
	rcvto   time.Duration // SO_RCVTIMEO set last; 0: none (reads block for ever)

	// The system calls, as closures built once (one built per call would
	// be allocated per datagram), and their arguments and results.
	recvfrom, sendto, write, sendmmsg func(fd uintptr)
	buf                               []byte
	flags                             int
	from                              unix.RawSockaddrInet4
	fromLen                           uint32
	to                                unix.RawSockaddrInet4
	n                                 int
	errno                             syscall.Errno
	// msgs and iovs are sendmmsg's headers, kept from batch to batch;
	// batch is what is left to send of the batch in flight.
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	batch []unix.Mmsghdr
}

// UDP4 opens a blocking IPv4 UDP socket, closed on exec, for the caller to
// set up (options, bind, connect) and hand to New.
func UDP4() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	return fd, nil
}

// New makes fd, a blocking socket, a Sock named name (as in os.NewFile).
// The Sock owns fd from then on, also when New fails.
func New(fd int, name string) (*Sock, error) {
	// os.NewFile leaves a blocking descriptor out of the poller.
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &Sock{f: f, rc: rc}
	s.recvfrom = func(fd uintptr) {
		s.fromLen = uint32(unsafe.Sizeof(s.from))
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))), uintptr(len(s.buf)),
			uintptr(s.flags), uintptr(unsafe.Pointer(&s.from)), uintptr(unsafe.Pointer(&s.fromLen)))
		s.n, s.errno = int(n), e
	}
	s.sendto = func(fd uintptr) {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))), uintptr(len(s.buf)),
			unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&s.to)), unsafe.Sizeof(s.to))
		s.errno = e
	}
	s.write = func(fd uintptr) {
		_, _, e := unix.Syscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))), uintptr(len(s.buf)))
		s.errno = e
	}
	s.sendmmsg = func(fd uintptr) {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&s.batch[0])), uintptr(len(s.batch)), 0, 0, 0)
		s.n, s.errno = int(n), e
	}
	return s, nil
}

// Control runs fn on the descriptor (socket options, ioctls).
func (s *Sock) Control(fn func(fd uintptr)) error { return s.rc.Control(fn) }

// Closed reports whether Close has begun.
func (s *Sock) Closed() bool { return s.closed.Load() }

// Close ends the reads, from any goroutine: shutdown(2) wakes a blocked
// read with 0 bytes (on a UDP socket without a peer it also returns
// ENOTCONN, and wakes the reader all the same), and the descriptor is
// closed once the read has let go of it. A second Close only returns an
// error.
func (s *Sock) Close() error {
	s.closed.Store(true)
	_ = s.rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RD) })
	return s.f.Close()
}

// Recv reads one datagram from the connected peer into b, waiting until
// deadline (zero: for ever). A deadline passed is os.ErrDeadlineExceeded, a
// closed socket net.ErrClosed, a failed call its syscall.Errno (e.g.
// ECONNREFUSED: an ICMP port unreachable came back).
func (s *Sock) Recv(b []byte, deadline time.Time) (int, error) {
	return s.recv(b, deadline, 0)
}

// RecvFrom is Recv that also returns the datagram's source.
func (s *Sock) RecvFrom(b []byte, deadline time.Time) (int, netip.AddrPort, error) {
	n, err := s.recv(b, deadline, 0)
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	return n, s.source(), nil
}

// TryRecvFrom is RecvFrom of a datagram already queued: unix.EAGAIN when
// none is.
func (s *Sock) TryRecvFrom(b []byte) (int, netip.AddrPort, error) {
	n, err := s.recv(b, time.Time{}, unix.MSG_DONTWAIT)
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	return n, s.source(), nil
}

func (s *Sock) recv(b []byte, deadline time.Time, flags int) (int, error) {
	for {
		now := time.Now()
		if now.Sub(s.yielded) > YieldEvery {
			runtime.Gosched()
			s.yielded = now
		}
		if !deadline.IsZero() {
			if err := s.setTimeout(deadline.Sub(now)); err != nil {
				return 0, err
			}
		}
		s.buf, s.flags = b, flags
		err := s.rc.Control(s.recvfrom)
		s.buf = nil
		switch {
		case err != nil:
			return 0, err
		case s.closed.Load():
			// Close shut the socket down to end this read.
			return 0, net.ErrClosed
		case s.errno == 0:
			return s.n, nil
		case s.errno == unix.EINTR, s.errno == unix.EAGAIN && flags&unix.MSG_DONTWAIT == 0:
			// A signal, or SO_RCVTIMEO ran out (the loop checks the
			// deadline): with SO_RCVTIMEO set, a read is never restarted.
			continue
		}
		return 0, s.errno
	}
}

// setTimeout makes SO_RCVTIMEO d, unless the one set is within rcvtoSlack
// above it; under a microsecond (SO_RCVTIMEO's unit, where 0 is for ever)
// is os.ErrDeadlineExceeded.
func (s *Sock) setTimeout(d time.Duration) error {
	if d < time.Microsecond {
		return os.ErrDeadlineExceeded
	}
	if d <= s.rcvto && d >= s.rcvto-rcvtoSlack {
		return nil
	}
	tv := unix.NsecToTimeval(d.Nanoseconds())
	if err := sockopt.Control(s.rc, func(fd uintptr) error {
		return unix.SetsockoptTimeval(int(fd), unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}); err != nil {
		return err
	}
	s.rcvto = d
	return nil
}

// source is the address of the datagram recvfrom read last.
func (s *Sock) source() netip.AddrPort {
	p := (*[2]byte)(unsafe.Pointer(&s.from.Port)) // network order
	return netip.AddrPortFrom(netip.AddrFrom4(s.from.Addr), uint16(p[0])<<8|uint16(p[1]))
}

// Send writes b to the connected peer, waiting for room in the send
// buffer.
func (s *Sock) Send(b []byte) error {
	return s.call(s.write, b)
}

// TrySendTo sends b to dst without waiting (MSG_DONTWAIT): a send buffer
// without room is unix.EAGAIN (or ENOBUFS).
func (s *Sock) TrySendTo(b []byte, dst netip.AddrPort) error {
	s.to = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Addr().As4()}
	p := (*[2]byte)(unsafe.Pointer(&s.to.Port)) // network order
	p[0], p[1] = byte(dst.Port()>>8), byte(dst.Port())
	return s.call(s.sendto, b)
}

// call makes the send call fn with b until no signal cuts it short.
func (s *Sock) call(fn func(fd uintptr), b []byte) error {
	s.buf = b
	defer func() { s.buf = nil }()
	for {
		if err := s.rc.Control(fn); err != nil {
			return err
		}
		switch s.errno {
		case unix.EINTR:
			continue
		case 0:
			return nil
		}
		return s.errno
	}
}

// SendBatch sends bs in order to the connected peer in sendmmsg calls: one,
// unless the send buffer fills or a signal cuts one short.
func (s *Sock) SendBatch(bs [][]byte) error {
	if len(bs) == 1 {
		return s.Send(bs[0])
	}
	for len(s.msgs) < len(bs) {
		s.msgs = append(s.msgs, unix.Mmsghdr{})
		s.iovs = append(s.iovs, unix.Iovec{})
	}
	for i, b := range bs {
		s.iovs[i].Base = &b[0]
		s.iovs[i].SetLen(len(b))
		s.msgs[i].Hdr.Iov = &s.iovs[i]
		s.msgs[i].Hdr.SetIovlen(1)
	}
	s.batch = s.msgs[:len(bs)]
	defer func() {
		clear(s.iovs) // holds no buffer after the call
		s.batch = nil
	}()
	for len(s.batch) > 0 {
		if err := s.rc.Control(s.sendmmsg); err != nil {
			return err
		}
		switch s.errno {
		case unix.EINTR:
			continue
		case 0:
		default:
			return s.errno
		}
		s.batch = s.batch[s.n:]
	}
	return nil
}
