package dhcp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// refParse is what the request path accepted before it had its own parser:
// dhcpv4.FromBytes, then the checks no client fails.
func refParse(b []byte) (*dhcpv4.DHCPv4, error) {
	d, err := dhcpv4.FromBytes(b)
	switch {
	case err != nil:
		return nil, err
	case d.OpCode != dhcpv4.OpcodeBootRequest:
		return nil, errNotReq
	case len(d.ClientHWAddr) == 0:
		return nil, errNoHW
	case d.MessageType() == dhcpv4.MessageTypeNone:
		return nil, errNoMsgType
	}
	return d, nil
}

// FuzzParseMatchesDHCPv4 holds msg.parse to dhcpv4: the same datagrams
// accepted, and the same values read from them.
func FuzzParseMatchesDHCPv4(f *testing.F) {
	long := bytes.Repeat([]byte("x"), 300)
	for _, p := range []*dhcpv4.DHCPv4{
		pkt(f, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, biosArch),
		pkt(f, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, ipxeUC, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optIPXEEncap), nil)),
		pkt(f, dhcpv4.MessageTypeRequest, mac(1), srvID, reqIP("10.0.0.10"), dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optRelayInfo), long)),
		pkt(f, dhcpv4.MessageTypeRequest, mac(1), dhcpv4.WithClientIP(net.IP{10, 0, 0, 10}), dhcpv4.WithBroadcast(true)),
		pkt(f, dhcpv4.MessageTypeInform, mac(1), dhcpv4.WithRequestedOptions(dhcpv4.OptionTFTPServerName)),
		pkt(f, dhcpv4.MessageTypeDiscover, mac(1), dhcpv4.WithGatewayIP(net.IP{10, 0, 0, 254}),
			dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientUUID), []byte{0, 1, 2, 3}), dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientID), []byte{1, 2})),
	} {
		f.Add(p.ToBytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m msg
		err := m.parse(b)
		d, refErr := refParse(b)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parse: %v, dhcpv4: %v", err, refErr)
		}
		if err != nil {
			return
		}
		type view struct {
			HType, MT           byte
			XID                 [4]byte
			Flags               uint16
			CI, GI, ReqIP, SID  string
			HW                  string
			Opts                map[byte]string
			Present             map[byte]bool
			AsksTFTPName, Bcast bool
		}
		ip := func(a netip.Addr) string { return a.String() }
		refIP := func(x net.IP) string { a, _ := netip.AddrFromSlice(x.To4()); return a.String() }
		got := view{HType: m.htype, MT: byte(m.mt), XID: m.xid, Flags: m.flags, CI: ip(m.ciaddr), GI: ip(m.giaddr),
			ReqIP: ip(m.requestedIP()), SID: ip(m.serverID()), HW: m.chaddr.String(), Opts: map[byte]string{},
			Present: map[byte]bool{}, AsksTFTPName: m.requested(optTFTPServer), Bcast: m.broadcast()}
		want := view{HType: byte(d.HWType), MT: byte(d.MessageType()), XID: d.TransactionID, Flags: d.Flags,
			CI: refIP(d.ClientIPAddr), GI: refIP(d.GatewayIPAddr), ReqIP: refIP(d.RequestedIPAddress()),
			SID: refIP(d.ServerIdentifier()), HW: d.ClientHWAddr.String(), Opts: map[byte]string{}, Present: map[byte]bool{},
			AsksTFTPName: d.IsOptionRequested(dhcpv4.OptionTFTPServerName), Bcast: d.IsBroadcast()}
		for _, c := range kept {
			got.Opts[c], got.Present[c] = string(m.get(c)), m.present(c)
			want.Opts[c], want.Present[c] = string(d.Options.Get(dhcpv4.GenericOptionCode(c))), d.Options.Has(dhcpv4.GenericOptionCode(c))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("parse differs from dhcpv4 (-dhcpv4 +parse):\n%s", diff)
		}
	})
}

