//go:build linux

package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/netstate"
)

// netnsDir is where named namespaces are mounted (as by `ip netns add`).
const netnsDir = "/run/netns"

// maxNames bounds the search for a free namespace name.
const maxNames = 1000

// Testbed is a server and a client namespace joined by a veth pair.
// Methods are safe for concurrent use; Close may be called at any time and
// more than once.
type Testbed struct {
	ServerNS, ClientNS string       // names under /run/netns
	ServerIf, ClientIf string       // veth ends, each in its namespace
	ServerIP, ClientIP netip.Addr   // ClientIP is invalid with NoClientAddr
	Prefix             netip.Prefix // the test subnet

	log *slog.Logger
	reg *Registry

	mu     sync.Mutex // guards the handles and serializes changes
	closed bool
	nl     [2]*netlink.Handle // by Side
	inode  [2]*unix.Stat_t    // the namespaces' nsfs inodes, by Side
	line   *delayLine         // with Options.DelayLine and no netem (delay_linux.go)
	netem  bool               // with Options.DelayLine: netem qdiscs delay (netem_linux.go)
	delay  time.Duration      // one way, as SetDelay set it (netem)
	cpus   []int              // Options.DelayCPUs

	closeOnce sync.Once
	closeErr  error
}

// New builds a testbed: two fresh namespaces, lo up in both, a veth pair
// between them with opt.MTU on both ends, addresses, links up. On error
// nothing is left behind. Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).
func New(opt Options) (*Testbed, error) {
	return newTestbed(opt, os.Getpid())
}

