package dhcp

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/configs"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func mac(i byte) net.HardwareAddr { return net.HardwareAddr{0x52, 0x54, 0, 0, 0, i} }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func testStore(t *testing.T, pool string, hostEntries ...configs.Host) *leaseStore {
	t.Helper()
	p, err := configs.ParsePool(pool)
	if err != nil {
		t.Fatal(err)
	}
	return newLeaseStore(p, addr("10.0.0.1"), time.Hour, hostEntries)
}

func host(m net.HardwareAddr, a string) configs.Host {
	return configs.Host{MAC: configs.MAC{HardwareAddr: m}, Address: configs.Addr{Addr: addr(a)}}
}

func mustOffer(t *testing.T, s *leaseStore, m net.HardwareAddr, now time.Time) netip.Addr {
	t.Helper()
	a, err := s.Offer(m, netip.Addr{}, now, false)
	if err != nil {
		t.Fatalf("Offer(%s): %v", m, err)
	}
	return a
}

func mustBind(t *testing.T, s *leaseStore, m net.HardwareAddr, a netip.Addr, now time.Time) {
	t.Helper()
	if _, err := s.Bind(m, a, false, now); err != nil {
		t.Fatalf("Bind(%s, %s): %v", m, a, err)
	}
}

func TestOfferDistinctAndStable(t *testing.T) {
	s := testStore(t, "10.0.0.10-10.0.0.12")
	got := map[string]string{}
	for i := byte(1); i <= 3; i++ {
		got[mac(i).String()] = mustOffer(t, s, mac(i), t0).String()
	}
	want := map[string]string{mac(1).String(): "10.0.0.10", mac(2).String(): "10.0.0.11", mac(3).String(): "10.0.0.12"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("offers (-want +got):\n%s", d)
	}
	// A repeated DISCOVER gets the same address.
	if a := mustOffer(t, s, mac(2), t0.Add(time.Second)); a != addr("10.0.0.11") {
		t.Errorf("second offer to mac 2 = %s, want 10.0.0.11", a)
	}
	// The pool is held by the offers: a fourth client gets nothing.
	if _, err := s.Offer(mac(4), netip.Addr{}, t0.Add(time.Second), false); !errors.Is(err, ErrPoolExhausted) {
		t.Errorf("offer to 4th client: err = %v, want ErrPoolExhausted", err)
	}
	// Offers lapse: after offerHold the 4th client gets one of them.
	if _, err := s.Offer(mac(4), netip.Addr{}, t0.Add(offerHold+2*time.Second), false); err != nil {
		t.Errorf("offer after holds lapsed: %v", err)
	}
}

func TestReservations(t *testing.T) {
	s := testStore(t, "10.0.0.10-10.0.0.11", host(mac(9), "10.0.0.10"), host(mac(8), "10.0.0.200"))
	if a := mustOffer(t, s, mac(1), t0); a != addr("10.0.0.11") {
		t.Errorf("unreserved client got %s, want 10.0.0.11 (10.0.0.10 is reserved)", a)
	}
	if _, err := s.Offer(mac(2), netip.Addr{}, t0, false); !errors.Is(err, ErrPoolExhausted) {
		t.Errorf("offer with only a reserved address left: err = %v, want ErrPoolExhausted", err)
	}
	if a := mustOffer(t, s, mac(9), t0); a != addr("10.0.0.10") {
		t.Errorf("reserved client got %s, want 10.0.0.10", a)
	}
	if a := mustOffer(t, s, mac(8), t0); a != addr("10.0.0.200") {
		t.Errorf("reservation outside the pool: got %s, want 10.0.0.200", a)
	}
	if _, err := s.Bind(mac(1), addr("10.0.0.10"), false, t0); !errors.Is(err, errNotYours) {
		t.Errorf("binding someone's reserved address: err = %v, want errNotYours", err)
	}
	if _, err := s.Bind(mac(9), addr("10.0.0.11"), false, t0); !errors.Is(err, errNotYours) {
		t.Errorf("reserved client asking for another address: err = %v, want errNotYours", err)
	}
	mustBind(t, s, mac(9), addr("10.0.0.10"), t0)
}

