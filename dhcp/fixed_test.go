package dhcp

import (
	"errors"
	"github.com/pxeperf/pxeperf/configs"
	"testing"
	"time"
)

// Fixed addresses replaced at run time: a new reservation is offered to
// its host at once and to nobody else; a moved one NAKs the old address
// and offers the new; a removed one frees the host to the pool.
func TestReplaceFixed(t *testing.T) {
	s := testStore(t, "10.0.0.10-10.0.0.12")
	// mac 1 was offered .10 (not bound); then .10 is reserved for mac 2.
	if a := mustOffer(t, s, mac(1), t0); a != addr("10.0.0.10") {
		t.Fatalf("first offer = %s", a)
	}
	s.replaceFixed([]configs.Host{host(mac(2), "10.0.0.10")}, t0)
	if a := mustOffer(t, s, mac(2), t0); a != addr("10.0.0.10") {
		t.Errorf("reserved host offered %s, want 10.0.0.10", a)
	}
	if a := mustOffer(t, s, mac(1), t0); a == addr("10.0.0.10") {
		t.Errorf("mac 1 still offered the address now reserved for mac 2")
	}
	mustBind(t, s, mac(2), addr("10.0.0.10"), t0)
	// The reservation moves to .200 (outside the pool): a renewal of .10
	// is NAKed, the next offer is .200.
	s.replaceFixed([]configs.Host{host(mac(2), "10.0.0.200")}, t0.Add(time.Minute))
	if _, err := s.Bind(mac(2), addr("10.0.0.10"), false, t0.Add(time.Minute)); !errors.Is(err, errNotYours) {
		t.Errorf("renewal of the old fixed address: err = %v, want errNotYours (NAK)", err)
	}
	if a := mustOffer(t, s, mac(2), t0.Add(time.Minute)); a != addr("10.0.0.200") {
		t.Errorf("moved reservation offered %s, want 10.0.0.200", a)
	}
	// Removed: mac 2 takes a pool address; .200 is no longer offered.
	s.replaceFixed(nil, t0.Add(2*time.Minute))
	if a := mustOffer(t, s, mac(2), t0.Add(2*time.Minute)); !s.pool.Contains(a) {
		t.Errorf("after the reservation is gone mac 2 got %s, want a pool address", a)
	}
	if s.Known(mac(3)) {
		t.Error("an unrelated MAC is known")
	}
}
