//go:build linux

package netstate_test

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/netstate"
)

// TestOffloadsOnVeth toggles offloads with the ethtool command on a veth in
// a test namespace and reads them back through the ethtool API.
func TestOffloadsOnVeth(t *testing.T) {
	nstest.RequireTool(t, "ethtool")
	p := nstest.NewPair(t, nstest.Options{MTU: 9000})
	var r *netstate.Reader
	if err := nstest.Do(p.Server, func() (err error) {
		r, err = netstate.New(0) // the ethtool socket lives in the server namespace
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	on := netstate.State{Iface: p.ServerIf, MTU: 9000, SpeedMbps: 10000, Driver: "veth", RxCsum: netstate.On, TxCsum: netstate.On, TSO: netstate.On, GSO: netstate.On, GRO: netstate.On}
	// Bring every feature to a known state first (veth's GRO default
	// differs between kernels).
	nstest.Run(t, p.Server, "ethtool", "-K", p.ServerIf, "rx", "on", "tx", "on", "tso", "on", "gso", "on", "gro", "on")
	tests := []struct {
		name   string
		args   []string // ethtool -K arguments
		mutate func(*netstate.State)
	}{
		{"all on", nil, func(*netstate.State) {}},
		{"rx off", []string{"rx", "off"}, func(s *netstate.State) { s.RxCsum = netstate.Off }},
		{"rx on", []string{"rx", "on"}, func(*netstate.State) {}},
		{"gro off", []string{"gro", "off"}, func(s *netstate.State) { s.GRO = netstate.Off }},
		{"gso and tso off", []string{"gro", "on", "gso", "off", "tso", "off"}, func(s *netstate.State) { s.GSO, s.TSO = netstate.Off, netstate.Off }},
		// tx checksumming off also turns TSO off (it depends on it).
		{"tx off", []string{"gso", "on", "tx", "off"}, func(s *netstate.State) { s.TxCsum, s.TSO = netstate.Off, netstate.Off }},
		{"back on", []string{"tx", "on", "tso", "on"}, func(*netstate.State) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.args) > 0 {
				nstest.Run(t, p.Server, "ethtool", append([]string{"-K", p.ServerIf}, tt.args...)...)
			}
			want := on
			tt.mutate(&want)
			got, err := r.Get(p.ServerIf)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("state (-want +got):\n%s\nethtool -k says:\n%s", d, nstest.Run(t, p.Server, "ethtool", "-k", p.ServerIf))
			}
		})
	}
	if _, err := r.Get("nosuchif0"); err == nil || !strings.Contains(err.Error(), "nosuchif0") {
		t.Errorf("unknown interface: %v", err)
	}
}

// TestCache: a cached state is reused until the TTL passes.
func TestCache(t *testing.T) {
	nstest.RequireTool(t, "ethtool")
	p := nstest.NewPair(t, nstest.Options{})
	var r *netstate.Reader
	if err := nstest.Do(p.Server, func() (err error) {
		r, err = netstate.New(netstate.DefaultTTL)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	nstest.Run(t, p.Server, "ethtool", "-K", p.ServerIf, "rx", "on")
	first, err := r.Get(p.ServerIf)
	if err != nil || first.RxCsum != netstate.On {
		t.Fatalf("first read: %+v %v", first, err)
	}
	nstest.Run(t, p.Server, "ethtool", "-K", p.ServerIf, "rx", "off")
	if again, _ := r.Get(p.ServerIf); again.RxCsum != netstate.On {
		t.Errorf("within the TTL the cached state should be returned, got %+v", again)
	}
	if netstate.Kernel() == "" {
		t.Error("Kernel() is empty")
	}
}

// TestLoopback needs no privileges: lo has an MTU, no link speed, and the
// same MTU the standard library reads.
func TestLoopback(t *testing.T) {
	r, err := netstate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Get("lo")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("no lo interface")
	}
	if got.MTU != lo.MTU || got.SpeedMbps != 0 || got.RxCsum == netstate.Unknown {
		t.Errorf("lo: %+v, want MTU %d, no speed, a known rx checksum state", got, lo.MTU)
	}
}

// BenchmarkGet reads the loopback's state without the cache: what each
// record paid per interface read (5 s TTL in serve).
func BenchmarkGet(b *testing.B) {
	r, err := netstate.New(0)
	if err != nil {
		b.Skip(err)
	}
	defer r.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Get("lo"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNominalSpeed: veth's 10000 and tun's 10 are not line rates; a NIC's
// speed (and none, "") is taken as reported.
func TestNominalSpeed(t *testing.T) {
	for d, want := range map[string]bool{"veth": true, "tun": true, "virtio_net": true, "bridge": true,
		"e1000e": false, "igb": false, "mlx5_core": false, "": false} {
		if got := netstate.NominalSpeed(d); got != want {
			t.Errorf("NominalSpeed(%q) = %v, want %v", d, got, want)
		}
	}
}
