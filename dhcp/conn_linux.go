//go:build linux

package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/pxeperf/pxeperf/internal/threadsock"
	"golang.org/x/sys/unix"
)

// sock is a DHCP socket read by one goroutine on an OS thread of its own
// (serveSock), in blocking recvfrom(2) calls outside Go's poller (a
// threadsock.Sock): a blocked read is woken by the kernel on the thread
// that then answers, as kea's is, where the poller adds wake-ups and
// hand-offs between threads per datagram (see DESIGN.md#the-socket-thread).
//
// Every reply leaves without waiting (MSG_DONTWAIT): what the kernel will
// not take is dropped and counted, and the reader goes on (see mayUnicast
// for the replies that would wait for ARP).
type sock struct {
	*threadsock.Sock
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
	fd, err := threadsock.UDP4()
	if err != nil {
		return nil, err
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
	ts, err := threadsock.New(fd, fmt.Sprintf("dhcp :%d", port))
	if err != nil {
		return nil, err
	}
	return &sock{Sock: ts, unicastQueue: sndbuf / 4}, nil
}

// maxBatch and maxBatchReads bound a batch: while ACKs wait for their
// leases, serveSock reads on without blocking until the socket is empty,
// maxBatch ACKs wait or maxBatchReads datagrams were read, then writes and
// fsyncs their leases once and sends them.
const (
	maxBatch      = 64
	maxBatchReads = 256
)

// sockIO is serveSock's state: the read buffer, the send queue's last
// reading and the destinations that may wait for ARP.
type sockIO struct {
	c         *sock
	buf       []byte
	queued    int // SIOCOUTQ: bytes the send buffer held at the last reading
	sinceOutq int // unicasts since that reading
	// unproven: the destinations sent a reply that may wait for ARP.
	unproven *unproven
	// outq reads SIOCOUTQ into queued, as a closure built once (one built
	// per call would be allocated per reading).
	outq func(fd uintptr)
}

func newSockIO(c *sock) *sockIO {
	io := &sockIO{c: c, buf: make([]byte, 1500), unproven: newUnproven(maxUnproven)}
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
	var n int
	var err error
	if wait {
		n, src, err = io.c.RecvFrom(io.buf, time.Time{})
	} else {
		n, src, err = io.c.TryRecvFrom(io.buf)
	}
	if err == nil {
		return io.buf[:n], src, true, false
	}
	if _, failed := err.(syscall.Errno); failed {
		return nil, netip.AddrPort{}, false, false // none queued, or an ICMP error queued by an earlier send, say
	}
	return nil, netip.AddrPort{}, false, true // closed (a read's error is its bare Errno)
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
	if io.c.Control(io.outq) != nil {
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
	err := io.c.TrySendTo(out, dst)
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
