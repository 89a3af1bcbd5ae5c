package dhcp

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReplyDest(t *testing.T) {
	a := netip.MustParseAddr
	zero := netip.IPv4Unspecified()
	bcast := netip.MustParseAddrPort("255.255.255.255:68")
	type in struct {
		giaddr, ciaddr, yiaddr netip.Addr
		bflag, nak             bool
	}
	tests := map[string]struct {
		in   in
		want Dest
	}{
		"relay gets unicast on server port": {
			in{a("10.0.0.254"), zero, a("10.0.0.5"), false, false},
			Dest{To: netip.MustParseAddrPort("10.0.0.254:67")},
		},
		"relay wins over ciaddr and broadcast flag": {
			in{a("10.0.0.254"), a("10.0.0.5"), a("10.0.0.5"), true, false},
			Dest{To: netip.MustParseAddrPort("10.0.0.254:67")},
		},
		"nak through relay sets broadcast flag": {
			in{a("10.0.0.254"), zero, zero, false, true},
			Dest{To: netip.MustParseAddrPort("10.0.0.254:67"), SetBroadcast: true},
		},
		"nak without relay is broadcast even with ciaddr": {
			in{zero, a("10.0.0.5"), zero, false, true},
			Dest{To: bcast},
		},
		"ciaddr set: unicast to client": {
			in{zero, a("10.0.0.5"), a("10.0.0.5"), true, false},
			Dest{To: netip.MustParseAddrPort("10.0.0.5:68")},
		},
		"broadcast flag": {
			in{zero, zero, a("10.0.0.5"), true, false},
			Dest{To: bcast},
		},
		"no flag: layer-2 unicast falls back to broadcast": {
			in{zero, zero, a("10.0.0.5"), false, false},
			Dest{To: bcast, L2Fallback: true},
		},
		"proxy offer without yiaddr: broadcast": {
			in{zero, zero, zero, false, false},
			Dest{To: bcast},
		},
		"invalid addresses count as unset": {
			in{netip.Addr{}, netip.Addr{}, a("10.0.0.9"), true, false},
			Dest{To: bcast},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := replyDest(tc.in.giaddr, tc.in.ciaddr, tc.in.yiaddr, tc.in.bflag, tc.in.nak, 67, 68)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y })); d != "" {
				t.Errorf("replyDest (-want +got):\n%s", d)
			}
		})
	}
}
