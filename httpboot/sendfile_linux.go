//go:build linux

package httpboot

import (
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendfileListener hands out connections whose ReadFrom copies a file with
// sendfile(2) made as a raw system call (see sendfileConn.ReadFrom).
type sendfileListener struct {
	net.Listener
	sndbuf int // bytes of send buffer for a big body (see fitSendBuffer); 0: the kernel's
	// big counts the big bodies being copied now, on every connection.
	big *atomic.Int32
	// budget is what the buffers fitSendBuffer sets may hold together.
	budget *sendBudget
}

// sendBudget caps the send buffers that connections set themselves
// (fitSendBuffer) together, in bytes (http.send_buffer_total_mib): a
// client that never reads keeps its whole buffer full, and 64 such with
// a 4 KiB receive buffer each held 162 MiB of kernel memory (2048 would
// pass this host's tcp_mem, 2.2 GiB, where TCP starts dropping for
// everyone). A connection takes its buffer from the budget when it sets
// one and gives it back when it closes; one that cannot get more than
// the kernel gave it keeps the kernel's autotuning, which grows a
// buffer only as its client acknowledges data.
type sendBudget struct {
	total int // 0: no cap

	mu   sync.Mutex
	used int
}

// grant makes c hold as much of want as the budget has (at least
// min(want, what c held): that stays its own) and returns it; a closed c
// gets none. Close may run on another goroutine than c's copy, so what c
// holds is kept under the budget's lock.
func (b *sendBudget) grant(c *sendfileConn, want int) int {
	if b == nil || b.total <= 0 {
		return want
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.gone {
		want = 0
	}
	got := min(want, b.total-(b.used-c.held))
	b.used += got - c.held
	c.held = got
	return got
}

// release gives back what c holds, for good (c is closed).
func (b *sendBudget) release(c *sendfileConn) {
	if b == nil || b.total <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c.gone = true
	b.used -= c.held
	c.held = 0
}

func (l sendfileListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	return &sendfileConn{TCPConn: tc, rc: rc, sndbuf: l.sndbuf, big: l.big, budget: l.budget}, nil
}

// sendfileConn is an accepted TCP connection. net/http's response.ReadFrom
// hands a body copy to the connection's ReadFrom, so an image reaches
// sendfileConn.ReadFrom with its *os.File (inside the io.LimitedReader of
// http.ServeContent).
type sendfileConn struct {
	*net.TCPConn
	rc syscall.RawConn
	// sent counts the bytes this connection's own sendfile loop copied
	// (tests check the loop, not a fallback, did the copy); cold counts
	// the calls made through the scheduler because their pages were not
	// cached; calls the sendfile calls and probes the page-cache probes
	// (cached) made; waits the waits for room that a poll decided, again
	// those that a sendfile failing with EAGAIN did.
	sent, cold, calls, probes, waits, again int64
	// ackWaits counts the checks awaitAcked made (one per wake-up).
	ackWaits int64
	probe    [1]byte // preadv2's target in cached
	// sndbuf is the send buffer a big body gets (0: the kernel's
	// autotuning), more while few are copied (fitSendBuffer); cur
	// is the one this connection set (0: none, the kernel's); big is the
	// listener's count of big bodies being copied.
	sndbuf, cur int
	big         *atomic.Int32
	// budget is the listener's; cur is taken from it (given back by
	// Close, or when the buffer is given up). held is what the budget
	// counts for c, gone that c is closed: both guarded by budget.mu.
	budget *sendBudget
	held   int
	gone   bool
}

// Close gives the connection's send buffer back to the budget.
func (c *sendfileConn) Close() error {
	c.budget.release(c)
	return c.TCPConn.Close()
}

// fitSendBuffer gives the socket the send buffer a big body should have
// while n big bodies are being copied (this one included): four times
// c.sndbuf for one alone, twice while there are at most boostBodies, else
// c.sndbuf; never smaller than the kernel's own when it first sets one.
//
// The poller wakes the copy each time a third of the buffer is free, and
// each wake-up costs Go's scheduler more than nginx's epoll_wait (park,
// findRunnable, netpoll, a spinning thread woken and put back): a bigger
// buffer is fewer of them. 4 MiB against the kernel's autotuned 1.1-1.6
// MiB at 32 streams over 1 Gbit/s, per 2 GiB: sendfile 6735 -> 1523 calls,
// epoll_pwait 11663 -> 2797, 0.76x the CPU per GiB (docs/ARCHITECTURE.md,
// "An HTTP fetch"). One stream over 1 Gbit/s took 0.91x the CPU again with
// 8 MiB and 0.77x with 16 MiB (8 rounds, one lab). But 8 MiB for each of
// 32 unshaped streams took 1.08x the time of 4 MiB (30 rounds), so did
// boosting the first 4 of 32 that start at once (TestPeers, 9 rounds:
// 0.95x the Gbit/s), and one CPU-bound unshaped stream (35-40 Gbit/s)
// boosted lost 0.93-0.95x its throughput. Hence ReadFrom starts a body
// with c.sndbuf, boosts it at its first wait for room past boostAfter if
// few run then and it moved slower than boostBelow, and shrinks it back at
// a later wait once more run. The bigger queue does not make a record
// faster than the client saw it: the record waits for the client's
// acknowledgement (monitor.settle). SO_SNDBUFFORCE passes
// net.core.wmem_max (root, CAP_NET_ADMIN); without it SO_SNDBUF is capped
// there, and a cap below the current buffer is not set at all (it would
// only lock a smaller one).
func (c *sendfileConn) fitSendBuffer(fd uintptr, n int32) {
	want := c.sndbuf
	switch {
	case n <= 1:
		want *= 4
	case n <= boostBodies:
		want *= 2
	}
	if want == c.cur {
		return
	}
	kern, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err != nil || (c.cur == 0 && kern >= want) {
		return
	}
	// The budget may give less (never less than what c holds).
	got := c.budget.grant(c, want)
	switch {
	case got == c.cur:
		return
	case c.cur == 0 && got <= kern:
		c.budget.grant(c, 0) // no better than the kernel's: keep autotuning
		return
	}
	if setSendBuffer(fd, got, kern) {
		c.cur = got
	} else {
		c.budget.grant(c, c.cur)
	}
}

// boostBodies is how many big bodies may be copied at once with a boosted
// send buffer each (fitSendBuffer), boostAfter how long into a
// body that is decided, and boostBelow (bytes/s, 10 Gbit/s) the rate it
// must have moved at: a link, not the CPU, holds it. Past boostAfter the
// first buffer's fill weighs little in the rate (at 1 Gbit/s 200 ms is
// 25 MB against 4 MiB).
const (
	boostBodies = 4
	boostAfter  = 200 * time.Millisecond
	boostBelow  = 10e9 / 8
)

// setSendBuffer makes the socket's send buffer bytes (what the kernel
// accounts; SO_SNDBUF is half of it), past net.core.wmem_max when the
// process may (SO_SNDBUFFORCE), else up to it; cur is the buffer now. It
// says whether the buffer was set.
func setSendBuffer(fd uintptr, bytes, cur int) bool {
	if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, bytes/2) == nil {
		return true
	}
	if v := wmemMax(); v > 0 && 2*v <= cur {
		return false
	}
	return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, bytes/2) == nil
}

