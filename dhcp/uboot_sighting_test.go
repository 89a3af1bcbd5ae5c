package dhcp

import (
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
)

// TestUBootSighting: a client whose option 60 is U-Boot's ("U-Boot.armv8")
// is marked UBoot on the hosts-table sighting of its lease, which tftp reads to cap its
// windowsize (tftp.uboot_max_windowsize); a PXE ROM is not.
func TestUBootSighting(t *testing.T) {
	e := newTestServer(t, configs.ModeFull)
	ubootVendor := dhcpv4.WithOption(dhcpv4.OptClassIdentifier("U-Boot.armv8"))
	arm64 := dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{0, 22})
	for _, c := range []struct {
		mods  []dhcpv4.Modifier
		uboot bool
	}{{[]dhcpv4.Modifier{ubootVendor, arm64}, true}, {[]dhcpv4.Modifier{pxeVendor, biosArch}, false}} {
		m := mac(3)
		if !c.uboot {
			m = mac(4)
		}
		offer, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, m, c.mods...), src68, false, t0)
		if offer == nil {
			t.Fatalf("no OFFER for %v", m)
		}
		req := append(c.mods, srvID, reqIP(offer.YourIPAddr.String()))
		if ack, _ := e.send(t, pkt(t, dhcpv4.MessageTypeRequest, m, req...), src68, false, t0); ack == nil {
			t.Fatalf("no ACK for %v", m)
		}
		got, ok := e.ht.ByMAC(m)
		if !ok || got.UBoot != c.uboot {
			t.Errorf("sighting of %v: %+v, %v; want UBoot %v", m, got, ok, c.uboot)
		}
	}
}
