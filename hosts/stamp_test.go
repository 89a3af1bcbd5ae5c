package hosts

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
)

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
