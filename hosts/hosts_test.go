package hosts

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
)

func TestTable(t *testing.T) {
	mac1, _ := net.ParseMAC("52:54:00:00:00:01")
	mac2, _ := net.ParseMAC("52:54:00:00:00:02")
	tab := New([]configs.Host{{MAC: configs.MAC{HardwareAddr: mac1}, Name: "one"}})
	a := netip.MustParseAddr("10.0.0.5")
	b := netip.MustParseAddr("10.0.0.6")

	if c, ok := tab.ByMAC(mac1); !ok || c.Host == nil || c.Host.Name != "one" {
		t.Fatalf("ByMAC(mac1) before DHCP = %+v, %v; want the host entry", c, ok)
	}
	if _, ok := tab.ByMAC(mac2); ok {
		t.Fatal("ByMAC(unknown) found something")
	}
	tab.Observe(Client{MAC: mac1, Addr: a})
	if c, ok := tab.ByAddr(a); !ok || c.Host == nil || c.Host.Name != "one" {
		t.Fatalf("ByAddr(a) = %+v, %v", c, ok)
	}
	tab.Observe(Client{MAC: mac1}) // no address: keeps a
	if _, ok := tab.ByAddr(a); !ok {
		t.Fatal("address forgotten by a sighting without one")
	}
	tab.Observe(Client{MAC: mac1, Addr: b}) // moved
	if _, ok := tab.ByAddr(a); ok {
		t.Fatal("old address still maps to the client")
	}
	if c, ok := tab.ByAddr(b); !ok || c.MAC.String() != mac1.String() {
		t.Fatalf("ByAddr(b) = %+v, %v", c, ok)
	}
}

// TestReplace: new host entries take effect at once, and DHCP sightings
// are kept, carrying their MAC's new entry (or none).
func TestReplace(t *testing.T) {
	mac1, _ := net.ParseMAC("52:54:00:00:00:01")
	mac2, _ := net.ParseMAC("52:54:00:00:00:02")
	a := netip.MustParseAddr("10.0.0.5")
	tab := New([]configs.Host{{MAC: configs.MAC{HardwareAddr: mac1}, Name: "one"}})
	tab.Observe(Client{MAC: mac1, Addr: a})
	tab.Replace([]configs.Host{{MAC: configs.MAC{HardwareAddr: mac1}, Name: "uno"}, {MAC: configs.MAC{HardwareAddr: mac2}, Name: "two"}})
	if c, ok := tab.ByAddr(a); !ok || c.Host == nil || c.Host.Name != "uno" {
		t.Fatalf("sighting after Replace = %+v, %v; want host uno", c, ok)
	}
	if h, ok := tab.Host(mac2); !ok || h.Name != "two" {
		t.Fatalf("new entry: %+v, %v", h, ok)
	}
	tab.Replace(nil)
	if c, ok := tab.ByAddr(a); !ok || c.Host != nil {
		t.Fatalf("sighting after removing its entry = %+v, %v; want kept, without host", c, ok)
	}
}

// TestStamp: a fetch known only by its address (an iperf test) gets the
// host entry's MAC, name and labels; a fetch's own labels win; stamping
// twice changes nothing; a stranger is left alone.
func TestStamp(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:28:00:01")
	tbl := New([]configs.Host{{MAC: configs.MAC{HardwareAddr: mac}, Name: "b1-host",
		Address: configs.Addr{Addr: netip.MustParseAddr("10.0.0.7")}, Labels: map[string]string{"board": "b1", "rack": "3"}}})
	own := map[string]string{"streams": "1", "board": "from-query"}
	f := &event.Fetch{Client: netip.MustParseAddrPort("10.0.0.7:5201"), Labels: own}
	if _, ok := tbl.Stamp(f); !ok {
		t.Fatal("the host entry's fixed address was not found")
	}
	want := map[string]string{"streams": "1", "board": "from-query", "rack": "3"}
	if d := cmp.Diff(want, f.Labels); d != "" || f.Host != "b1-host" || f.MAC.String() != mac.String() {
		t.Errorf("stamped: host %q mac %v labels (-want +got):\n%s", f.Host, f.MAC, d)
	}
	if len(own) != 2 {
		t.Errorf("the producer's label map was changed: %v", own)
	}
	tbl.Stamp(f)
	if d := cmp.Diff(want, f.Labels); d != "" || f.Host != "b1-host" {
		t.Errorf("stamped twice: host %q labels (-want +got):\n%s", f.Host, d)
	}
	g := &event.Fetch{Client: netip.MustParseAddrPort("10.0.0.9:5201")}
	if _, ok := tbl.Stamp(g); ok || g.Host != "" || g.MAC != nil || g.Labels != nil {
		t.Errorf("a stranger was stamped: %+v", g)
	}
}