// newTestbed names the namespaces after pid (a test passes a dead one to
// exercise ReapLeftovers).
func newTestbed(opt Options, pid int) (*Testbed, error) {
	mtu := opt.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if mtu < 68 || mtu > 65535 {
		return nil, fmt.Errorf("netlab: MTU %d out of range 68..65535", mtu)
	}
	prefix := opt.Prefix
	if !prefix.IsValid() {
		prefix = DefaultPrefix
	}
	prefix = prefix.Masked()
	if !prefix.Addr().Is4() || prefix.Bits() > 30 {
		return nil, fmt.Errorf("netlab: prefix %s: want an IPv4 subnet of /30 or wider (e.g. %s)", prefix, DefaultPrefix)
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	t := &Testbed{
		ServerIf: ServerIf,
		ClientIf: ClientIf,
		ServerIP: prefix.Addr().Next(),
		Prefix:   prefix,
		log:      log,
		reg:      opt.Registry,
	}
	if opt.ServerIf != "" {
		t.ServerIf = opt.ServerIf
	}
	if opt.ClientIf != "" {
		t.ClientIf = opt.ClientIf
	}
	if len(t.ServerIf) > 15 || len(t.ClientIf) > 15 || t.ServerIf == t.ClientIf {
		return nil, fmt.Errorf("netlab: interface names %q and %q: want two different names of at most 15 bytes", t.ServerIf, t.ClientIf)
	}
	t.ClientIP = t.ServerIP.Next()
	switch opt.DelayVia {
	case DelayAuto, DelayNetem, DelayOwnLine:
	default:
		return nil, fmt.Errorf("netlab: delay via %q: want %q, %q or empty (netem where the kernel has it)", opt.DelayVia, DelayNetem, DelayOwnLine)
	}
	via := ""
	if opt.DelayLine {
		via = opt.DelayVia
		if via == DelayAuto {
			via = "auto"
		}
	}
	if err := validCPUs(opt.DelayCPUs); err != nil {
		return nil, err
	}
	t.cpus = slices.Clone(opt.DelayCPUs)
	// Register first: a signal arriving mid-build tears down what exists.
	t.reg.add(t)
	if err := t.build(mtu, opt.NoClientAddr, via, pid); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	if opt.NoClientAddr {
		t.ClientIP = netip.Addr{}
	}
	log.Debug("netlab testbed up", "server_ns", t.ServerNS, "client_ns", t.ClientNS, "mtu", mtu, "prefix", prefix)
	return t, nil
}

// build makes the namespaces and the veth ends; via is how to delay: ""
// (not at all), "auto", DelayNetem or DelayOwnLine.
func (t *Testbed) build(mtu int, noClientAddr bool, via string, pid int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	nsh, err := t.createNamespaces(pid)
	if err != nil {
		return err
	}
	defer nsh[Server].Close()
	defer nsh[Client].Close()
	for _, s := range []Side{Server, Client} {
		if t.inode[s], err = nsInode(t.ns(s)); err != nil {
			return err
		}
	}
	for _, s := range []Side{Server, Client} {
		// Routing only: without a family the handle also opens XFRM and
		// netfilter sockets, which a kernel without xfrm_user refuses.
		h, err := netlink.NewHandleAt(nsh[s], unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlab: netlink socket in %s: %w", t.ns(s), err)
		}
		t.nl[s] = h
	}
	ownLine := via == DelayOwnLine
	if !ownLine {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = t.ServerIf
		attrs.MTU = mtu
		veth := &netlink.Veth{LinkAttrs: attrs, PeerName: t.ClientIf, PeerNamespace: netlink.NsFd(nsh[Client]), PeerTxQLen: -1}
		if err := t.nl[Server].LinkAdd(veth); err != nil {
			return fmt.Errorf("netlab: creating veth %s/%s: %w (is the veth module available?)", t.ServerIf, t.ClientIf, err)
		}
	}
	if via == "auto" || via == DelayNetem {
		err := t.addNetem()
		switch {
		case err == nil:
			t.netem = true
		case via == "auto" && errors.Is(err, errNoNetem):
			// This kernel has no sch_netem: the pair goes, the line comes.
			link, lerr := t.nl[Server].LinkByName(t.ServerIf)
			if lerr == nil {
				lerr = t.nl[Server].LinkDel(link)
			}
			if lerr != nil {
				return fmt.Errorf("netlab: deleting %s to build the delay line: %w", t.ServerIf, lerr)
			}
			ownLine = true
		default:
			return err
		}
	}
	if ownLine {
		if err := t.addDelayEnds(mtu); err != nil {
			return err
		}
	}
	for _, s := range []Side{Server, Client} {
		h := t.nl[s]
		lo, err := h.LinkByName("lo")
		if err == nil {
			err = h.LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("netlab: lo up in %s: %w", t.ns(s), err)
		}
		link, err := h.LinkByName(t.iface(s))
		if err != nil {
			return fmt.Errorf("netlab: finding %s in %s: %w", t.iface(s), t.ns(s), err)
		}
		if s == Server || !noClientAddr {
			ip := t.ip(s)
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(t.Prefix.Bits(), 32)}}
			if err := h.AddrAdd(link, addr); err != nil {
				return fmt.Errorf("netlab: adding %s to %s: %w", ip, t.iface(s), err)
			}
		}
		if err := h.LinkSetUp(link); err != nil {
			return fmt.Errorf("netlab: %s up: %w", t.iface(s), err)
		}
	}
	if ownLine {
		return t.startDelayLine(t.cpus)
	}
	return nil
}

// createNamespaces makes the two named namespaces with the first free n.
// It runs on a thread of its own (onThread), as netns.NewNamed moves the
// calling thread into the namespace it creates.
func (t *Testbed) createNamespaces(pid int) ([2]netns.NsHandle, error) {
	var h [2]netns.NsHandle
	if err := shareNetnsDir(); err != nil {
		return h, err
	}
	created := false
	err := onThread("switching back to the original namespace", func() error {
		for n := 0; n < maxNames; n++ {
			srv, cli := nsName(pid, n, Server), nsName(pid, n, Client)
			hs, err := newNamed(srv)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err == nil {
				err = forgetTCPMetrics()
			}
			if err != nil {
				return err
			}
			hc, err := newNamed(cli)
			if err == nil {
				err = forgetTCPMetrics()
			}
			if err != nil {
				hs.Close()
				_ = deleteNamed(srv)
				if errors.Is(err, fs.ErrExist) {
					continue
				}
				return err
			}
			t.ServerNS, t.ClientNS = srv, cli
			h, created = [2]netns.NsHandle{hs, hc}, true
			return nil
		}
		return fmt.Errorf("netlab: no free namespace name %s%d-0..%d under %s (run netlab.ReapLeftovers?)", Prefix, pid, maxNames-1, netnsDir)
	}, func() {
		if created {
			h[Server].Close()
			h[Client].Close()
		}
	})
	return h, err
}

