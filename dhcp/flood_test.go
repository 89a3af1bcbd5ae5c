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

// Full mode: REQUESTs from MACs the server never saw take no address
// without paying: INIT-REBOOTs are ignored, RENEWING/REBINDING ones
// (ciaddr) cost a new-client token each, and past the budget (a burst of
// 1000) they are refused like DISCOVERs.
func TestUnknownRequestsCharged(t *testing.T) {
	e := newTestServer(t, configs.ModeFull) // pool 10.0.0.10-20: 11 addresses
	const n = 1200
	acks := 0
	for i := range n {
		r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeRequest, floodMAC(i), reqIP("10.0.0.12")), src68, false, t0)
		if r != nil {
			t.Fatalf("INIT-REBOOT from unknown client %d answered: %v", i, r)
		}
		r, _ = e.send(t, pkt(t, dhcpv4.MessageTypeRequest, floodMAC(n+i), dhcpv4.WithClientIP(net.IP{10, 0, 0, byte(10 + i%11)})), src68, false, t0)
		if r != nil && r.MessageType() == dhcpv4.MessageTypeAck {
			acks++
		}
	}
	st := e.s.Stats()
	if acks != 11 || st.Refused[reasonUnknownReboot] != n {
		t.Errorf("%d ACKs to rebinding clients (pool of 11), %d INIT-REBOOTs ignored; want 11 and %d", acks, st.Refused[reasonUnknownReboot], n)
	}
	if got, want := st.Refused[reasonNewClients], uint64(n-defaultNewPerSecond*burstSeconds); got != want {
		t.Errorf("%d rebinding REQUESTs refused by the new-client budget, want %d (past its burst)", got, want)
	}
}

// Proxy mode: one MAC claiming a new ciaddr in every request costs a lease
// record per change only changesPerMinute times a minute.
func TestProxyChangesBounded(t *testing.T) {
	e := newTestServer(t, configs.ModeProxy)
	for i := range 50 {
		r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, biosArch, dhcpv4.WithClientIP(net.IP{10, 0, 0, byte(50 + i)})),
			src68, false, t0.Add(time.Duration(i)*time.Second/50))
		if r == nil {
			t.Fatalf("DISCOVER %d not answered", i)
		}
	}
	if _, leases := e.rec.Snapshot(); len(leases) != 1+changesPerMinute {
		t.Errorf("%d lease records for 50 changes in a second, want %d (first sighting + %d changes)", len(leases), 1+changesPerMinute, changesPerMinute)
	}
	e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, biosArch, dhcpv4.WithClientIP(net.IP{10, 0, 0, 200})), src68, false, t0.Add(sightingEvery+time.Second))
	if _, leases := e.rec.Snapshot(); len(leases) != 2+changesPerMinute {
		t.Errorf("%d lease records a minute later, want %d: a change is recorded again", len(leases), 2+changesPerMinute)
	}
}

// A destination takes one reply without proof of ARP per arpGiveUp, and
// the table of them stays within its size.
func TestUnprovenPerDestination(t *testing.T) {
	u := newUnproven(2)
	a, b, c := addr("10.0.0.5"), addr("10.0.0.6"), addr("10.0.0.7")
	steps := []struct {
		a    netip.Addr
		at   time.Duration
		want bool
	}{
		{a, 0, true},
		{a, time.Second, false}, // a reply to a may still wait for ARP
		{b, time.Second, true},
		{c, time.Second, false}, // full: none lapsed
		{a, arpGiveUp, true},    // a's lapsed
		{c, arpGiveUp + time.Second, true},
	}
	for i, st := range steps {
		if got := u.first(st.a, t0.Add(st.at)); got != st.want {
			t.Errorf("step %d: first(%s, +%v) = %v, want %v", i, st.a, st.at, got, st.want)
		}
	}
	if len(u.at) > 2 {
		t.Errorf("%d destinations remembered, want at most 2", len(u.at))
	}
}
