package hosts

import (
	"net"
	"net/netip"
	"testing"

	"github.com/pxeperf/pxeperf/event"
)

// TestSerial: a Pi's serial outlives a sighting without one, finds its
// MAC for a fetch under its folder when the address is unknown (proxy
// mode), labels its fetches, and goes with Forget.
func TestSerial(t *testing.T) {
	tb := New(nil)
	mac, _ := net.ParseMAC("dc:a6:32:01:36:c2")
	tb.Observe(Client{MAC: mac, Serial: "1a2b3c4d"})
	tb.Observe(Client{MAC: mac}) // the booted OS's DHCP
	if c, ok := tb.BySerial("1a2b3c4d"); !ok || c.MAC.String() != mac.String() || c.Serial != "1a2b3c4d" {
		t.Fatalf("BySerial: %+v %v", c, ok)
	}
	f := &event.Fetch{File: "1a2b3c4d/start4.elf", Client: netip.MustParseAddrPort("10.0.0.9:49000")}
	tb.Stamp(f)
	if f.MAC.String() != mac.String() || f.Labels[LabelRPiSerial] != "1a2b3c4d" {
		t.Fatalf("stamped %v %v", f.MAC, f.Labels)
	}
	other := &event.Fetch{File: "5e6f7a8b/start4.elf", Client: netip.MustParseAddrPort("10.0.0.9:49000")}
	if tb.Stamp(other); other.MAC != nil || other.Labels != nil {
		t.Fatalf("unknown serial stamped %v %v", other.MAC, other.Labels)
	}
	byMAC := &event.Fetch{File: "dc-a6-32-01-36-c2/config.txt", Client: netip.MustParseAddrPort("10.0.0.9:49000")}
	if tb.Stamp(byMAC); byMAC.MAC.String() != mac.String() || byMAC.Labels[LabelRPiSerial] != "1a2b3c4d" {
		t.Fatalf("stamped by MAC folder: %v %v", byMAC.MAC, byMAC.Labels)
	}
	tb.Forget(mac)
	if _, ok := tb.BySerial("1a2b3c4d"); ok {
		t.Fatal("BySerial after Forget")
	}
}