func TestBindRules(t *testing.T) {
	s := testStore(t, "10.0.0.10-10.0.0.20")
	a := mustOffer(t, s, mac(1), t0)
	mustBind(t, s, mac(1), a, t0)
	mustOffer(t, s, mac(4), t0)
	tests := map[string]struct {
		mac       net.HardwareAddr
		addr      netip.Addr
		selecting bool
		ok        bool
	}{
		"outside pool":                     {mac(2), addr("10.0.1.10"), false, false},
		"server address":                   {mac(2), addr("10.0.0.1"), false, false},
		"leased to another client":         {mac(2), a, false, false},
		"free pool address (init-reboot)":  {mac(3), addr("10.0.0.15"), false, true},
		"selecting an address not offered": {mac(4), addr("10.0.0.16"), true, false},
		"selecting without any offer":      {mac(5), addr("10.0.0.17"), true, false},
		"selecting the offered address":    {mac(4), addr("10.0.0.11"), true, true},
		"renewal of own lease":             {mac(1), a, false, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := s.Bind(tc.mac, tc.addr, tc.selecting, t0.Add(time.Minute))
			if (err == nil) != tc.ok {
				t.Errorf("Bind(%s, %s) err = %v, want ok=%v", tc.mac, tc.addr, err, tc.ok)
			}
		})
	}
}

func TestExpiryAndReturningClient(t *testing.T) {
	s := testStore(t, "10.0.0.10-10.0.0.11")
	a1 := mustOffer(t, s, mac(1), t0)
	mustBind(t, s, mac(1), a1, t0)
	a2 := mustOffer(t, s, mac(2), t0)
	mustBind(t, s, mac(2), a2, t0)
	if _, err := s.Offer(mac(3), netip.Addr{}, t0.Add(time.Minute), false); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("full pool: err = %v, want ErrPoolExhausted", err)
	}
	later := t0.Add(2 * time.Hour) // both leases expired
	if got := len(s.Active(later)); got != 0 {
		t.Errorf("active leases after expiry = %d, want 0", got)
	}
	// A returning client gets its old address even after expiry.
	if a := mustOffer(t, s, mac(2), later); a != a2 {
		t.Errorf("returning client got %s, want its old %s", a, a2)
	}
	// A new client reclaims the expired one.
	if a := mustOffer(t, s, mac(3), later); a != a1 {
		t.Errorf("new client got %s, want reclaimed %s", a, a1)
	}
}

func TestReleaseAndDecline(t *testing.T) {
	s := testStore(t, "10.0.0.10-10.0.0.11")
	a := mustOffer(t, s, mac(1), t0)
	mustBind(t, s, mac(1), a, t0)
	if ok, err := s.Release(mac(2), a, t0); ok || err != nil {
		t.Errorf("release by another MAC: ok=%v err=%v, want ignored", ok, err)
	}
	if ok, err := s.Release(mac(1), a, t0); !ok || err != nil {
		t.Fatalf("release: ok=%v err=%v", ok, err)
	}
	if n := len(s.Active(t0)); n != 0 {
		t.Errorf("active after release = %d, want 0", n)
	}
	mustBind(t, s, mac(1), a, t0)
	if ok, err := s.Decline(mac(1), a, t0); !ok || err != nil {
		t.Fatalf("decline: ok=%v err=%v", ok, err)
	}
	if b := mustOffer(t, s, mac(1), t0); b == a {
		t.Errorf("after DECLINE the client was offered the declined %s again", a)
	}
	if _, err := s.Bind(mac(2), a, false, t0.Add(time.Minute)); !errors.Is(err, errNotYours) {
		t.Errorf("declined address bound within the hold: err = %v", err)
	}
	mustBind(t, s, mac(2), a, t0.Add(declineHold+time.Second))
}

