//go:build linux

package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sock is a DHCP socket read by one goroutine on an OS thread of its own
// (serveSock), in blocking recvfrom(2) calls, outside Go's poller.
//
// Through the poller each datagram cost an epoll wake-up, a read that
// failed (EAGAIN) for the worker that took over the socket's read lock,
// a futex wake-up of another thread for it, and a wake-up of the runtime's
// sysmon, which then polls every 20 µs while any goroutine is in a system
// call: about 30 system calls per exchange against kea's 11, and on a host
// where each switch of threads is dear (a paravirtualised guest) 2.4x
// kea's CPU per exchange at 1000/s. A blocked read is woken by the kernel
// on the thread that then answers, as kea's is.
//
// Every reply leaves without waiting (MSG_DONTWAIT): what the kernel will
// not take is dropped and counted, and the reader goes on (see mayUnicast
// for the replies that would wait for ARP).
type sock struct {
	f      *os.File
	rc     syscall.RawConn
	closed atomic.Bool // set before Close shuts the socket down under a read
	// unicastQueue is how many bytes of the send buffer unicast replies
	// may hold before each must show its destination resolved (a quarter
	// of SO_SNDBUF), so broadcasts always find room.
	unicastQueue int
	neigh        *neighbours // nil: no interface, nothing waits for ARP
	neighOnce    sync.Once
}

// closeNeighbours closes the netlink socket once its reader is done (or
// never ran): the reader's thread is the only one that uses it.
func (c *sock) closeNeighbours() { c.neighOnce.Do(func() { c.neigh.close() }) }

// setSockOpts allows broadcasts and, when ifname is set, ties fd to that
// interface (SO_BINDTODEVICE), so requests from other interfaces never
// reach it and replies, broadcasts included, leave on it.
func setSockOpts(fd int, ifname string) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BROADCAST, 1); err != nil {
		return fmt.Errorf("SO_BROADCAST: %w", err)
	}
	if ifname != "" {
		if err := unix.BindToDevice(fd, ifname); err != nil {
			return fmt.Errorf("SO_BINDTODEVICE %s: %w (needs root or CAP_NET_RAW)", ifname, err)
		}
	}
	return nil
}

// listenSock binds 0.0.0.0:port (broadcasts only reach a wildcard
// socket) with setSockOpts, and a receive buffer of rcvbuf bytes that
// absorbs bursts (a rack powering on) while the journal fsyncs.
func listenSock(_ context.Context, ifname string, port, rcvbuf int) (*sock, error) {
	neigh, err := openNeighbours(ifname)
	if err != nil {
		return nil, fmt.Errorf("neighbour table of %s: %w", ifname, err)
	}
	c, err := listenUDP(ifname, port, rcvbuf)
	if err != nil {
		neigh.close()
		return nil, err
	}
	c.neigh = neigh
	return c, nil
}

func listenUDP(ifname string, port, rcvbuf int) (*sock, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	err = setSockOpts(fd, ifname)
	if err == nil {
		// Past net.core.rmem_max (212992 by default) when the process
		// may (CAP_NET_ADMIN), else as far as it allows: best effort.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
		}
		if err = unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
			err = fmt.Errorf("bind 0.0.0.0:%d: %w", port, err)
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	sndbuf, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Blocking: os.NewFile leaves it out of the poller.
	f := os.NewFile(uintptr(fd), fmt.Sprintf("dhcp :%d", port))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sock{f: f, rc: rc, unicastQueue: sndbuf / 4}, nil
}

// Close ends the reads: shutdown(2) wakes a blocked recvfrom with 0 bytes
// (on an unbound-peer UDP socket it also returns ENOTCONN, and wakes the
// reader all the same), and the descriptor is closed once the read has let
// go of it.
func (c *sock) Close() error {
	c.closed.Store(true)
	_ = c.rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RD) })
	return c.f.Close()
}

// yieldEvery is how often the socket's goroutine passes through Go's
// scheduler while busy, so sysmon does not take it for one that hogs its
// P (see tftp's threadLink, which does the same).
const yieldEvery = 8 * time.Millisecond

// maxBatch and maxBatchReads bound a batch: while ACKs wait for their
// leases, serveSock reads on without blocking until the socket is empty,
// maxBatch ACKs wait or maxBatchReads datagrams were read, then writes and
// fsyncs their leases once and sends them.
const (
	maxBatch      = 64
	maxBatchReads = 256
)