// forgetTCPMetrics sets net.ipv4.tcp_no_metrics_save in the namespace the
// calling (locked) thread is in, so every point of a sweep starts from the
// same TCP state. Otherwise the kernel seeds each new connection to an
// address with what the last one learnt (ip tcp_metrics show: RTT,
// ssthresh, cwnd, reordering), and a point inherits the previous point's
// MTU, rate and delay (see netlab/DESIGN.md#tcp-metrics).
func forgetTCPMetrics() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/tcp_no_metrics_save", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("netlab: turning off TCP metrics in the new namespace: %w", err)
	}
	return nil
}

// onThread runs fn on a locked OS thread and then returns the thread to
// the namespace it started in. When that fails, the thread stays locked
// and dies with its goroutine instead of running other goroutines in the
// wrong namespace; stuck (when not nil) runs then, and the error says what
// failed (leaving). A panic in fn is raised again in the caller.
func onThread(leaving string, fn func() error, stuck func()) error {
	type result struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- result{err: fmt.Errorf("netlab: reading the current namespace: %w", err)}
			return
		}
		defer orig.Close()
		var r result
		func() {
			defer func() {
				if v := recover(); v != nil {
					r.panicked, r.value = true, v
				}
			}()
			r.err = fn()
		}()
		if err := netns.Set(orig); err != nil {
			r.err = errors.Join(r.err, fmt.Errorf("netlab: %s: %w", leaving, err))
			if stuck != nil {
				stuck()
			}
		} else {
			runtime.UnlockOSThread()
		}
		done <- r
	}()
	r := <-done
	if r.panicked {
		panic(r.value)
	}
	return r.err
}

// shareNetnsDir makes netnsDir a mount point of its own with shared
// propagation before a namespace is mounted in it, as `ip netns add` does
// before its first. netns.NewNamed does not, and then the first `ip netns
// add` to come after (another test's, a lab script's) bind-mounts the
// directory onto itself recursively, taking copies of the namespaces
// already mounted there that hide under its own: unmounting ours later
// leaves the copy, and removing the file fails with EBUSY for as long as
// the machine runs (TestNetnsDirShared).
func shareNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return fmt.Errorf("netlab: creating %s: %w (needs root)", netnsDir, err)
	}
	bound := false
	for {
		err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINVAL) || bound {
			return fmt.Errorf("netlab: making %s a shared mount: %w (needs root)", netnsDir, err)
		}
		// EINVAL: not a mount point yet.
		if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("netlab: bind-mounting %s onto itself: %w (needs root)", netnsDir, err)
		}
		bound = true
	}
}

// newNamed creates a named namespace (moving the calling thread into it)
// and returns a handle; an existing name fails with fs.ErrExist.
func newNamed(name string) (netns.NsHandle, error) {
	path := filepath.Join(netnsDir, name)
	h, err := netns.NewNamed(name)
	if err == nil {
		return h, nil
	}
	if errors.Is(err, fs.ErrExist) {
		return h, err
	}
	// NewNamed leaves its mount point file behind when the bind mount fails.
	_ = os.Remove(path)
	return h, fmt.Errorf("netlab: creating namespace %s: %w (needs root)", name, err)
}

// deleteNamed unmounts and removes a named namespace; the namespace itself
// goes when its last process and socket do.
func deleteNamed(name string) error {
	path := filepath.Join(netnsDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netlab: unmounting %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if errors.Is(err, unix.EBUSY) {
			// See shareNetnsDir: a mount of the directory onto itself
			// made after this namespace hides its first mount.
			return fmt.Errorf("netlab: removing %s: %w (a later mount of %s covers its mount, see /proc/self/mountinfo: unmount %s with umount -l when no namespace there is in use, then the hidden mounts, or reboot)", path, err, netnsDir, netnsDir)
		}
		return fmt.Errorf("netlab: removing %s: %w", path, err)
	}
	return nil
}

