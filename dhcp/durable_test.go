package dhcp

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
)

// openAt opens the lease journal in dir for a fresh store, as a restart does.
func openAt(t *testing.T, dir string, log *slog.Logger) *leaseStore {
	t.Helper()
	return withJournal(t, dir, testStore(t, "10.0.0.10-10.0.0.20"), true, log)
}

// withJournal gives s the lease journal in dir (fsynced unless noSync),
// closed when the test ends, and returns s.
func withJournal(t *testing.T, dir string, s *leaseStore, noSync bool, log *slog.Logger) *leaseStore {
	t.Helper()
	j, err := openJournal(dir, s, noSync, log)
	if err != nil {
		t.Fatal(err)
	}
	s.j = j
	t.Cleanup(func() { j.close() })
	return s
}

// A damaged line (here one longer than the old 4096-byte scanner buffer)
// must not end replay: the bindings after it survive, across two restarts
// (start-up compaction must not make the loss permanent), the line is kept
// aside in a file the log names, and no address of an unexpired lease is
// offered to another MAC.
func TestJournalDamagedLineKeptAside(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	garbage := "bind " + strings.Repeat("x", 5000)
	journal := "bind 52:54:00:00:00:01 10.0.0.10 " + itoa(exp) + "\n" +
		garbage + "\n" +
		"bind 52:54:00:00:00:02 10.0.0.11 " + itoa(exp) + "\n" +
		"\x00\x00\x00 torn by the disk\n" +
		"bind 52:54:00:00:00:03 10.0.0.12 " + itoa(exp) + "\n"
	if err := os.WriteFile(filepath.Join(dir, JournalName), []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for round := range 2 {
		s := openAt(t, dir, log)
		got := map[string]string{}
		for _, l := range s.Active(now) {
			got[l.MAC.String()] = l.Addr.String()
		}
		for i, a := range []string{"10.0.0.10", "10.0.0.11", "10.0.0.12"} {
			if got[mac(byte(i+1)).String()] != a {
				t.Errorf("round %d: %s holds %q after replay, want %s (all: %v)", round, mac(byte(i+1)), got[mac(byte(i+1)).String()], a, got)
			}
		}
		for i := byte(10); i < 15; i++ {
			a := mustOffer(t, s, mac(100+i), now)
			if a == addr("10.0.0.10") || a == addr("10.0.0.11") || a == addr("10.0.0.12") {
				t.Errorf("round %d: new client offered %s, which is leased", round, a)
			}
		}
		crash(s)
	}
	damaged, err := os.ReadFile(filepath.Join(dir, JournalName+".damaged"))
	if err != nil {
		t.Fatalf("damaged lines not kept aside: %v", err)
	}
	if !strings.Contains(string(damaged), garbage) || !strings.Contains(string(damaged), "torn by the disk") {
		t.Errorf("damaged file lacks the damaged lines:\n%.200s", damaged)
	}
	if strings.Count(string(damaged), garbage) != 1 {
		t.Errorf("damaged line kept aside %d times, want once", strings.Count(string(damaged), garbage))
	}
	if !strings.Contains(logs.String(), JournalName+".damaged") {
		t.Errorf("log does not name the file the damaged lines went to:\n%s", logs.String())
	}
}

// A damaged line that still names an address holds that address: it may
// be someone's lease.
func TestJournalDamagedLineHoldsItsAddress(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	journal := "bind 52:54:00:00:00:01 10.0.0.10 17x67%%\n" + // expiry unreadable
		"gibberish 10.0.0.11 zzz\n" // an address, no MAC
	if err := os.WriteFile(filepath.Join(dir, JournalName), []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		s := openAt(t, dir, slog.New(slog.DiscardHandler))
		for i := byte(0); i < 9; i++ {
			a := mustOffer(t, s, mac(100+i), now)
			if a == addr("10.0.0.10") || a == addr("10.0.0.11") {
				t.Errorf("round %d: offered %s, named by a damaged record", round, a)
			}
		}
		if a := mustOffer(t, s, mac(1), now); a != addr("10.0.0.10") {
			t.Errorf("round %d: the MAC of the damaged bind got %s, want 10.0.0.10", round, a)
		}
		crash(s)
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// Clients whose hardware address is not 6 or 8 bytes (DHCP allows 1 to
// 16) keep their lease across a restart.
func TestJournalOddHardwareAddresses(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, slog.New(slog.DiscardHandler))
	macs := []net.HardwareAddr{
		{0x01, 0x02, 0x03},
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		{0xaa},
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	}
	want := map[string]netip.Addr{}
	for _, m := range macs {
		a := mustOffer(t, s, m, t0)
		mustBind(t, s, m, a, t0)
		want[m.String()] = a
	}
	for round := range 2 {
		crash(s)
		s = openAt(t, dir, slog.New(slog.DiscardHandler))
		got := map[string]netip.Addr{}
		for _, l := range s.Active(t0) {
			got[l.MAC.String()] = l.Addr
		}
		for k, a := range want {
			if got[k] != a {
				t.Errorf("round %d: %s holds %v after restart, want %s", round, k, got[k], a)
			}
		}
		for i := byte(0); i < 4; i++ {
			if a := mustOffer(t, s, mac(200+i), t0.Add(time.Minute)); contains(want, a) {
				t.Errorf("round %d: offered %s, leased to an odd-length MAC", round, a)
			}
		}
	}
}

func contains(m map[string]netip.Addr, a netip.Addr) bool {
	for _, v := range m {
		if v == a {
			return true
		}
	}
	return false
}

// A failed journal write (disk full) fails that ACK, and the next one
// succeeds once the disk has room again: no restart needed.
func TestJournalWriteErrorRecovers(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, slog.New(slog.DiscardHandler))
	real := s.j.f
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	a1 := mustOffer(t, s, mac(1), t0)
	s.j.mu.Lock()
	s.j.f = full // the disk fills up
	s.j.mu.Unlock()
	if _, err := s.Bind(mac(1), a1, true, t0); err == nil {
		t.Fatal("Bind on a full disk succeeded")
	}
	s.j.mu.Lock()
	s.j.f = real // space freed
	s.j.mu.Unlock()
	a2 := mustOffer(t, s, mac(2), t0)
	if _, err := s.Bind(mac(2), a2, true, t0); err != nil {
		t.Fatalf("Bind after the disk recovered: %v", err)
	}
	if _, err := s.Bind(mac(1), a1, true, t0); err != nil {
		t.Fatalf("retried Bind after the disk recovered: %v", err)
	}
	crash(s)
	s = openAt(t, dir, slog.New(slog.DiscardHandler))
	if got := sortLeases(s.Active(t0)); len(got) != 2 {
		t.Errorf("after restart: %v, want both leases", got)
	}
}

// The same through the server: full mode NAKs or drops while the disk is
// full and ACKs again once it is not.
func TestServerAcksAgainAfterDiskFull(t *testing.T) {
	e := newTestServer(t, configs.ModeFull)
	j := e.s.leases.j
	real := j.f
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	dora := func(m net.HardwareAddr) string {
		offer, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, m), src68, false, t0)
		if offer == nil {
			return "no offer"
		}
		req, err := dhcpv4.NewRequestFromOffer(offer)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := e.send(t, req, src68, false, t0)
		if r == nil {
			return "no reply"
		}
		return r.MessageType().String()
	}
	j.mu.Lock()
	j.f = full
	j.mu.Unlock()
	if got := dora(mac(1)); got == "ACK" {
		t.Fatalf("ACK on a full disk")
	}
	j.mu.Lock()
	j.f = real
	j.mu.Unlock()
	for i := byte(1); i <= 3; i++ {
		if got := dora(mac(i)); got != "ACK" {
			t.Errorf("client %d after the disk recovered: %s, want ACK", i, got)
		}
	}
}