// awaitAcked waits in Go's poller, which honours the write deadline, until
// the client has acknowledged all but at most one small segment of what
// the socket holds (monitor.settle polls the rest). waited is false when
// it could not wait so; err is the wait's (the write deadline passed).
// It shrinks the send buffer to the kernel's least while it waits: the
// socket then turns writable, and Go's poller wakes this goroutine,
// only once the queue is (nearly) empty, where settle's own wait was a
// timer sleep a step at a time (at 32 streams over 1 Gbit/s a 4 MiB queue
// drains in a second: ~10 sleeps for each fetch, each a goroutine wake-up
// and often a thread's). The buffer is set back before it returns. Only a
// buffer this connection sized itself (fitSendBuffer) is shrunk: setting
// one locks it, and the kernel's autotuning would not come back.
func (c *sendfileConn) awaitAcked(outq func() int) (waited bool, err error) {
	if c.cur == 0 {
		return false, nil
	}
	shrunk := false
	_ = c.rc.Control(func(fd uintptr) {
		shrunk = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 0) == nil
	})
	if !shrunk {
		return false, nil
	}
	defer func() {
		_ = c.rc.Control(func(fd uintptr) {
			kern, _ := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
			if !setSendBuffer(fd, c.cur, kern) {
				c.cur = 0
				c.budget.grant(c, 0)
			}
		})
	}()
	err = c.rc.Write(func(fd uintptr) bool {
		c.ackWaits++
		// Writable with a buffer this small: at most a segment is left.
		return outq() <= 0 || writable(fd)
	})
	return err == nil, err
}

