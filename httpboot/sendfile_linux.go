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
// client that never reads keeps its whole buffer full, and enough such
// would pass the host's tcp_mem, where TCP starts dropping for everyone
// (see httpboot/DESIGN.md#the-send-buffers-together). A connection takes
// its buffer from the budget when it sets one and gives it back when it
// closes; one that cannot get more than the kernel gave it keeps the
// kernel's autotuning, which grows a buffer only as its client
// acknowledges data.
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
	// count is what this connection's copies did (tests check it).
	count sendfileCounts
	probe [1]byte // preadv2's target in cached
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

// sendfileCounts are what a connection's sendfile loop did, for the tests
// that check it made the copy and which system calls it made.
type sendfileCounts struct {
	bytes       int64 // bytes the loop copied (not a fallback)
	calls       int64 // sendfile calls
	coldCalls   int64 // of those, made through the scheduler: pages not cached
	probes      int64 // page-cache probes (cached)
	pollWaits   int64 // waits for room a poll (writable) decided
	eagainWaits int64 // waits for room a sendfile failing with EAGAIN decided
	ackChecks   int64 // checks awaitAcked made (one per wake-up)
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
// each wake-up costs Go's scheduler more than nginx's epoll_wait: a bigger
// buffer is fewer of them. But a bigger buffer for many streams at once,
// or for a stream the CPU holds, was slower, so ReadFrom starts a body
// with c.sndbuf, boosts it at its first wait for room past boostAfter if
// few run then and it moved slower than boostBelow, and shrinks it back at
// a later wait once more run (see httpboot/DESIGN.md#sendfile-buffer). The
// bigger queue does not make a record faster than the client saw it: the
// record waits for the client's acknowledgement (monitor.settle).
// SO_SNDBUFFORCE passes net.core.wmem_max (root, CAP_NET_ADMIN); without
// it SO_SNDBUF is capped there, and a cap below the current buffer is not
// set at all (it would only lock a smaller one).
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
// first buffer's fill weighs little in the rate.
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
// timer sleep a step at a time, each a goroutine wake-up (see
// httpboot/DESIGN.md#settling). The buffer is set back before it returns.
// Only a buffer this connection sized itself (fitSendBuffer) is shrunk:
// setting one locks it, and the kernel's autotuning would not come back.
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
		c.count.ackChecks++
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
// from the page cache before it finds the socket full, and drops them
// (see httpboot/DESIGN.md#raw-sendfile). The poll tells a full buffer
// from a copy cut short by a signal, after which no wake-up would come;
// it also marks the socket as waiting for room, so the wake-up does come.
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
// blocking one and sysmon does not hand the P to another thread mid-copy
// (see httpboot/DESIGN.md#raw-sendfile). On a non-blocking socket the call
// never waits, so holding the P through it is what nginx's worker does
// too. Any other source goes to (*net.TCPConn).ReadFrom.
func (c *sendfileConn) ReadFrom(r io.Reader) (int64, error) {
	fc, ok := c.fileCopyOf(r)
	if !ok {
		return c.TCPConn.ReadFrom(r)
	}
	if fc.big {
		fc.start = time.Now()
		c.big.Add(1)
		defer c.big.Add(-1)
		_ = c.rc.Control(func(fd uintptr) { c.fitSendBuffer(fd, boostBodies+1) })
	}
	fc.run()
	return fc.finish()
}

// fileCopy is one body's copy by sendfile: the file and where the copy
// is, and what the loop keeps between the poller's wake-ups.
type fileCopy struct {
	c   *sendfileConn
	f   *os.File
	frc syscall.RawConn
	lr  *io.LimitedReader // the body's limit; nil when the file is the body
	// off is the file's offset at the start; written counts from it, and
	// remain is what is left of the body.
	off, written, remain int64
	// warm is the end of the chunk a probe last found cached: calls that
	// start inside it send up to its end without a probe of their own
	// (over a link one call moves only what the socket buffer has room
	// for, so one probe covers several calls).
	warm int64
	// waited is set when the loop last gave up for want of room: Go's
	// poller may then wake it for readiness it saw before the buffer
	// filled (an edge that came during the last sendfile), and a sendfile
	// would find the buffer still full; a poll finds that for less.
	waited bool
	// big: a body of bigBody or more, which starts with sndbuf and is
	// boosted (fitSendBuffer) at its first wait for room boostAfter in, if
	// few run then and the link holds it below boostBelow (decided then).
	big, decided bool
	start        time.Time
	err          error // the copy's first error
}

// fileCopyOf is the copy of r when r is a regular *os.File, bare or in
// the io.LimitedReader of http.ServeContent's io.CopyN, with bytes left;
// ok is false for any other source.
func (c *sendfileConn) fileCopyOf(r io.Reader) (fc *fileCopy, ok bool) {
	src, remain := r, int64(1<<63-1)
	lr, limited := r.(*io.LimitedReader)
	if limited {
		src, remain = lr.R, lr.N
	}
	f, ok := src.(*os.File)
	if !ok || remain <= 0 {
		return nil, false
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false
	}
	frc, err := f.SyscallConn()
	if err != nil {
		return nil, false
	}
	big := c.sndbuf > 0 && c.big != nil && remain >= bigBody
	return &fileCopy{c: c, f: f, frc: frc, lr: lr, off: off, remain: remain, big: big}, true
}

// run copies until the body is sent, the file ends early or a call
// fails: sendOnWritable runs each time Go's poller finds the socket
// writable, and says when the copy is over.
func (fc *fileCopy) run() {
	cerr := fc.frc.Control(func(in uintptr) {
		werr := fc.c.rc.Write(func(out uintptr) bool { return fc.sendOnWritable(in, out) })
		if fc.err == nil {
			fc.err = werr
		}
	})
	if fc.err == nil {
		fc.err = cerr
	}
}

// sendOnWritable is one wake-up of the copy: it fits the send buffer,
// makes sure a wake-up after a wait for room really has room, and sends.
// It returns false to wait for room again, true when the copy is over.
func (fc *fileCopy) sendOnWritable(in, out uintptr) bool {
	if fc.waited && fc.big {
		fc.refitBuffer(out)
	}
	if fc.waited && !writable(out) {
		fc.c.count.pollWaits++
		return false
	}
	fc.waited = false
	return fc.sendChunks(in, out)
}

// refitBuffer runs at a big body's waits for room: the first one
// boostAfter in decides its boost (fitSendBuffer), and a boosted body
// goes back to sndbuf once more than boostBodies run.
func (fc *fileCopy) refitBuffer(out uintptr) {
	c := fc.c
	switch {
	case !fc.decided:
		if d := time.Since(fc.start); d >= boostAfter {
			fc.decided = true
			if float64(fc.written)/d.Seconds() < boostBelow {
				c.fitSendBuffer(out, c.big.Load())
			}
		}
	case c.cur > c.sndbuf:
		if n := c.big.Load(); n > boostBodies {
			c.fitSendBuffer(out, n)
		}
	}
}

// sendChunks sends chunk after chunk until the body is sent (true) or
// the socket is full (false: wait for room). A sendfile that copied less
// than asked is followed by a poll (writable) rather than another call.
func (fc *fileCopy) sendChunks(in, out uintptr) bool {
	for fc.remain > 0 {
		o := fc.off + fc.written
		chunk, call := fc.plan(in, o)
		fc.c.count.calls++
		n, _, e := call(unix.SYS_SENDFILE, out, in, uintptr(unsafe.Pointer(&o)), uintptr(chunk), 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			fc.c.count.eagainWaits++
			fc.waited = true
			return false // wait until writable
		case e != 0:
			fc.err = os.NewSyscallError("sendfile", e)
			return true
		case n == 0:
			return true // the file ended early
		}
		fc.written += int64(n)
		fc.remain -= int64(n)
		if int64(n) < chunk && fc.remain > 0 && !writable(out) {
			fc.c.count.pollWaits++
			fc.waited = true
			return false // the socket buffer is full: wait
		}
	}
	return true
}

// syscall6 is how a sendfile is entered: unix.RawSyscall6 (keeps the P)
// or unix.Syscall6 (through the scheduler).
type syscall6 func(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1, r2 uintptr, err unix.Errno)

// plan sizes the sendfile at file offset o (at most maxSendfileChunk, and
// within a warm chunk when o is in one) and picks its entry: raw when its
// pages are cached (warm, or a probe says so), else through the scheduler,
// since the disk read may take long and the P should go meanwhile.
func (fc *fileCopy) plan(in uintptr, o int64) (chunk int64, call syscall6) {
	chunk = min(fc.remain, maxSendfileChunk)
	switch {
	case o < fc.warm:
		return min(chunk, fc.warm-o), unix.RawSyscall6
	case fc.c.cached(in, o+chunk-1):
		fc.warm = o + chunk
		fc.c.count.probes++
		return chunk, unix.RawSyscall6
	default:
		fc.c.count.probes++
		fc.c.count.coldCalls++
		return chunk, unix.Syscall6
	}
}

// finish accounts the bytes copied (on the connection, the body's limit
// and the file's offset) and wraps the copy's error as net's own
// ReadFrom does.
func (fc *fileCopy) finish() (int64, error) {
	c, serr := fc.c, fc.err
	c.count.bytes += fc.written
	if fc.lr != nil {
		fc.lr.N -= fc.written
	}
	if _, err := fc.f.Seek(fc.off+fc.written, io.SeekStart); err != nil && serr == nil {
		serr = err
	}
	if serr != nil {
		serr = &net.OpError{Op: "sendfile", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: serr}
	}
	return fc.written, serr
}

// wrapListener puts sendfileConn on every accepted TCP connection; a body
// of bigBody or more gets a send buffer of sndbuf bytes (0: the kernel's),
// more while few are copied (fitSendBuffer), all such buffers together at
// most total bytes (0: no cap).
func wrapListener(ln net.Listener, sndbuf, total int) net.Listener {
	return sendfileListener{Listener: ln, sndbuf: sndbuf, big: new(atomic.Int32), budget: &sendBudget{total: total}}
}