func (t *Testbed) ns(s Side) string {
	switch s {
	case Server:
		return t.ServerNS
	case Client:
		return t.ClientNS
	}
	return ""
}

func (t *Testbed) iface(s Side) string {
	if s == Client {
		return t.ClientIf
	}
	return t.ServerIf
}

func (t *Testbed) ip(s Side) netip.Addr {
	if s == Client {
		return t.ClientIP
	}
	return t.ServerIP
}

// NS is the side's namespace name (for `ip netns exec NAME`).
func (t *Testbed) NS(s Side) string { return t.ns(s) }

// Iface is the side's veth end.
func (t *Testbed) Iface(s Side) string { return t.iface(s) }

// IP is the side's address (invalid for an unaddressed client).
func (t *Testbed) IP(s Side) netip.Addr { return t.ip(s) }

// Run runs fn on an OS thread inside the side's namespace and returns its
// error. Sockets fn opens stay in that namespace after it returns and can be
// used from any goroutine; goroutines fn starts run in the original
// namespace. A panic in fn is re-raised in the caller after the thread has
// left the namespace.
func (t *Testbed) Run(s Side, fn func() error) error {
	if err := s.valid(); err != nil {
		return err
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return runIn(filepath.Join(netnsDir, t.ns(s)), fn)
}

// RunIn runs fn on an OS thread inside the named namespace (under
// /run/netns), as Run does for a testbed's side: the one way pxeperf enters
// a namespace from Go (internal/testkit/nstest uses it too).
func RunIn(name string, fn func() error) error {
	return runIn(filepath.Join(netnsDir, name), fn)
}

func runIn(path string, fn func() error) error {
	return onThread("leaving namespace "+path, func() error {
		target, err := netns.GetFromPath(path)
		if err != nil {
			return fmt.Errorf("netlab: opening namespace %s: %w", path, err)
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			return fmt.Errorf("netlab: entering namespace %s: %w", path, err)
		}
		return fn()
	}, nil)
}

// Command returns a command that runs name inside the side's namespace,
// through `ip netns exec` (which also gives it the namespace's view of
// /sys). The command is not started; ctx kills it as exec.CommandContext
// does, and Close kills it if it is still running then. An unknown side
// gives a command that fails to run.
func (t *Testbed) Command(ctx context.Context, s Side, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", t.ns(s), name}, args...)...)
}

// handle returns the side's netlink handle with t.mu held.
func (t *Testbed) handle(s Side) (*netlink.Handle, error) {
	if err := s.valid(); err != nil {
		return nil, err
	}
	if t.closed {
		return nil, ErrClosed
	}
	return t.nl[s], nil
}

// link returns the side's netlink handle and veth end, with t.mu held.
func (t *Testbed) link(s Side) (*netlink.Handle, netlink.Link, error) {
	h, err := t.handle(s)
	if err != nil {
		return nil, nil, err
	}
	link, err := h.LinkByName(t.iface(s))
	if err != nil {
		return nil, nil, fmt.Errorf("netlab: finding %s: %w", t.iface(s), err)
	}
	return h, link, nil
}

// SetMTU sets the MTU of both veth ends and checks it reads back.
func (t *Testbed) SetMTU(mtu int) error {
	if mtu < 68 || mtu > 65535 {
		return fmt.Errorf("netlab: MTU %d out of range 68..65535", mtu)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range []Side{Server, Client} {
		h, link, err := t.link(s)
		if err != nil {
			return err
		}
		if err := h.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("netlab: MTU %d on %s: %w", mtu, t.iface(s), err)
		}
		if t.line != nil {
			peer, err := h.LinkByName(delayIf(s))
			if err == nil {
				err = h.LinkSetMTU(peer, mtu)
			}
			if err != nil {
				return fmt.Errorf("netlab: MTU %d on %s: %w", mtu, delayIf(s), err)
			}
		}
		st, err := t.readIface(s)
		if err != nil {
			return err
		}
		if st.MTU != mtu {
			return fmt.Errorf("netlab: %s reads back MTU %d after setting %d", t.iface(s), st.MTU, mtu)
		}
	}
	return nil
}

// SetOffloads changes the side's offloads through the ethtool ioctl API,
// inside its namespace, and returns the state then active. Features the
// driver cannot change are left alone. When something asked for is not
// active the state comes with a *NotAppliedError; asking TxCsum off alone
// is not an error although it also turns TSO off (read back as off).
func (t *Testbed) SetOffloads(s Side, o Offloads) (netstate.State, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.handle(s); err != nil {
		return netstate.State{}, err
	}
	ifname := t.iface(s)
	var st netstate.State
	err := runIn(filepath.Join(netnsDir, t.ns(s)), func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("netlab: ethtool socket: %w", err)
		}
		defer e.Close()
		feats, err := e.FeaturesWithState(ifname)
		if err != nil {
			return fmt.Errorf("netlab: reading %s features: %w", ifname, err)
		}
		if change := o.changes(feats); len(change) > 0 {
			if err := e.Change(ifname, change); err != nil {
				return fmt.Errorf("netlab: changing %s features %v: %w", ifname, change, err)
			}
		}
		st, err = readIface(ifname)
		return err
	})
	if err != nil {
		return st, err
	}
	return st, notApplied(s, o, st)
}