// TestReplyMatchesDHCPv4: a reply reads back through dhcpv4 with every
// field and option as set, option 53 first, long options split, and at
// least BOOTP's 300 bytes.
func TestReplyMatchesDHCPv4(t *testing.T) {
	req := toMsg(t, pkt(t, dhcpv4.MessageTypeRequest, mac(7), dhcpv4.WithGatewayIP(net.IP{10, 0, 0, 254}),
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optRelayInfo), []byte{1, 2, 3}), dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientID), []byte{1, 82, 84})))
	var r reply
	for range 2 { // the second round reuses the buffers
		r.start(req, dhcpv4.MessageTypeAck, netip.MustParseAddr("10.0.0.1"))
		r.yiaddr, r.siaddr, r.file = netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.5"), "boot.efi"
		r.setSeconds(optLeaseTime, time.Hour)
		r.setIPs(optDNS, []netip.Addr{netip.MustParseAddr("10.0.0.53"), netip.MustParseAddr("10.0.0.54")})
		r.setString(optBootFile, strings.Repeat("u", 300))
		r.setString(optBootFile, "http://x/boot.ipxe") // replaces
		r.setString(optDomainName, strings.Repeat("d", 400))
		r.set(optIPXEEncap, nil)
		r.setBroadcast()
		out := r.appendTo([]byte("junk"))[4:]
		if len(out) < 300 || out[240] != optMessageType {
			t.Fatalf("%d bytes, first option %d", len(out), out[240])
		}
		d, err := dhcpv4.FromBytes(out)
		if err != nil {
			t.Fatal(err)
		}
		type view struct {
			Op, MT, YI, SI, GI, File, HW string
			XID                          [4]byte
			Bcast                        bool
			Opts                         map[byte]string
		}
		got := view{Op: d.OpCode.String(), MT: d.MessageType().String(), YI: d.YourIPAddr.String(), SI: d.ServerIPAddr.String(),
			GI: d.GatewayIPAddr.String(), File: d.BootFileName, HW: d.ClientHWAddr.String(), XID: d.TransactionID,
			Bcast: d.IsBroadcast(), Opts: map[byte]string{}}
		for code, v := range d.Options {
			got.Opts[code] = string(v)
		}
		want := view{Op: "BootReply", MT: "ACK", YI: "10.0.0.10", SI: "10.0.0.5", GI: "10.0.0.254", File: "boot.efi",
			HW: mac(7).String(), XID: req.xid, Bcast: true, Opts: map[byte]string{
				optMessageType: "\x05", optServerID: "\x0a\x00\x00\x01", optRelayInfo: "\x01\x02\x03", optClientID: "\x01RT",
				optLeaseTime: "\x00\x00\x0e\x10", optDNS: "\x0a\x00\x00\x35\x0a\x00\x00\x36", optBootFile: "http://x/boot.ipxe",
				optDomainName: strings.Repeat("d", 400), optIPXEEncap: ""}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("reply read back by dhcpv4 (-want +got):\n%s", diff)
		}
	}
}

func TestParseRejects(t *testing.T) {
	good := pkt(t, dhcpv4.MessageTypeDiscover, mac(1)).ToBytes()
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"short":       {good[:239], errShort},
		"no cookie":   {append(append([]byte{}, good[:236]...), 1, 2, 3, 4, 255), errCookie},
		"no end":      {good[:243], errNoEnd},
		"cut option":  {append(append([]byte{}, good[:240]...), 53, 5, 1), errOptions},
		"reply":       {append([]byte{2}, good[1:]...), errNotReq},
		"no hw":       {append(append([]byte{}, good[:2]...), append([]byte{0}, good[3:]...)...), errNoHW},
		"no msg type": {append(append([]byte{}, good[:240]...), 255), errNoMsgType},
	} {
		t.Run(name, func(t *testing.T) {
			var m msg
			if err := m.parse(tc.b); !errors.Is(err, tc.want) {
				t.Errorf("parse = %v, want %v", err, tc.want)
			}
		})
	}
}
