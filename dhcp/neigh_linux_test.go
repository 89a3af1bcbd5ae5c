//go:build linux

package dhcp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestNeighboursResolved: the neighbour table tells an address with a
// link-layer address (a permanent entry, a peer that answered ARP) from
// one without (no entry, an entry still waiting for ARP).
func TestNeighboursResolved(t *testing.T) {
	p := nstest.NewPair(t, nstest.Options{})
	perm, none, waiting := p.Unanswered(3)[0], p.Unanswered(3)[1], p.Unanswered(3)[2]
	nstest.Run(t, p.Server, "ip", "neigh", "replace", perm.String(), "lladdr", "02:00:00:00:00:99", "nud", "permanent", "dev", p.ServerIf)
	nstest.Run(t, p.Server, "ping", "-c", "1", "-W", "1", p.ClientIP.String())
	// An address nobody answers: ping leaves an INCOMPLETE entry behind.
	_, _ = nstest.Output(p.Server, 3*time.Second, "ping", "-c", "1", "-W", "0.2", waiting.String())
	var n *neighbours
	if err := nstest.Do(p.Server, func() (err error) { n, err = openNeighbours(p.ServerIf); return err }); err != nil {
		t.Fatal(err)
	}
	defer n.close()
	for _, tc := range []struct {
		what string
		a    netip.Addr
		want bool
	}{
		{"permanent entry", perm, true},
		{"peer that answered ARP", p.ClientIP, true},
		{"no entry", none, false},
		{"entry waiting for ARP", waiting, false},
	} {
		if got := n.resolved(tc.a); got != tc.want {
			t.Errorf("%s (%s): resolved = %v, want %v\n%s", tc.what, tc.a, got, tc.want, nstest.Run(t, p.Server, "ip", "neigh", "show", "dev", p.ServerIf))
		}
	}
}
