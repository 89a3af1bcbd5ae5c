//go:build linux

package tftp

import (
	"context"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// threadLink is the link of a lock-step transfer that waits for each ACK in
// a blocking recv(2) on its own OS thread, as atftpd and in.tftpd do,
// instead of in Go's poller.
//
// In lock-step every block waits for one ACK, so the time from the ACK's
// arrival to the next block's send is the transfer's speed. Through the
// poller each ACK costs a failed read (EAGAIN), a park, an epoll wake-up
// of whichever thread polls, and a goroutine hand-off to a thread that may
// have to be woken with a futex: about twice atftpd's CPU per GiB and 0.6x
// its speed. A blocked recv is woken by the kernel on the very thread that
// then sends the next block.
//
// The socket is switched to blocking mode for this (the read timeout is
// SO_RCVTIMEO), so it must not be read through the net.UDPConn any more;
// writes through it simply block when the send buffer is full.
type threadLink struct {
	*connLink
	rc     syscall.RawConn
	rcvto  time.Duration // SO_RCVTIMEO set last; 0: none (blocks forever)
	closed *atomic.Bool  // set before the socket is shut down under a recv
	recvs  int64         // datagrams read here
	done   func(recvs int64)
}

// rcvtoSlack is how much later than its deadline a read may time out, so
// that SO_RCVTIMEO is not set again for every block: each ACK wait starts a
// full timeout (1s by default) after the last, a few microseconds apart.
const rcvtoSlack = time.Millisecond

// newThreadLink turns c into a threadLink; the calling goroutine must be
// the one that runs the transfer and closes the link. done is called once
// with the number of datagrams read when the link closes.
func newThreadLink(c *connLink, closed *atomic.Bool, done func(recvs int64)) (*threadLink, error) {
	rc, err := c.conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetNonblock(int(fd), false) }); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	runtime.LockOSThread()
	return &threadLink{connLink: c, rc: rc, closed: closed, done: done}, nil
}

func (l *threadLink) recv(b []byte, deadline time.Time) (int, error) {
	for {
		d := time.Until(deadline)
		if d < time.Microsecond { // SO_RCVTIMEO counts in µs, and 0 is forever
			return 0, os.ErrDeadlineExceeded
		}
		if d > l.rcvto || d < l.rcvto-rcvtoSlack {
			if err := l.setRcvTimeout(d); err != nil {
				return 0, err
			}
		}
		var (
			n    int
			rerr error
		)
		err := l.rc.Control(func(fd uintptr) {
			n, _, rerr = unix.Recvfrom(int(fd), b, 0)
		})
		switch {
		case err != nil:
			return 0, err
		case l.closed.Load():
			// stop shut the socket down to end this read.
			return 0, net.ErrClosed
		case rerr == nil:
			l.recvs++
			return n, nil
		case rerr == unix.EAGAIN || rerr == unix.EINTR:
			// Timed out (the loop checks the deadline), or a signal:
			// with SO_RCVTIMEO set, recv is never restarted.
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
	l.connLink.close()
	runtime.UnlockOSThread()
	l.done(l.recvs)
}

// shutdownRead ends a recv blocked on rc at once (closing the socket would
// wait for it: the read holds a reference to the descriptor). A connected
// UDP socket then reads 0 bytes.
func shutdownRead(rc syscall.RawConn) {
	_ = rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RD) })
}

// defaultLockstepThreads is Config.LockstepThreads' default.
const defaultLockstepThreads = 16

// threadLink gives a lock-step transfer a threadLink when a thread is free
// under LockstepThreads, else nil (the transfer waits in the poller). It
// runs on the transfer's goroutine.
func (s *Server) threadLink(ctx context.Context, c *connLink) link {
	if s.threads.Add(1) > int32(s.cfg.LockstepThreads) {
		s.threads.Add(-1)
		s.polled.Add(1)
		return nil
	}
	closed := new(atomic.Bool)
	l, err := newThreadLink(c, closed, func(recvs int64) {
		s.threadRecvs.Add(recvs)
		s.threads.Add(-1)
	})
	if err != nil {
		s.threads.Add(-1)
		s.polled.Add(1)
		s.log.Debug("lock-step transfer waits in the poller", "err", err)
		return nil
	}
	s.threaded.Add(1)
	c.stop = context.AfterFunc(ctx, func() {
		closed.Store(true)
		shutdownRead(l.rc)
		c.conn.Close()
	})
	return l
}
