//go:build linux

package tftp

import (
	"context"
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
)

// threadLink is the link of a transfer that waits for each ACK in a
// blocking read(2) on its own OS thread, as atftpd and in.tftpd do, instead
// of in Go's poller.
//
// In lock-step every block waits for one ACK, so the time from the ACK's
// arrival to the next block's send is the transfer's speed. Through the
// poller each ACK costs a failed read (EAGAIN), a park, an epoll wake-up
// of whichever thread polls, and a goroutine hand-off to a thread that may
// have to be woken with a futex: about twice atftpd's CPU per GiB and 0.6x
// its speed. A blocked read is woken by the kernel on the very thread that
// then sends the next block.
//
// A windowed transfer pays the same per window: the link sits idle from
// the window's last ACK to its next window. On a thread, at windowsize 4
// over a 1 Gbit/s tbf, 1.32x the Mbit/s of the poller (blksize 1468) at
// 0.64x its CPU; unshaped, at windowsize 64, 1.20x at 0.68x
// (TestBenchWindowsize with PXEPERF_BENCH_ALTBIN, 7 runs). A window leaves
// in one sendmmsg, as from the poller's connLink.
//
// The socket is a blocking one of its own, never registered with the
// poller: a socket in the poller's epoll set wakes the polling thread at
// every datagram sent or received, even with no goroutine waiting on it.
// The read timeout is SO_RCVTIMEO.
type threadLink struct {
	f      *os.File
	rc     syscall.RawConn
	rcvto  time.Duration // SO_RCVTIMEO set last; 0: none (blocks forever)
	closed atomic.Bool   // set before the socket is shut down under a read
	stop   func() bool
	recvs  int64 // datagrams read
	done   func(recvs int64)
	// yielded is when the goroutine last went through the scheduler (see
	// yieldEvery).
	yielded time.Time

	// The system calls, as closures built once: one built per call would
	// be allocated per block. io holds their buffer, ion and ioerr their
	// results.
	read, write, sendmmsg func(fd uintptr)
	io                    []byte
	ion                   int
	ioerr                 error
	// msgs and iovs are sendmmsg's headers, kept from window to window;
	// batch is what is left to send of the window in flight.
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	batch []unix.Mmsghdr

	// Riding the client's CPU (see pin): the CPU taken in cpus (-1:
	// none) and the thread's affinity before.
	cpus   *cpuRiders
	cpu    int
	mask   unix.CPUSet
	pinned *atomic.Int64 // Stats.Pinned
}

// pinAfter is the ACK after which a threaded transfer asks which CPU took
// in the client's packets (pin): a few, so the client's first steps
// (option negotiation, its own start-up) are past.
const pinAfter = 4

// cpuRiders is which CPUs a threaded transfer rides (see pin):
// at most one transfer per CPU.
type cpuRiders [1024]atomic.Bool // unix.CPUSet's size

// pin moves the transfer's thread onto the CPU that took in the client's
// last ACK (SO_INCOMING_CPU), when no other transfer rides that CPU and
// the thread may run there.
//
// A lock-step block is a ping-pong: the client's ACK wakes the server's
// thread, whose block wakes the client. On veth (and where a NIC's queue
// is served by the client's CPU) the packet arrives on the client's CPU;
// a server thread on the other CPU is woken across CPUs, an
// inter-processor interrupt, in a virtual machine an exit to the
// hypervisor, per block and per direction. On the same CPU each wake-up is
// a local switch: at blksize 512 with curl, 1.13x the Mbit/s at 0.84x the
// CPU per GiB (TestBenchLockstep, 15 rounds, PXEPERF_BENCH_ALTBIN); at
// 1468 level. One transfer per CPU, so a crowd of clients whose packets
// one CPU takes in is not piled onto it; the thread gets its old affinity
// back when the transfer ends (close), before it is unlocked. New runtime
// threads are not cloned from a locked one (Go starts them from its
// template thread), so none inherits the pin.
func (l *threadLink) pin() {
	var cpu int
	var gerr error
	if err := l.rc.Control(func(fd uintptr) {
		cpu, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
	}); err != nil || gerr != nil || cpu < 0 || cpu >= len(l.cpus) {
		return
	}
	if unix.SchedGetaffinity(0, &l.mask) != nil || !l.mask.IsSet(cpu) || !l.cpus[cpu].CompareAndSwap(false, true) {
		return
	}
	var set unix.CPUSet
	set.Set(cpu)
	if unix.SchedSetaffinity(0, &set) != nil {
		l.cpus[cpu].Store(false)
		return
	}
	l.cpu = cpu
	l.pinned.Add(1)
}

