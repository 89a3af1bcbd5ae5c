//go:build linux

package tftp

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/internal/threadsock"
	"golang.org/x/sys/unix"
)

// threadLink is the link of a transfer that waits for each ACK in a
// blocking read on its own OS thread (a threadsock.Sock), as atftpd and
// in.tftpd do, instead of in Go's poller.
//
// In lock-step every block waits for one ACK, so the time from the ACK's
// arrival to the next block's send is the transfer's speed, and a windowed
// transfer pays the same once per window. Through the poller each ACK costs
// a failed read, a park, an epoll wake-up and a hand-off to another thread;
// a blocked read is woken by the kernel on the very thread that then sends
// the next block (see DESIGN.md#lock-step-threads). A window leaves in one
// sendmmsg, as from the poller's connLink.
type threadLink struct {
	sock  *threadsock.Sock
	stop  func() bool
	recvs int64 // datagrams read
	done  func(recvs int64)

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
// thread, whose block wakes the client. Where the packet arrives on the
// client's CPU (veth, or a NIC queue that CPU serves), a server thread on
// another CPU is woken across CPUs, an inter-processor interrupt (in a
// virtual machine an exit to the hypervisor), per block and per direction;
// on the same CPU each wake-up is a local switch (see
// DESIGN.md#lock-step-threads). One transfer per CPU, so a crowd of clients
// whose packets one CPU takes in is not piled onto it; the thread gets its
// old affinity back when the transfer ends (close), before it is unlocked.
// New runtime threads are not cloned from a locked one (Go starts them
// from its template thread), so none inherits the pin.
func (l *threadLink) pin() {
	var cpu int
	var gerr error
	if err := l.sock.Control(func(fd uintptr) {
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

func (l *threadLink) send(b []byte) error { return l.sock.Send(b) }

// sendBatch sends a window in sendmmsg calls, like connLink's: one per
// window costs far less CPU than a write per block.
func (l *threadLink) sendBatch(bs [][]byte) error { return l.sock.SendBatch(bs) }

func (l *threadLink) recv(b []byte, deadline time.Time) (int, error) {
	n, err := l.sock.Recv(b, deadline)
	if err != nil {
		return 0, err
	}
	l.recvs++
	if l.recvs == pinAfter {
		l.pin()
	}
	return n, nil
}

func (l *threadLink) close() {
	l.stop()
	_ = l.sock.Close() // a second Close only returns an error
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
	var sock *threadsock.Sock
	open := func() (err error) {
		fd, err := s.connectedFD(base, peer, local)
		if err != nil {
			return err
		}
		sock, err = threadsock.New(fd, "tftp "+peer.String())
		return err
	}
	if err := s.openIn(open); err != nil {
		return nil, err
	}
	l := &threadLink{sock: sock, cpus: &s.cpuRiders, cpu: -1, pinned: &s.pinned, done: func(recvs int64) {
		s.threadRecvs.Add(recvs)
		s.threads.Add(-1)
	}}
	l.stop = context.AfterFunc(ctx, func() { _ = sock.Close() })
	// The goroutine keeps its thread between reads too, so the ACK wakes
	// the thread that sends (see DESIGN.md#lock-step-threads).
	runtime.LockOSThread()
	return l, nil
}

// connectedFD opens a blocking socket bound to local (in single-port mode
// on the listening port) and connected to peer, and in single-port mode
// passes on what it took in before the connect.
func (s *Server) connectedFD(base context.Context, peer netip.AddrPort, local netip.Addr) (int, error) {
	fd, err := threadsock.UDP4()
	if err != nil {
		return -1, err
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
		return -1, err
	}
	if s.cfg.SinglePort {
		s.passOn(base, fd, local)
	}
	return fd, nil
}
