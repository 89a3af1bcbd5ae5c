//go:build linux

package netlab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The delay line's veth ends: each pairs with its side's testbed end inside
// that side's namespace, carries no address, and is read and written only
// by the delay line's packet sockets.
const (
	serverDelayIf = "pxl-sdelay"
	clientDelayIf = "pxl-cdelay"
)

// Delay line sizing.
const (
	// frameBuf holds one frame as a packet socket hands it over with
	// PACKET_VNET_HDR: the 10-byte virtio header and up to a 64 KiB GSO
	// super-frame (veth's gso_max_size), with room to spare.
	frameBuf = 128 << 10
	// lineQueue bounds the frames in flight per direction, room for a
	// 1 Gbit/s link at 10 ms one way (netlab/DESIGN.md#delay-line-sizing).
	// A full queue drops, as a switch port would.
	lineQueue = 4096
	// sockBuf is each packet socket's SO_RCVBUF/SO_SNDBUF (forced, root).
	sockBuf = 8 << 20
	// MaxDelay bounds SetDelay (one way).
	MaxDelay = 10 * time.Second
)

// delayLine forwards frames between the two sides' delay ends, holding
// each for the one-way delay: pxeperf's own netem for kernels without
// sch_netem. The sockets ask for the virtio-net header (PACKET_VNET_HDR),
// so TSO/GSO super-frames cross whole with their checksum state, a few
// frames where MTU-sized ones would be many (netlab/DESIGN.md#delay-line-sizing).
// A frame is due
// at its kernel receive time (SO_TIMESTAMPNS) plus the delay, so the time
// it waited for this process counts toward its delay.
//
// One OS thread runs the line (run): it waits in ppoll for the next frame
// or the next due time, with 1 ns timer slack and, when allowed,
// SCHED_FIFO, so a loaded host (the bench's own client and server, other
// jobs) does not add its scheduling delay to every frame. The wait is a raw
// system call that keeps the thread's Go P, so the line does not queue
// behind the process's own goroutines for a P after each wake-up; the line
// adds one P to GOMAXPROCS while it runs to leave the rest of the process
// what it had.
//
// The line measures what it delivered: for every frame it sends on, the
// time from the kernel's receive timestamp to the write, into a sketch
// (hist) the bench takes per point (TakeDelayReport). Sending a frame costs
// one clock read and a few atomic adds on top of its write system call.
type delayLine struct {
	delay atomic.Int64 // one way, ns
	fds   [2]int       // by Side: the packet socket on that side's delay end
	stop  int          // eventfd: written by close
	done  chan struct{}
	cpus  []int // Options.DelayCPUs: the thread's affinity; nil: any

	frames, dropped [2]atomic.Uint64 // by the side the frames came from
	hist            delayHist        // since the last TakeDelayReport
}

// DelayStats counts what the delay line moved, by the side that sent it.
type DelayStats struct {
	Frames, Dropped [2]uint64
}