// changes maps the request to kernel feature names, only those the driver
// lets us change.
func (o Offloads) changes(feats map[string]ethtool.FeatureState) map[string]bool {
	change := make(map[string]bool)
	for name, fs := range feats {
		if !fs.Available {
			continue
		}
		var want *bool
		switch {
		case name == "rx-checksum":
			want = o.RxCsum
		case strings.HasPrefix(name, "tx-checksum-"):
			want = o.TxCsum
		case isTSO(name):
			want = o.TSO
		case name == "tx-generic-segmentation":
			want = o.GSO
		case name == "rx-gro":
			want = o.GRO
		}
		if want != nil {
			change[name] = *want
		}
	}
	return change
}

// isTSO matches the TCP segmentation features ethtool groups as
// tcp-segmentation-offload (and netstate reads as TSO).
func isTSO(name string) bool {
	return strings.HasPrefix(name, "tx-tcp") && strings.HasSuffix(name, "-segmentation")
}

// readIface reads the side's veth end inside its namespace (t.mu held or
// not needed).
func (t *Testbed) readIface(s Side) (netstate.State, error) {
	var st netstate.State
	err := runIn(filepath.Join(netnsDir, t.ns(s)), func() error {
		var err error
		st, err = readIface(t.iface(s))
		return err
	})
	return st, err
}

// readIface reads an interface of the calling thread's namespace through
// netstate (whose sockets must be opened there).
func readIface(ifname string) (netstate.State, error) {
	r, err := netstate.New(0)
	if err != nil {
		return netstate.State{Iface: ifname}, fmt.Errorf("netlab: %w", err)
	}
	defer r.Close()
	st, err := r.Get(ifname)
	if err != nil {
		return st, fmt.Errorf("netlab: reading %s: %w", ifname, err)
	}
	return st, nil
}

// SetRate shapes what the side sends to bitsPerSec with a tbf qdisc at the
// root of its veth end (replacing any root qdisc), and returns the rate the
// kernel reads back. Burst and queue limit are sized as tbfSize says. To
// shape both directions, set both sides.
func (t *Testbed) SetRate(s Side, bitsPerSec uint64) (Rate, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, link, err := t.link(s)
	if err != nil {
		return Rate{}, err
	}
	burst, limit, err := tbfSize(bitsPerSec, link.Attrs().MTU)
	if err != nil {
		return Rate{}, err
	}
	bytesPerSec := bitsPerSec / 8
	attrs := netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT}
	if t.netem {
		attrs = tbfUnderNetem(link)
	}
	q := &netlink.Tbf{
		QdiscAttrs: attrs,
		Rate:       bytesPerSec,
		Limit:      limit,
		Buffer:     netlink.Xmittime(bytesPerSec, burst), // the bucket as time at the rate, in psched ticks
	}
	if err := h.QdiscReplace(q); err != nil {
		return Rate{}, fmt.Errorf("netlab: tbf rate %d bit/s on %s: %w (is sch_tbf available?)", bitsPerSec, t.iface(s), err)
	}
	r, err := readRate(h, link)
	if err != nil {
		return r, err
	}
	if r.BitsPerSec != bytesPerSec*8 {
		return r, fmt.Errorf("netlab: %s reads back %d bit/s after setting %d", t.iface(s), r.BitsPerSec, bitsPerSec)
	}
	return r, nil
}