// sockIO is serveSock's state: the system calls as closures built once
// (one built per call would be allocated per datagram), their arguments
// and results.
type sockIO struct {
	c         *sock
	buf       []byte
	n         int
	flags     int
	from      unix.RawSockaddrInet4
	fromLen   uint32
	to        unix.RawSockaddrInet4
	out       []byte
	errno     syscall.Errno
	queued    int // SIOCOUTQ: bytes the send buffer held at the last reading
	sinceOutq int // unicasts since that reading
	// unproven: the destinations sent a reply that may wait for ARP.
	unproven *unproven
	recv     func(fd uintptr)
	send     func(fd uintptr)
	outq     func(fd uintptr)
	yielded  time.Time
}

func newSockIO(c *sock) *sockIO {
	io := &sockIO{c: c, buf: make([]byte, 1500), unproven: newUnproven(maxUnproven)}
	io.recv = func(fd uintptr) {
		io.fromLen = uint32(unsafe.Sizeof(io.from))
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&io.buf[0])), uintptr(len(io.buf)),
			uintptr(io.flags), uintptr(unsafe.Pointer(&io.from)), uintptr(unsafe.Pointer(&io.fromLen)))
		io.n, io.errno = int(n), e
	}
	io.send = func(fd uintptr) {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&io.out[0])), uintptr(len(io.out)),
			unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&io.to)), unsafe.Sizeof(io.to))
		io.errno = e
	}
	io.outq = func(fd uintptr) {
		var n int32
		_, _, e := unix.Syscall(unix.SYS_IOCTL, fd, unix.SIOCOUTQ, uintptr(unsafe.Pointer(&n)))
		io.queued = int(n)
		if e != 0 {
			io.queued = 0
		}
	}
	return io
}

// read reads one datagram into buf; wait false returns ok false at once
// when none is queued. closed is true once Close has run.
func (io *sockIO) read(wait bool) (pkt []byte, src netip.AddrPort, ok, closed bool) {
	for {
		if now := time.Now(); now.Sub(io.yielded) > yieldEvery {
			runtime.Gosched()
			io.yielded = now
		}
		io.flags = 0
		if !wait {
			io.flags = unix.MSG_DONTWAIT
		}
		if err := io.c.rc.Control(io.recv); err != nil {
			return nil, netip.AddrPort{}, false, true
		}
		if io.c.closed.Load() {
			return nil, netip.AddrPort{}, false, true
		}
		switch io.errno {
		case 0:
			p := (*[2]byte)(unsafe.Pointer(&io.from.Port)) // network order
			port := uint16(p[0])<<8 | uint16(p[1])
			return io.buf[:io.n], netip.AddrPortFrom(netip.AddrFrom4(io.from.Addr), port), true, false
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if !wait {
				return nil, netip.AddrPort{}, false, false
			}
			continue
		}
		return nil, netip.AddrPort{}, false, false // an ICMP error queued by an earlier send, say
	}
}

// write sends b to dst.
func (io *sockIO) write(b []byte, dst netip.AddrPort) error {
	io.out = b
	defer func() { io.out = nil }()
	io.to = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Addr().As4()}
	p := (*[2]byte)(unsafe.Pointer(&io.to.Port)) // network order
	p[0], p[1] = byte(dst.Port()>>8), byte(dst.Port())
	for {
		if err := io.c.rc.Control(io.send); err != nil {
			return err
		}
		if io.errno != unix.EINTR {
			break
		}
	}
	if io.errno != 0 {
		return io.errno
	}
	return nil
}

// outqEvery: while the send queue was under half its unicast share at the
// last reading, SIOCOUTQ is read once every outqEvery unicasts (perfdhcp's
// relay takes two a DORA): 16 replies, ~40 KiB of kernel truesize at most,
// cannot take the queue from there to a full send buffer.
const outqEvery = 16

// unicastBusy reports whether unicasts hold more than their share of the
// send buffer.
func (io *sockIO) unicastBusy() bool {
	io.sinceOutq++
	if io.sinceOutq < outqEvery && io.queued <= io.c.unicastQueue/2 {
		return false
	}
	io.sinceOutq = 0
	if io.c.rc.Control(io.outq) != nil {
		return false
	}
	return io.queued > io.c.unicastQueue
}

// batched is an ACK held in a batch: its bytes in ackBatch.buf.
type batched struct {
	off, n int
	dst    netip.AddrPort
	ack    ackAfter
}

// ackBatch is the ACKs that wait for one journal write.
type ackBatch struct {
	acks []batched
	buf  []byte
	gen  uint64 // the highest generation among them
}

