package dhcp

import (
	"testing"
	"time"
)

// FuzzReplay: the lease journal is read back at start, whatever a crash or
// a hand edit left in it; every line is applied or counted as bad, never a
// panic, and every lease replayed has an IPv4 address and a MAC. (A lease
// outside the pool, even 0.0.0.0, is kept as history: pick never hands out
// an address that is not usable.)
func FuzzReplay(f *testing.F) {
	f.Add([]byte("bind 52:54:00:00:00:01 10.0.0.10 1700000000\nfree 52:54:00:00:00:01 10.0.0.10\n"))
	f.Add([]byte("decline 52:54:00:00:00:02 10.0.0.11 1700000000\nbind 52:54:00:00:00:0"))
	f.Add([]byte("bind zz 10.0.0.10 1\nbind 52:54:00:00:00:01 ::1 1\n\n\n"))
	f.Add([]byte("bind 52:54:00:00:00:01 192.168.1.1 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := testStore(t, "10.0.0.10-10.0.0.20")
		bad := replay(data, s)
		if bad < 0 {
			t.Fatalf("replay counted %d bad lines", bad)
		}
		for _, l := range s.Active(time.Unix(0, 0)) {
			if !l.Addr.Is4() || len(l.MAC) == 0 {
				t.Fatalf("replayed lease %v without an IPv4 address or MAC", l)
			}
		}
	})
}