// unpin gives the thread its affinity back and the CPU to the next
// transfer.
func (l *threadLink) unpin() {
	if l.cpu < 0 {
		return
	}
	_ = unix.SchedSetaffinity(0, &l.mask)
	l.cpus[l.cpu].Store(false)
	l.cpu = -1
}

var _ link = (*threadLink)(nil)

// yieldEvery is how often a threaded transfer yields to Go's scheduler.
//
// A goroutine that only ever makes system calls never passes through the
// scheduler, so after 10 ms sysmon takes it for one that hogs its P: it
// signals the thread (SIGURG: the blocked read returns EINTR), takes the P
// away at each of its ticks while the read blocks, so each read ends in the
// slow exit path, and polls every 20 µs until the goroutine is preempted
// (which, on a locked thread, hands the goroutine to another thread and
// back): about 100 sysmon wake-ups and slow reads every 12 ms, on the CPUs
// the client needs. A yield well inside those 10 ms costs the one hand-off
// and lets sysmon sleep.
const yieldEvery = 8 * time.Millisecond

// rcvtoSlack is how much later than its deadline a read may time out, so
// that SO_RCVTIMEO is not set again for every block: each ACK wait starts a
// full timeout (1s by default) after the last, a few microseconds apart.
const rcvtoSlack = time.Millisecond

func (l *threadLink) send(b []byte) error {
	l.io = b
	defer func() { l.io = nil }()
	for {
		if err := l.rc.Control(l.write); err != nil {
			return err
		}
		if l.ioerr != unix.EINTR {
			return l.ioerr
		}
	}
}

// sendBatch sends a window in sendmmsg calls (one, unless the socket's
// buffer is full or a signal cuts one short), like connLink's: at 64
// blocks one call per window saved a quarter of the server's CPU against a
// write per block.
func (l *threadLink) sendBatch(bs [][]byte) error {
	if len(bs) == 1 {
		return l.send(bs[0])
	}
	for len(l.msgs) < len(bs) {
		l.msgs = append(l.msgs, unix.Mmsghdr{})
		l.iovs = append(l.iovs, unix.Iovec{})
	}
	for i, b := range bs {
		l.iovs[i].Base = &b[0]
		l.iovs[i].SetLen(len(b))
		l.msgs[i].Hdr.Iov = &l.iovs[i]
		l.msgs[i].Hdr.SetIovlen(1)
	}
	l.batch = l.msgs[:len(bs)]
	defer func() {
		clear(l.iovs) // holds no block after the call
		l.batch = nil
	}()
	for len(l.batch) > 0 {
		if err := l.rc.Control(l.sendmmsg); err != nil {
			return err
		}
		switch {
		case l.ioerr == unix.EINTR:
			continue
		case l.ioerr != nil:
			return l.ioerr
		}
		l.batch = l.batch[l.ion:]
	}
	return nil
}

func (l *threadLink) recv(b []byte, deadline time.Time) (int, error) {
	for {
		now := time.Now()
		if now.Sub(l.yielded) > yieldEvery {
			runtime.Gosched()
			l.yielded = now
		}
		d := deadline.Sub(now)
		if d < time.Microsecond { // SO_RCVTIMEO counts in µs, and 0 is forever
			return 0, os.ErrDeadlineExceeded
		}
		if d > l.rcvto || d < l.rcvto-rcvtoSlack {
			if err := l.setRcvTimeout(d); err != nil {
				return 0, err
			}
		}
		l.io = b
		err := l.rc.Control(l.read)
		l.io = nil
		n, rerr := l.ion, l.ioerr
		switch {
		case err != nil:
			return 0, err
		case l.closed.Load():
			// stop shut the socket down to end this read.
			return 0, net.ErrClosed
		case rerr == nil:
			l.recvs++
			if l.recvs == pinAfter {
				l.pin()
			}
			return n, nil
		case rerr == unix.EAGAIN || rerr == unix.EINTR:
			// Timed out (the loop checks the deadline), or a signal:
			// with SO_RCVTIMEO set, a read is never restarted.
			continue
		}
		return 0, rerr
	}
}

