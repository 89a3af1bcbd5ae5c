package notify

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
)

type collect struct {
	mu  sync.Mutex
	got []event.Milestone
}

func (c *collect) Milestone(m event.Milestone) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, m)
}

// TestFanoutLease: a lease event becomes dhcp-ack, given to every sink;
// a proxy answer has no address.
func TestFanoutLease(t *testing.T) {
	a, b := &collect{}, &collect{}
	f := NewFanout(a, nil, b)
	at := time.Unix(1700000000, 0)
	f.Lease(&event.Lease{Time: at, MAC: board, Addr: netip.MustParseAddr("10.0.0.9"), Arch: 7, Host: "board7", BootFile: "ipxe.efi"})
	f.Lease(&event.Lease{Time: at, MAC: board, Arch: 0xffff, Proxy: true, BootFile: "undionly.kpxe"})
	want := []event.Milestone{
		{Time: at, MAC: board, Host: "board7", What: event.MilestoneDHCPAck,
			Detail: map[string]string{"addr": "10.0.0.9", "arch": "7", "boot_file": "ipxe.efi", "proxy": "false"}},
		{Time: at, MAC: board, What: event.MilestoneDHCPAck, Detail: map[string]string{"boot_file": "undionly.kpxe", "proxy": "true"}},
	}
	for _, c := range []*collect{a, b} {
		if d := cmp.Diff(want, c.got); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	}
	f.Milestone(event.Milestone{What: event.MilestoneHostSet, MAC: board})
	if a.got[2].Time.IsZero() {
		t.Error("a milestone without a time was not given one")
	}
}

func TestEncode(t *testing.T) {
	got := string(Encode(event.Milestone{Time: time.Date(2026, 12, 2, 14, 0, 0, 0, time.FixedZone("x", 3600)), MAC: board,
		What: event.MilestoneNextBootSet}))
	want := `{"time":"2026-12-02T13:00:00Z","mac":"52:54:00:12:34:56","host":"","what":"next-boot-set","detail":{}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
