package event

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestLogLease: a proxy answer has no address and its line has no ip (not
// ip="invalid IP"); a full-mode lease has its ip.
func TestLogLease(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:00:00:01")
	tests := map[string]struct {
		lease Lease
		want  []string
		not   []string
	}{
		"proxy": {Lease{MAC: mac, Proxy: true, BootFile: "undionly.kpxe"},
			[]string{"msg=lease", "client_mac=52:54:00:00:00:01", "proxy=true", "boot_file=undionly.kpxe"}, []string{"ip=", "invalid"}},
		"full": {Lease{MAC: mac, Addr: netip.MustParseAddr("10.0.0.5")},
			[]string{"msg=lease", "ip=10.0.0.5", "proxy=false"}, []string{"invalid"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			Log{Logger: slog.New(slog.NewTextHandler(&b, nil))}.Lease(&tt.lease)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("log %q lacks %q", b.String(), w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(b.String(), n) {
					t.Errorf("log %q has %q", b.String(), n)
				}
			}
		})
	}
}

// TestRecorderWaitFetches: WaitFetches returns once the n-th fetch is in,
// with every fetch recorded by then; when fewer come within the timeout it
// says so and returns those.
func TestRecorderWaitFetches(t *testing.T) {
	var r Recorder
	go func() {
		for _, f := range []string{"a", "b", "c"} {
			time.Sleep(10 * time.Millisecond)
			r.Fetch(&Fetch{File: f})
		}
	}()
	fs, ok := r.WaitFetches(3, time.Minute)
	if !ok || len(fs) != 3 || fs[2].File != "c" {
		t.Fatalf("WaitFetches(3) = %v, %v; want a, b, c", fs, ok)
	}
	fs, ok = r.WaitFetches(4, 20*time.Millisecond)
	if ok || len(fs) != 3 {
		t.Errorf("WaitFetches(4) with 3 recorded = %d fetches, %v; want 3, false", len(fs), ok)
	}
	fs[0].File = "changed"
	if got, _ := r.WaitFetches(1, 0); got[0].File != "a" {
		t.Error("WaitFetches returns the recorder's own slice, not a copy")
	}
}
