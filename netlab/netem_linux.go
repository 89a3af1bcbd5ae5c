//go:build linux

package netlab

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// errNoNetem: the kernel has no sch_netem (built without it, or the module
// cannot be loaded), as on this project's CI kernel.
var errNoNetem = errors.New("netlab: the kernel has no netem qdisc (sch_netem)")

// netemLimit is the netem queue in packets: netem's default (1000) drops
// at the delays the bench asks for at 1 Gbit/s and more; this one holds
// them (netlab/DESIGN.md#delay-line-sizing).
const netemLimit = 65536

// Each end's root netem, and the tbf SetRate puts under it.
var (
	netemHandle = netlink.MakeHandle(1, 0)
	tbfHandle   = netlink.MakeHandle(10, 0)
)

// newNetem is the root netem of link holding each packet for d.
func newNetem(link netlink.Link, d time.Duration) *netlink.Netem {
	return netlink.NewNetem(
		netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netemHandle, Parent: netlink.HANDLE_ROOT},
		netlink.NetemQdiscAttrs{Latency: uint32(d.Microseconds()), Limit: netemLimit})
}

// tbfUnderNetem is where SetRate puts the tbf on a netem testbed: in the
// netem's one class, so a packet waits out its delay and is then shaped,
// as `tc qdisc add dev X parent 1:1 handle 10: tbf ...` does.
func tbfUnderNetem(link netlink.Link) netlink.QdiscAttrs {
	return netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: tbfHandle, Parent: netlink.MakeHandle(1, 1)}
}

// addNetem puts a netem with no delay at the root of both ends, with t.mu
// held; errNoNetem when the kernel does not know the qdisc.
func (t *Testbed) addNetem() error {
	for _, s := range []Side{Server, Client} {
		link, err := t.nl[s].LinkByName(t.iface(s))
		if err != nil {
			return fmt.Errorf("netlab: finding %s: %w", t.iface(s), err)
		}
		if err := t.nl[s].QdiscReplace(newNetem(link, 0)); err != nil {
			// An unknown qdisc kind is ENOENT ("Specified qdisc kind is
			// unknown") once the kernel failed to load its module.
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
				return fmt.Errorf("%w: adding it to %s: %v", errNoNetem, t.iface(s), err)
			}
			return fmt.Errorf("netlab: netem on %s: %w", t.iface(s), err)
		}
	}
	return nil
}

// setNetemDelay changes both ends' netem to hold each packet for d, with
// t.mu held, and checks it reads back.
func (t *Testbed) setNetemDelay(d time.Duration) error {
	for _, s := range []Side{Server, Client} {
		link, err := t.nl[s].LinkByName(t.iface(s))
		if err != nil {
			return fmt.Errorf("netlab: finding %s: %w", t.iface(s), err)
		}
		if err := t.nl[s].QdiscChange(newNetem(link, d)); err != nil {
			return fmt.Errorf("netlab: netem delay %v on %s: %w", d, t.iface(s), err)
		}
		got, err := readNetem(t.nl[s], link)
		if err != nil {
			return err
		}
		// Set in whole microseconds, kept in psched ticks: allow one µs.
		if diff := got - d.Truncate(time.Microsecond); diff < -time.Microsecond || diff > time.Microsecond {
			return fmt.Errorf("netlab: %s reads back a netem delay of %v after setting %v", t.iface(s), got, d)
		}
	}
	t.delay = d
	return nil
}

// readNetem reads the delay of the link's root netem.
func readNetem(h *netlink.Handle, link netlink.Link) (time.Duration, error) {
	qs, err := h.QdiscList(link)
	if err != nil {
		return 0, fmt.Errorf("netlab: listing qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if n, ok := q.(*netlink.Netem); ok && q.Attrs().Parent == netlink.HANDLE_ROOT {
			// Latency is in psched ticks, TickInUsec of them a microsecond.
			return time.Duration(float64(n.Latency)/netlink.TickInUsec()*1000 + 0.5), nil
		}
	}
	return 0, fmt.Errorf("netlab: no netem at the root of %s", link.Attrs().Name)
}

// DelayVia says how the testbed delays: DelayNetem, DelayOwnLine, or ""
// (built without Options.DelayLine).
func (t *Testbed) DelayVia() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.netem:
		return DelayNetem
	case t.line != nil:
		return DelayOwnLine
	}
	return ""
}