func (l *threadLink) setRcvTimeout(d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	var serr error
	if err := l.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptTimeval(int(fd), unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	l.rcvto = d
	return nil
}

func (l *threadLink) close() {
	l.stop()
	l.f.Close() // a second Close only returns an error
	l.unpin()
	runtime.UnlockOSThread()
	l.done(l.recvs)
}

// defaultTransferThreads is Config.TransferThreads' default.
const defaultTransferThreads = 16

// threadCap is Stats.ThreadsCap.
func (s *Server) threadCap() int64 { return int64(max(s.cfg.TransferThreads, 0)) }

// threadLink opens a threadLink for a transfer when a thread is
// free under TransferThreads, else returns nil (the transfer waits in the
// poller). It runs on the transfer's goroutine, which must close the link.
func (s *Server) threadLink(base, ctx context.Context, peer netip.AddrPort, local netip.Addr) link {
	for {
		n := s.threads.Load()
		if n >= int32(s.cfg.TransferThreads) {
			s.polled.Add(1)
			return nil
		}
		// Never above the cap, even for a moment: Stats reads it.
		if s.threads.CompareAndSwap(n, n+1) {
			break
		}
	}
	l, err := s.openThreadLink(base, ctx, peer, local)
	if err != nil {
		s.threads.Add(-1)
		s.polled.Add(1)
		s.log.Debug("TFTP transfer waits in the poller", "client", peer, "err", err)
		return nil
	}
	s.threaded.Add(1)
	return l
}

func (s *Server) openThreadLink(base, ctx context.Context, peer netip.AddrPort, local netip.Addr) (*threadLink, error) {
	if !peer.Addr().Is4() || (local.IsValid() && !local.Is4()) {
		return nil, fmt.Errorf("not IPv4: %v from %v", peer, local)
	}
	var f *os.File
	open := func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		la := &unix.SockaddrInet4{}
		if local.IsValid() {
			la.Addr = local.As4()
		}
		if s.cfg.SinglePort {
			la.Port = int(s.Addr().Port())
			err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		}
		if err == nil {
			if err = unix.Bind(fd, la); err != nil {
				err = fmt.Errorf("bind %v:%d: %w", local, la.Port, err)
			}
		}
		if h := testHookBound.Load(); err == nil && s.cfg.SinglePort && h != nil {
			(*h)()
		}
		if err == nil {
			if err = unix.Connect(fd, &unix.SockaddrInet4{Addr: peer.Addr().As4(), Port: int(peer.Port())}); err != nil {
				err = fmt.Errorf("connect %v: %w", peer, err)
			}
		}
		if err != nil {
			unix.Close(fd)
			return err
		}
		if s.cfg.SinglePort {
			s.passOn(base, fd, local)
		}
		// Blocking: os.NewFile leaves it out of the poller.
		f = os.NewFile(uintptr(fd), "tftp "+peer.String())
		return nil
	}
	if err := s.openIn(open); err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &threadLink{f: f, rc: rc, cpus: &s.cpuRiders, cpu: -1, pinned: &s.pinned, done: func(recvs int64) {
		s.threadRecvs.Add(recvs)
		s.threads.Add(-1)
	}}
	l.read = func(fd uintptr) { l.ion, l.ioerr = unix.Read(int(fd), l.io) }
	l.write = func(fd uintptr) { l.ion, l.ioerr = unix.Write(int(fd), l.io) }
	l.sendmmsg = func(fd uintptr) {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&l.batch[0])), uintptr(len(l.batch)), 0, 0, 0)
		l.ion, l.ioerr = int(n), nil
		if errno != 0 {
			l.ion, l.ioerr = 0, errno
		}
	}
	l.stop = context.AfterFunc(ctx, func() {
		l.closed.Store(true)
		// A connected UDP socket shut down reads 0 bytes at once; a
		// close would wait for the read, which holds the descriptor.
		_ = rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RD) })
		f.Close()
	})
	// The goroutine keeps its thread between reads too (measured mixed
	// against not locking; kept so the ACK wakes the thread that sends).
	runtime.LockOSThread()
	return l, nil
}