// FuzzReplay: no journal content panics replay, and what replay made of it
// survives a compaction and a second replay unchanged.
func FuzzReplay(f *testing.F) {
	f.Add([]byte("bind 52:54:00:00:00:01 10.0.0.10 1767268800\nfree 52:54:00:00:00:01 10.0.0.10\n"))
	f.Add([]byte("bind aa 10.0.0.11 1767268800\nhold 10.0.0.12 1767268800\ngarbage 10.0.0.13\nbind 52:54"))
	f.Fuzz(func(t *testing.T, data []byte) {
		now := t0
		s := testStore(t, "10.0.0.10-10.0.0.20")
		replay(data, s, now)
		snap, _ := s.snapshot(now)
		s2 := testStore(t, "10.0.0.10-10.0.0.20")
		if bad := replay(snap, s2, now); len(bad) > 0 {
			t.Fatalf("snapshot has damaged lines %q", bad)
		}
		if a, b := sortLeases(s.Active(now)), sortLeases(s2.Active(now)); !slices.Equal(a, b) {
			t.Fatalf("after compaction %v, before %v", b, a)
		}
	})
}

// A start-up compaction that cannot be written (here the temp name is
// taken by a folder; a full disk does the same) does not keep the server
// from starting: it appends to the journal as it is.
func TestJournalStartsWhenCompactionFails(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	journal := "bind 52:54:00:00:00:01 10.0.0.10 " + itoa(now.Add(time.Hour).Unix()) + "\nbind 52:54:00:00:00:02 10.0" // torn
	if err := os.WriteFile(filepath.Join(dir, JournalName), []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, JournalName+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, dir, slog.New(slog.DiscardHandler))
	a := mustOffer(t, s, mac(3), now)
	mustBind(t, s, mac(3), a, now)
	crash(s)
	s = openAt(t, dir, slog.New(slog.DiscardHandler))
	if got := sortLeases(s.Active(now)); len(got) != 2 {
		t.Errorf("after restart: %v, want the old and the new lease", got)
	}
}
