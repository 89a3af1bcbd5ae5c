package dhcp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
)

// floodMAC is the i-th spoofed MAC.
func floodMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0xf1, 0x00, byte(i >> 16), byte(i >> 8), byte(i)}
}

// Proxy mode: 20,000 spoofed PXE DISCOVERs in 3 s are all answered, but
// grow neither the lease records nor the hosts table without bound; a
// configured host is still recorded during the flood.
func TestProxyFloodBounded(t *testing.T) {
	board := configs.Host{MAC: configs.MAC{HardwareAddr: mac(7)}, Name: "board7"}
	e := newTestServer(t, configs.ModeProxy, board)
	const n = 20000
	step := 3 * time.Second / n
	answered := 0
	for i := range n {
		r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, floodMAC(i), pxeVendor, biosArch), src68, false, t0.Add(time.Duration(i)*step))
		if r != nil {
			answered++
		}
	}
	if r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(7), pxeVendor, biosArch), src68, false, t0.Add(3*time.Second)); r == nil {
		t.Fatal("configured host not answered during the flood")
	}
	if answered != n {
		t.Errorf("%d of %d PXE clients answered; proxy mode must answer all", answered, n)
	}
	_, leases := e.rec.Snapshot()
	limit := defaultNewPerSecond*burstSeconds + defaultNewPerSecond*3 + 1
	if len(leases) > limit {
		t.Errorf("%d lease records for %d spoofed clients in 3 s, want at most %d", len(leases), n, limit)
	}
	if l := leases[len(leases)-1]; l.MAC.String() != mac(7).String() {
		t.Errorf("last lease record is %s, want the configured host %s", l.MAC, mac(7))
	}
	inTable := 0
	for i := range n {
		if _, ok := e.ht.ByMAC(floodMAC(i)); ok {
			inTable++
		}
	}
	if inTable > defaultMaxSightings {
		t.Errorf("%d spoofed clients in the hosts table, want at most %d", inTable, defaultMaxSightings) // new API
	}
	if e.s.Stats().Refused[reasonNotRecorded] == 0 { // new API
		t.Errorf("refusals not counted: %v", e.s.Stats().Refused) // new API
	} // new API
}

// Full mode: a flood of spoofed DISCOVERs (never a REQUEST) must not keep
// a real client from its address for the 30 s offers are held: unanswered
// offers are taken back once they are 5 s old, and new clients beyond the
// budget are refused and counted.
func TestFullModeDiscoverFlood(t *testing.T) {
	e := newTestServer(t, configs.ModeFull) // pool 10.0.0.10-20: 11 addresses
	const n = 20000
	step := 3 * time.Second / n
	for i := range n {
		e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, floodMAC(i), pxeVendor, biosArch), src68, false, t0.Add(time.Duration(i)*step))
	}
	now := t0.Add(9 * time.Second)
	offer, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, biosArch), src68, false, now)
	if offer == nil {
		t.Fatal("real client got no offer 6 s after the flood")
	}
	req, err := dhcpv4.NewRequestFromOffer(offer)
	if err != nil {
		t.Fatal(err)
	}
	ack, _ := e.send(t, req, src68, false, now.Add(10*time.Millisecond))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("real client not ACKed after the flood: %v", ack)
	}
	st := e.s.Stats()                                           // new API
	if st.Refused[reasonNewClients] == 0 || st.Reclaimed == 0 { // new API
		t.Errorf("stats %+v: want new-client refusals and a reclaimed offer", st) // new API
	} // new API
}

// dhcp.max_offers bounds outstanding offers where the pool is larger.
func TestMaxOffers(t *testing.T) { // new API
	s := testStore(t, "10.0.0.10-10.0.0.200")
	s.maxOffers = 5
	for i := byte(0); i < 5; i++ {
		mustOffer(t, s, mac(i), t0)
	}
	if _, err := s.Offer(mac(9), netip.Addr{}, t0, false); err != ErrTooManyOffers {
		t.Errorf("6th offer: err = %v, want ErrTooManyOffers", err)
	}
	if _, err := s.Offer(mac(9), netip.Addr{}, t0, true); err != nil {
		t.Errorf("a configured host is exempt: %v", err)
	}
	// A REQUEST frees its offer's place; a repeated DISCOVER takes none.
	mustBind(t, s, mac(0), addr("10.0.0.10"), t0)
	mustOffer(t, s, mac(1), t0)
	mustOffer(t, s, mac(10), t0)
	// Offers lapse after offerHold.
	mustOffer(t, s, mac(11), t0.Add(offerHold+time.Second))
}