// setCork sets or clears TCP_CORK (countingWriter.ReadFrom holds a
// response body in full segments with it).
func (c *sendfileConn) setCork(on bool) {
	v := 0
	if on {
		v = 1
	}
	_ = c.rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v) })
}

// wmemMax is net.core.wmem_max, SO_SNDBUF's cap without CAP_NET_ADMIN
// (0: unknown), read once.
var wmemMax = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		return 0
	}
	v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return v
})

// maxSendfileChunk bounds one sendfile call (nginx's sendfile_max_chunk
// is 2 MiB too). Over a link, one call takes what the socket buffer has
// room for, a few hundred KiB, anyway.
const maxSendfileChunk = 2 << 20

// longBits is the width of a system call argument, for preadv2's split
// offset.
const longBits = 32 << (^uintptr(0) >> 63)

// cached says whether the page holding byte off of the file is in the
// page cache, without waiting for it: a one-byte preadv2 with RWF_NOWAIT
// answers EAGAIN instead of reading the disk. A raw sendfile holds its P
// while the kernel reads pages from the disk (a cold image on a slow disk
// or NFS: milliseconds to seconds per call, in which the P's other
// goroutines, DHCP and TFTP among them, wait), so a chunk whose last page
// is not cached goes through the scheduler instead. Readahead fills pages
// in order, so the chunk's last page stands for the rest. Any error
// (a filesystem without RWF_NOWAIT) counts as not cached.
func (c *sendfileConn) cached(fd uintptr, off int64) bool {
	iov := unix.Iovec{Base: &c.probe[0]}
	iov.SetLen(1)
	lo, hi := uintptr(off), uintptr(uint64(off)>>(longBits/2)>>(longBits/2))
	_, _, e := unix.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, lo, hi, unix.RWF_NOWAIT)
	return e == 0
}

// writable says whether the socket has room for more (a zero-timeout
// poll). A sendfile that copied less than asked usually means the socket
// buffer filled up, and another call would only fail with EAGAIN; that
// call is not free: sendfile reads up to a pipe's worth (64 KiB) of pages
// from the page cache before it finds the socket full, and drops them (at
// 32 streams over 1 Gbit/s half of all calls were such). The poll tells a
// full buffer from a copy cut short by a signal, after which no wake-up
// would come; it also marks the socket as waiting for room, so the wake-up
// does come.
func writable(fd uintptr) bool {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&unix.Timespec{})), 0, 0, 0)
	return e != 0 || (n > 0 && pfd[0].Revents&(unix.POLLOUT|unix.POLLERR|unix.POLLHUP) != 0)
}