// ClearRate removes the side's tbf, leaving the veth unlimited (noqueue).
func (t *Testbed) ClearRate(s Side) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, link, err := t.link(s)
	if err != nil {
		return err
	}
	qs, err := h.QdiscList(link)
	if err != nil {
		return fmt.Errorf("netlab: listing qdiscs of %s: %w", t.iface(s), err)
	}
	for _, q := range qs {
		if _, ok := q.(*netlink.Tbf); ok { // at the root, or under netem
			if err := h.QdiscDel(q); err != nil {
				return fmt.Errorf("netlab: removing tbf from %s: %w", t.iface(s), err)
			}
		}
	}
	return nil
}

// readRate reads the link's tbf, at the root or under netem (zero Rate
// when there is none).
func readRate(h *netlink.Handle, link netlink.Link) (Rate, error) {
	qs, err := h.QdiscList(link)
	if err != nil {
		return Rate{}, fmt.Errorf("netlab: listing qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if tbf, ok := q.(*netlink.Tbf); ok {
			return Rate{
				BitsPerSec: tbf.Rate * 8,
				Burst:      netlink.Xmitsize(tbf.Rate, tbf.Buffer),
				Limit:      tbf.Limit,
			}, nil
		}
	}
	return Rate{}, nil
}

// State reads both sides: MTU, offloads and egress rate.
func (t *Testbed) State() (State, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st State
	for _, s := range []Side{Server, Client} {
		h, err := t.handle(s)
		if err != nil {
			return st, err
		}
		ss := &st.Server
		if s == Client {
			ss = &st.Client
		}
		if ss.State, err = t.readIface(s); err != nil {
			return st, err
		}
		link, err := h.LinkByName(t.iface(s))
		if err != nil {
			return st, fmt.Errorf("netlab: finding %s: %w", t.iface(s), err)
		}
		if ss.Rate, err = readRate(h, link); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Close kills the processes left in the namespaces, deletes the veth and
// the namespaces, and takes the testbed out of its registry. Sockets the
// caller still holds keep their (now unnamed, veth-less) namespace alive
// until closed. Safe to call more than once and concurrently; later calls
// return the first one's result.
func (t *Testbed) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.closed = true
		var errs []error
		kill := func() {
			for _, s := range []Side{Server, Client} {
				if t.inode[s] != nil {
					errs = append(errs, killIn(t.ns(s), *t.inode[s]))
				}
			}
		}
		kill()
		if t.line != nil {
			t.line.close()
		}
		for _, s := range []Side{Server, Client} {
			if s == Client && t.line == nil {
				break // one pair across: deleting the server end deleted it
			}
			// Deleting one end deletes the pair, even while a socket pins a
			// namespace.
			if h := t.nl[s]; h != nil {
				if link, err := h.LinkByName(t.iface(s)); err == nil {
					if err := h.LinkDel(link); err != nil {
						errs = append(errs, fmt.Errorf("netlab: deleting %s: %w", t.iface(s), err))
					}
				}
			}
		}
		for _, s := range []Side{Server, Client} {
			if t.nl[s] != nil {
				t.nl[s].Close()
				t.nl[s] = nil
			}
			if t.ns(s) != "" {
				errs = append(errs, deleteNamed(t.ns(s)))
			}
		}
		// Again by inode: a command started just before Close may have
		// opened the namespace before the unmount and entered it after the
		// first pass.
		kill()
		t.reg.remove(t)
		t.closeErr = errors.Join(errs...)
		t.log.Debug("netlab testbed down", "server_ns", t.ServerNS, "client_ns", t.ClientNS, "err", t.closeErr)
	})
	return t.closeErr
}