// openPacketSocket opens an AF_PACKET socket bound to ifname in the calling
// thread's namespace, with virtio-net headers and receive timestamps,
// ignoring the frames it sends.
func openPacketSocket(ifname string) (int, error) {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return -1, fmt.Errorf("netlab: finding %s: %w", ifname, err)
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return -1, fmt.Errorf("netlab: packet socket: %w", err)
	}
	opts := []struct {
		level, opt, v int
		name          string
	}{
		{unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"},
		{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING"},
		{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, sockBuf, "SO_RCVBUFFORCE"},
		{unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sockBuf, "SO_SNDBUFFORCE"},
		{unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS"},
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("netlab: %s on the %s packet socket: %w", o.name, ifname, err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: link.Attrs().Index}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("netlab: binding a packet socket to %s: %w", ifname, err)
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// startDelayLine opens the packet sockets in both namespaces and starts
// forwarding with no delay.
func (t *Testbed) startDelayLine(cpus []int) error {
	l := &delayLine{fds: [2]int{-1, -1}, stop: -1, done: make(chan struct{}), cpus: cpus}
	for _, s := range []Side{Server, Client} {
		err := runIn(filepath.Join(netnsDir, t.ns(s)), func() error {
			var err error
			l.fds[s], err = openPacketSocket(delayIf(s))
			return err
		})
		if err != nil {
			l.closeFDs()
			return err
		}
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		l.closeFDs()
		return fmt.Errorf("netlab: eventfd for the delay line: %w", err)
	}
	l.stop = fd
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	go l.run()
	t.line = l
	return nil
}

// validCPUs checks Options.DelayCPUs against the CPUs this process may
// run on.
func validCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("netlab: reading the CPUs this process may use: %w", err)
	}
	for _, c := range cpus {
		if c < 0 || c >= len(allowed)*64 || !allowed.IsSet(c) {
			return fmt.Errorf("netlab: delay line CPU %d: not one this process may run on (%d CPUs allowed)", c, allowed.Count())
		}
	}
	return nil
}

func delayIf(s Side) string {
	if s == Client {
		return clientDelayIf
	}
	return serverDelayIf
}

type frame struct {
	arrived, due int64  // Unix ns: the kernel's receive time, and when to send it on
	buf          []byte // virtio-net header + frame
}

// run is the line's loop on its own thread (see delayLine).
func (l *delayLine) run() {
	defer close(l.done)
	runtime.LockOSThread() // never unlocked: the thread's policy dies with it
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0)
	if len(l.cpus) > 0 {
		var set unix.CPUSet
		for _, c := range l.cpus {
			set.Set(c)
		}
		_ = unix.SchedSetaffinity(0, &set) // checked by New (validCPUs)
	}
	var queue [2][]frame // by the side the frames came from
	var free [][]byte
	// Frames are timed on the monotonic clock (time.Since: one clock read,
	// where time.Now takes two), set against the kernel's wall-clock
	// receive stamps by wall, the offset at the last time.Now.
	base := time.Now()
	var wall int64
	oob := make([]byte, unix.CmsgSpace(16))
	pfd := []unix.PollFd{{Fd: int32(l.fds[Server]), Events: unix.POLLIN}, {Fd: int32(l.fds[Client]), Events: unix.POLLIN},
		{Fd: int32(l.stop), Events: unix.POLLIN}}
	for {
		// Wait for a frame, the stop, or the first frame due.
		wait := int64(50 * time.Millisecond)
		now := time.Now().UnixNano()
		for _, q := range queue {
			if len(q) > 0 {
				wait = min(wait, max(q[0].due-now, 0))
			}
		}
		ts := unix.NsecToTimespec(wait)
		unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), uintptr(len(pfd)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if pfd[2].Revents != 0 {
			return
		}
		for from := range 2 {
			for {
				if len(free) == 0 {
					free = append(free, make([]byte, frameBuf))
				}
				buf := free[len(free)-1]
				n, oobn, _, _, err := unix.Recvmsg(l.fds[from], buf, oob, unix.MSG_DONTWAIT)
				if err != nil {
					break // EAGAIN: drained; ENETDOWN while a link changes
				}
				if len(queue[from]) >= lineQueue {
					l.dropped[from].Add(1)
					l.hist.dropped.Add(1)
					continue
				}
				free = free[:len(free)-1]
				at := arrival(oob[:oobn])
				queue[from] = append(queue[from], frame{arrived: at, due: at + l.delay.Load(), buf: buf[:n]})
				l.frames[from].Add(1)
			}
		}
		t := time.Now()
		now, wall = t.UnixNano(), t.UnixNano()-int64(t.Sub(base))
		for from := range 2 {
			to := 1 - from
			q := queue[from]
			sent := 0
			for sent < len(q) && q[sent].due <= now {
				f := &q[sent]
				// Each frame reads the clock: a write can take long (the
				// peer's receive path may run in it), delaying the next.
				at := wall + int64(time.Since(base))
				if _, err := unix.Write(l.fds[to], f.buf); err != nil {
					l.dropped[from].Add(1) // the peer could not take it, as on a wire
					l.hist.dropped.Add(1)
				} else {
					l.hist.add(at-f.arrived, f.due-f.arrived)
				}
				free = append(free, q[sent].buf[:cap(q[sent].buf)])
				sent++
			}
			if sent > 0 {
				n := copy(q, q[sent:])
				clear(q[n:])
				queue[from] = q[:n]
			}
		}
	}
}

// arrival is the kernel's receive time of a frame (SO_TIMESTAMPNS, Unix
// ns); now when the kernel gave none.
func arrival(oob []byte) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
				ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				return ts.Nano()
			}
		}
	}
	return time.Now().UnixNano()
}