func TestJournalReload(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	open := func() *leaseStore { return withJournal(t, dir, testStore(t, "10.0.0.10-10.0.0.20"), false, log) }
	s := open()
	for i := byte(1); i <= 4; i++ {
		mustBind(t, s, mac(i), mustOffer(t, s, mac(i), t0), t0)
	}
	if _, err := s.Release(mac(3), addr("10.0.0.12"), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decline(mac(4), addr("10.0.0.13"), t0); err != nil {
		t.Fatal(err)
	}
	// Only an offer: never journaled.
	mustOffer(t, s, mac(5), t0)
	want := s.Active(t0)
	// "kill -9": no close, plus a torn half line at the end.
	f, err := os.OpenFile(filepath.Join(dir, JournalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("bind 52:54:00:00:00:07 10.0.")
	f.Close()

	for round := 0; round < 2; round++ { // reload twice: compaction must keep everything
		crash(s)
		s = open()
		got := s.Active(t0)
		opts := []cmp.Option{cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
			cmp.Transformer("sort", sortLeases)}
		if d := cmp.Diff(want, got, opts...); d != "" {
			t.Fatalf("round %d: leases after reload (-want +got):\n%s", round, d)
		}
		// The released client is history: it gets its old address back.
		if a := mustOffer(t, s, mac(3), t0.Add(time.Minute)); a != addr("10.0.0.12") {
			t.Errorf("round %d: released client got %s, want 10.0.0.12", round, a)
		}
		// A new client must not get any address leased before the restart.
		if a := mustOffer(t, s, mac(6), t0.Add(time.Minute)); a == addr("10.0.0.10") || a == addr("10.0.0.11") {
			t.Errorf("round %d: new client got %s, which is leased", round, a)
		}
	}
}

func sortLeases(in []Lease) []string {
	out := make([]string, 0, len(in))
	for _, l := range in {
		out = append(out, l.MAC.String()+" "+l.Addr.String()+" "+l.Expiry.UTC().Format(time.RFC3339))
	}
	slices.Sort(out)
	return out
}

func TestJournalCompactsWhileServing(t *testing.T) {
	dir := t.TempDir()
	open := func() *leaseStore { return openAt(t, dir, slog.New(slog.DiscardHandler)) }
	s := open()
	a1, a2 := mustOffer(t, s, mac(1), t0), mustOffer(t, s, mac(2), t0)
	renewals := 3 * compactAt(2)
	for i := range renewals {
		now := t0.Add(time.Duration(i) * time.Second)
		mustBind(t, s, mac(1), a1, now)
		mustBind(t, s, mac(2), a2, now)
	}
	b, err := os.ReadFile(filepath.Join(dir, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > compactAt(2)+1 {
		t.Errorf("journal has %d lines after %d renewals, want at most %d (compaction)", n, 2*renewals, compactAt(2)+1)
	}
	last := t0.Add(time.Duration(renewals-1) * time.Second)
	want := sortLeases(s.Active(last))
	crash(s)
	if got := sortLeases(open().Active(last)); !slices.Equal(got, want) {
		t.Errorf("after compaction and reload: %v, want %v", got, want)
	}
}

// TestJournalConcurrentBinds: ACKs from many workers share fsyncs; every
// bind that returned must be on disk, in order, when the store is reloaded.
func TestJournalConcurrentBinds(t *testing.T) {
	dir := t.TempDir()
	p, _ := configs.ParsePool("10.0.0.10-10.0.0.200")
	open := func() *leaseStore {
		return withJournal(t, dir, newLeaseStore(p, addr("10.0.0.1"), time.Hour, nil), false, slog.New(slog.DiscardHandler))
	}
	s := open()
	done := make(chan error, 16)
	for w := range 16 {
		go func() {
			m := mac(byte(100 + w))
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				var a netip.Addr
				if a, err = s.Offer(m, netip.Addr{}, t0, false); err == nil {
					_, err = s.Bind(m, a, true, t0.Add(time.Duration(i)*time.Second))
				}
			}
			done <- err
		}()
	}
	for range 16 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(time.Minute)
	want := sortLeases(s.Active(now))
	if len(want) != 16 {
		t.Fatalf("%d active leases, want 16", len(want))
	}
	crash(s)
	if got := sortLeases(open().Active(now)); !slices.Equal(got, want) {
		t.Errorf("reloaded %v\nwant %v", got, want)
	}
}

// crash drops what a killed process loses: its file descriptors, and with
// them the journal lock. Nothing is flushed.
func crash(s *leaseStore) {
	s.j.lock.Close()
	s.j.f.Close()
}

func TestJournalLocked(t *testing.T) {
	dir := t.TempDir()
	s := testStore(t, "10.0.0.10-10.0.0.20")
	j, err := openJournal(dir, s, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if _, err := openJournal(dir, testStore(t, "10.0.0.10-10.0.0.20"), true, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a second server opened a journal in use")
	}
	j.close()
	j2, err := openJournal(dir, testStore(t, "10.0.0.10-10.0.0.20"), true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("journal still locked after close: %v", err)
	}
	j2.close()
}
