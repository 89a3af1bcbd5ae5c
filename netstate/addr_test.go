package netstate

import (
	"net/netip"
	"testing"
)

func TestIfaceOf(t *testing.T) {
	pfx := netip.MustParsePrefix
	table := []IfaceAddrs{
		{Name: "lo", Loopback: true, Prefixes: []netip.Prefix{pfx("127.0.0.1/8"), pfx("::1/128")}},
		{Name: "eth0", Prefixes: []netip.Prefix{pfx("192.168.50.1/24"), pfx("fe80::1/64")}},
		{Name: "veth1", Prefixes: []netip.Prefix{pfx("10.251.3.1/24")}},
	}
	for addr, want := range map[string]string{
		"192.168.50.1":        "eth0",
		"::ffff:192.168.50.1": "eth0",
		"10.251.3.1":          "veth1",
		"127.0.0.1":           "lo",
		"127.0.0.53":          "lo", // any of 127/8 is loopback
		"::1":                 "lo",
		"192.168.50.7":        "", // in eth0's subnet, but not ours
		"fe80::1":             "eth0",
		"203.0.113.9":         "",
	} {
		if got := IfaceOf(netip.MustParseAddr(addr).Unmap(), table); got != want {
			t.Errorf("IfaceOf(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestAddrsCachesAndRereadsOnMiss(t *testing.T) {
	reads := 0
	table := []IfaceAddrs{{Name: "eth0", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.50.1/24")}}}
	c := &Addrs{ttl: 1 << 62, list: func() ([]IfaceAddrs, error) { reads++; return table, nil }}
	for range 3 {
		if got := c.Iface(netip.MustParseAddr("192.168.50.1")); got != "eth0" {
			t.Fatalf("Iface = %q", got)
		}
	}
	if reads != 1 {
		t.Errorf("%d reads of the address table for 3 hits, want 1", reads)
	}
	table = append(table, IfaceAddrs{Name: "eth1", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}})
	if got := c.Iface(netip.MustParseAddr("10.0.0.1")); got != "eth1" || reads != 2 {
		t.Errorf("new address: %q after %d reads, want eth1 after 2", got, reads)
	}
}