// close stops the line and closes its sockets.
func (l *delayLine) close() {
	if l.stop >= 0 {
		_, _ = unix.Write(l.stop, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		<-l.done
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) - 1)
	}
	l.closeFDs()
}

func (l *delayLine) closeFDs() {
	for _, fd := range append(l.fds[:], l.stop) {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// SetDelay sets the one-way delay of each direction (the round trip grows
// by twice d). It needs a testbed built with Options.DelayLine; a zero d
// still forwards through the line (or netem).
func (t *Testbed) SetDelay(d time.Duration) error {
	if d < 0 || d > MaxDelay {
		return fmt.Errorf("netlab: delay %v out of range 0..%v", d, MaxDelay)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if t.netem {
		return t.setNetemDelay(d)
	}
	if t.line == nil {
		return errors.New("netlab: no delay line on this testbed (build it with Options.DelayLine)")
	}
	t.line.delay.Store(int64(d))
	return nil
}

// Delay returns the one-way delay set, and whether the testbed has a delay
// line at all.
func (t *Testbed) Delay() (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.netem {
		return t.delay, true
	}
	if t.line == nil {
		return 0, false
	}
	return time.Duration(t.line.delay.Load()), true
}

// DelayStats returns the delay line's counters (zero without one, and
// with netem).
func (t *Testbed) DelayStats() DelayStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st DelayStats
	if t.line != nil {
		for s := range 2 {
			st.Frames[s], st.Dropped[s] = t.line.frames[s].Load(), t.line.dropped[s].Load()
		}
	}
	return st
}

// TakeDelayReport returns what the delay line delivered since the last
// take (or since it started) and starts a new period: the bench takes one
// when a point is set up and one when it has run. Zero without a line and
// with netem (which measures nothing).
func (t *Testbed) TakeDelayReport() DelayReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.line == nil {
		return DelayReport{}
	}
	r := t.line.hist.take()
	r.Asked = time.Duration(t.line.delay.Load())
	return r
}

// addDelayEnds makes each side's veth pair end in its own namespace (the
// testbed end and its delay end) instead of one pair across, and brings the
// delay ends up without addresses or IPv6.
func (t *Testbed) addDelayEnds(mtu int) error {
	for _, s := range []Side{Server, Client} {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = t.iface(s)
		attrs.MTU = mtu
		veth := &netlink.Veth{LinkAttrs: attrs, PeerName: delayIf(s), PeerTxQLen: -1}
		if err := t.nl[s].LinkAdd(veth); err != nil {
			return fmt.Errorf("netlab: creating veth %s/%s in %s: %w", t.iface(s), delayIf(s), t.ns(s), err)
		}
		err := runIn(filepath.Join(netnsDir, t.ns(s)), func() error {
			// Quiet the delay end: no IPv6 autoconfiguration chatter.
			return os.WriteFile("/proc/sys/net/ipv6/conf/"+delayIf(s)+"/disable_ipv6", []byte("1"), 0o644)
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("netlab: disabling IPv6 on %s: %w", delayIf(s), err)
		}
		peer, err := t.nl[s].LinkByName(delayIf(s))
		if err == nil {
			err = t.nl[s].LinkSetMTU(peer, mtu)
		}
		if err == nil {
			err = t.nl[s].LinkSetUp(peer)
		}
		if err != nil {
			return fmt.Errorf("netlab: %s up: %w", delayIf(s), err)
		}
	}
	return nil
}