// ReadFrom copies a regular file with sendfile(2) on the non-blocking
// socket, waiting in Go's poller (which honours the write deadline) when
// the socket buffer is full, like (*net.TCPConn).ReadFrom does, with one
// difference that matters for CPU: each sendfile whose pages are cached
// (cached) is a raw system call, so the scheduler does not treat it as a
// blocking one. Go's own loop enters
// the system call through the scheduler; a call that copies a socket
// buffer's worth of pages runs past sysmon's 20 us, sysmon hands the P to
// another thread (a futex wake) that finds nothing to do and spins, and
// sysmon, busy retaking, keeps polling every 20 us: at 32 streams over a
// 1 Gbit/s link that was a third of the server's CPU (perf: sysmon 17%,
// findRunnable/park/wake 17%). On a non-blocking socket the call never
// waits, so holding the P through it is what nginx's worker does too.
// Any other source goes to (*net.TCPConn).ReadFrom.
func (c *sendfileConn) ReadFrom(r io.Reader) (int64, error) {
	src, remain := r, int64(1<<63-1)
	lr, limited := r.(*io.LimitedReader)
	if limited {
		src, remain = lr.R, lr.N
	}
	f, ok := src.(*os.File)
	if !ok || remain <= 0 {
		return c.TCPConn.ReadFrom(r)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return c.TCPConn.ReadFrom(r)
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return c.TCPConn.ReadFrom(r)
	}
	frc, err := f.SyscallConn()
	if err != nil {
		return c.TCPConn.ReadFrom(r)
	}
	// A big body starts with sndbuf, and is boosted (fitSendBuffer) at
	// its first wait for room boostAfter in, if few run then and the link
	// holds it below boostBelow (decided).
	big := c.sndbuf > 0 && c.big != nil && remain >= bigBody
	decided := false
	var start time.Time
	if big {
		start = time.Now()
		c.big.Add(1)
		defer c.big.Add(-1)
		_ = c.rc.Control(func(fd uintptr) { c.fitSendBuffer(fd, boostBodies+1) })
	}
	var written int64
	var serr error
	// warm is the end of the chunk a probe last found cached: calls that
	// start inside it send up to its end without a probe of their own.
	// Over a link each call moves what the socket buffer has room for, a
	// few hundred KiB, so one probe covers several calls (at 32 streams
	// over 1 Gbit/s it was a probe per call, 4643 preadv2 per GiB).
	var warm int64
	// waited is set when the loop last gave up for want of room: Go's
	// poller may then wake it for readiness it saw before the buffer
	// filled (an edge that came during the last sendfile), and a sendfile
	// would find the buffer still full; a poll finds that for less.
	waited := false
	cerr := frc.Control(func(in uintptr) {
		werr := c.rc.Write(func(out uintptr) bool {
			switch {
			case !waited || !big:
			case !decided:
				if d := time.Since(start); d >= boostAfter {
					decided = true
					if float64(written)/d.Seconds() < boostBelow {
						c.fitSendBuffer(out, c.big.Load())
					}
				}
			case c.cur > c.sndbuf:
				// Boosted while few ran: back to sndbuf once more do.
				if n := c.big.Load(); n > boostBodies {
					c.fitSendBuffer(out, n)
				}
			}
			if waited && !writable(out) {
				c.waits++
				return false
			}
			waited = false
			for remain > 0 {
				o := off + written
				chunk := min(remain, maxSendfileChunk)
				call := unix.RawSyscall6
				c.calls++
				switch {
				case o < warm:
					chunk = min(chunk, warm-o)
				case c.cached(in, o+chunk-1):
					warm = o + chunk
					c.probes++
				default:
					call = unix.Syscall6 // the disk read may take long: let the P go
					c.probes++
					c.cold++
				}
				n, _, e := call(unix.SYS_SENDFILE, out, in, uintptr(unsafe.Pointer(&o)), uintptr(chunk), 0, 0)
				switch {
				case e == unix.EINTR:
					continue
				case e == unix.EAGAIN:
					c.again++
					waited = true
					return false // wait until writable
				case e != 0:
					serr = os.NewSyscallError("sendfile", e)
					return true
				case n == 0:
					return true // the file ended early
				}
				written += int64(n)
				remain -= int64(n)
				if int64(n) < chunk && remain > 0 && !writable(out) {
					c.waits++
					waited = true
					return false // the socket buffer is full: wait
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	c.sent += written
	if limited {
		lr.N -= written
	}
	if _, err := f.Seek(off+written, io.SeekStart); err != nil && serr == nil {
		serr = err
	}
	if serr != nil {
		serr = &net.OpError{Op: "sendfile", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: serr}
	}
	return written, serr
}

// wrapListener puts sendfileConn on every accepted TCP connection; a body
// of bigBody or more gets a send buffer of sndbuf bytes (0: the kernel's),
// more while few are copied (fitSendBuffer), all such buffers together at
// most total bytes (0: no cap).
func wrapListener(ln net.Listener, sndbuf, total int) net.Listener {
	return sendfileListener{Listener: ln, sndbuf: sndbuf, big: new(atomic.Int32), budget: &sendBudget{total: total}}
}