// serveSock reads and answers c's datagrams on a goroutine locked to its
// thread until c is closed. An OFFER (and anything else that needs no
// lease written) leaves at once; an ACK waits in a batch while further
// datagrams are read without blocking, and the batch's leases are written
// and fsynced in one go (group commit) when the socket is empty or
// maxBatch ACKs wait.
func (s *Server) serveSock(c *sock, onProxy bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer c.closeNeighbours()
	io := newSockIO(c)
	w := &wire{}
	var b ackBatch
	reads := 0 // while the batch waits
	for {
		wait := len(b.acks) == 0
		pkt, src, ok, closed := io.read(wait)
		if closed {
			s.flush(io, &b)
			return
		}
		if ok {
			s.serveOne(io, w, &b, pkt, src, onProxy)
		}
		if len(b.acks) == 0 {
			continue
		}
		if reads++; !ok || len(b.acks) >= maxBatch || reads >= maxBatchReads {
			s.flush(io, &b)
			reads = 0
		}
	}
}

// serveOne answers one datagram: at once, or into the batch.
func (s *Server) serveOne(io *sockIO, w *wire, b *ackBatch, pkt []byte, src netip.AddrPort, onProxy bool) {
	out, dst := s.handleSafe(w, pkt, src, onProxy)
	switch {
	case out == nil:
	case w.ack.pending:
		off := len(b.buf)
		b.buf = append(b.buf, out...)
		b.acks = append(b.acks, batched{off: off, n: len(out), dst: dst, ack: w.ack})
		b.gen = max(b.gen, w.ack.gen)
		w.ack.pending = false
	default:
		s.send(io, out, dst)
	}
}

// flush makes the batch's leases durable and sends its ACKs (or, when the
// journal failed, none: the clients retry).
func (s *Server) flush(io *sockIO, b *ackBatch) {
	if len(b.acks) == 0 {
		return
	}
	err := s.leases.wait(b.gen)
	for i := range b.acks {
		a := &b.acks[i]
		if s.settleSafe(&a.ack, err) {
			s.send(io, b.buf[a.off:a.off+a.n], a.dst)
		}
		a.ack = ackAfter{} // holds no client past the batch
	}
	b.acks, b.buf, b.gen = b.acks[:0], b.buf[:0], 0
}

// send sends a reply without waiting: one the kernel will not take now
// (send buffer full) is dropped and counted, as is one mayUnicast holds
// back; a failed send is counted and logged once a minute per error.
func (s *Server) send(io *sockIO, out []byte, dst netip.AddrPort) {
	if !s.mayUnicast(io, dst) {
		return
	}
	err := io.write(out, dst)
	switch {
	case err == nil:
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOBUFS):
		s.refuse.Refuse(reasonSendFull, "send buffer", "to", dst, "then", "dropped; the client asks again")
	default:
		s.stats.errors.Add(1)
		s.refuse.Refuse(reasonSendFailed, err.Error(), "to", dst, "err", err)
	}
}

// mayUnicast holds back a unicast reply to an address on the segment
// that has no link-layer address when unicasts fill a quarter of the send
// buffer (in total), or when that address was sent one within arpGiveUp
// (per destination; configured relays, which take every relayed reply,
// only in total). Such a reply waits in the kernel's neighbour queue until
// ARP answers, 3 s when nobody does, and keeps its bytes charged to the
// socket meanwhile: forged sources (a giaddr, a ciaddr, port 4011's
// source) that answer no ARP would otherwise fill the buffer, and every
// reply, broadcasts included, would wait or be dropped with them.
// Broadcasts and replies off the segment (the router answers ARP) pay
// nothing, other unicasts an ioctl every outqEvery; only a repeated
// destination or a busy queue asks the neighbour table.
func (s *Server) mayUnicast(io *sockIO, dst netip.AddrPort) bool {
	a := dst.Addr()
	if io.c.neigh == nil || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || s.prefix.IsValid() && !s.prefix.Contains(a) {
		return true
	}
	busy := io.unicastBusy()
	if !busy && (s.isRelay(a) || io.unproven.first(a, time.Now())) {
		return true
	}
	if io.c.neigh.resolved(a) {
		return true
	}
	s.refuse.Refuse(reasonNoARP, "unicast", "to", dst, "queued_bytes", io.queued,
		"then", "dropped while a reply to it or a quarter of the send buffer waits for ARP")
	return false
}
