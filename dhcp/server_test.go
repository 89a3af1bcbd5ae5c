package dhcp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
)

type testEnv struct {
	s   *Server
	rec *event.Recorder
	ht  *hosts.Table
}

func newTestServer(t testing.TB, mode string, hostEntries ...configs.Host) *testEnv {
	t.Helper()
	return newTestServerWith(t, mode, nil, hostEntries...)
}

// newTestServerWith is newTestServer with edit (nil: none) applied to the
// config before the server is built.
func newTestServerWith(t testing.TB, mode string, edit func(*configs.Config), hostEntries ...configs.Host) *testEnv {
	t.Helper()
	cfg := configs.Default()
	cfg.DHCP.Mode = mode
	cfg.DHCP.Pool, _ = configs.ParsePool("10.0.0.10-10.0.0.20")
	cfg.DHCP.Router = configs.Addr{Addr: addr("10.0.0.254")}
	cfg.DHCP.DNS = []configs.Addr{{Addr: addr("10.0.0.53")}}
	cfg.DHCP.Domain = "lab.test"
	cfg.DHCP.Relays = []configs.Prefix{{Prefix: netip.MustParsePrefix("10.0.0.254/32")}, {Prefix: netip.MustParsePrefix("10.9.0.0/16")}}
	cfg.Data = t.TempDir()
	cfg.HTTP.Listen = ":8080"
	cfg.Hosts = hostEntries
	if edit != nil {
		edit(cfg)
	}
	rec := &event.Recorder{}
	ht := hosts.New(cfg.Hosts)
	s, err := newServer(Options{Config: cfg, Addr: addr("10.0.0.1"), Prefix: netip.MustParsePrefix("10.0.0.0/24"),
		Hosts: ht, Sink: rec, noSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeAll)
	return &testEnv{s: s, rec: rec, ht: ht}
}

// pkt builds a client message.
func pkt(t testing.TB, mt dhcpv4.MessageType, m net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	p, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(m), dhcpv4.WithMessageType(mt)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	pxeVendor = dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001"))
	biosArch  = dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{0, 0})
	ipxeUC    = dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optUserClass), []byte("iPXE"))
	src68     = netip.MustParseAddrPort("0.0.0.0:68")
	srvID     = dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP{10, 0, 0, 1}))
)

func reqIP(a string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IP(addr(a).AsSlice())))
}

// send runs one packet through Handle and parses the reply (nil: none).
func (e *testEnv) send(t testing.TB, p *dhcpv4.DHCPv4, src netip.AddrPort, onProxy bool, now time.Time) (*dhcpv4.DHCPv4, netip.AddrPort) {
	t.Helper()
	out, dst := e.s.Handle(p.ToBytes(), src, onProxy, now)
	if out == nil {
		return nil, dst
	}
	if len(out) < 243 || out[240] != 53 || out[241] != 1 {
		t.Errorf("option 53 is not the first option: % x", out[240:min(len(out), 250)])
	}
	r, err := dhcpv4.FromBytes(out)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	return r, dst
}

// summary is what the tests compare of a reply.
type summary struct {
	Type       string
	YIAddr     string
	SIAddr     string
	File       string
	Opts       map[uint8]string
	Dest       string
	LeaseTime  time.Duration
	BcastFlag  bool
	CIAddrEcho string
}

func summarize(r *dhcpv4.DHCPv4, dst netip.AddrPort, codes ...uint8) summary {
	s := summary{Type: r.MessageType().String(), YIAddr: r.YourIPAddr.String(), SIAddr: r.ServerIPAddr.String(),
		File: r.BootFileName, Dest: dst.String(), LeaseTime: r.IPAddressLeaseTime(0), BcastFlag: r.IsBroadcast(),
		CIAddrEcho: r.ClientIPAddr.String(), Opts: map[uint8]string{}}
	for _, c := range codes {
		if v := r.Options.Get(dhcpv4.GenericOptionCode(c)); v != nil {
			s.Opts[c] = string(v)
		}
	}
	return s
}

func TestFullModeExchange(t *testing.T) {
	e := newTestServer(t, configs.ModeFull, configs.Host{MAC: configs.MAC{HardwareAddr: mac(7)}, Name: "board7",
		Address: configs.Addr{Addr: addr("10.0.0.77")}})
	ip := func(s string) string { return string(addr(s).AsSlice()) }
	offer, dst := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, biosArch), src68, false, t0)
	if offer == nil {
		t.Fatal("no OFFER")
	}
	want := summary{Type: "OFFER", YIAddr: "10.0.0.10", SIAddr: "10.0.0.1", File: "undionly.kpxe",
		Dest: "255.255.255.255:68", LeaseTime: time.Hour, CIAddrEcho: "0.0.0.0", Opts: map[uint8]string{
			1: "\xff\xff\xff\x00", 3: ip("10.0.0.254"), 6: ip("10.0.0.53"), 15: "lab.test", 54: ip("10.0.0.1"),
			60: "PXEClient", 43: "\x06\x01\x08\xff", 66: "10.0.0.1", 67: "undionly.kpxe",
		}}
	codes := []uint8{1, 3, 6, 15, 54, 60, 43, 66, 67, 175}
	if d := cmp.Diff(want, summarize(offer, dst, codes...)); d != "" {
		t.Errorf("OFFER (-want +got):\n%s", d)
	}
	ack, dst := e.send(t, pkt(t, dhcpv4.MessageTypeRequest, mac(1), pxeVendor, biosArch, srvID, reqIP("10.0.0.10")), src68, false, t0)
	if ack == nil {
		t.Fatal("no ACK")
	}
	want.Type = "ACK"
	if d := cmp.Diff(want, summarize(ack, dst, codes...)); d != "" {
		t.Errorf("ACK (-want +got):\n%s", d)
	}
	_, leases := e.rec.Snapshot()
	if len(leases) != 1 || leases[0].Addr != addr("10.0.0.10") || leases[0].Arch != 0 || leases[0].BootFile != "undionly.kpxe" {
		t.Errorf("lease events = %+v, want one for 10.0.0.10 arch 0 undionly.kpxe", leases)
	}
	if c, ok := e.ht.ByAddr(addr("10.0.0.10")); !ok || c.MAC.String() != mac(1).String() || c.IPXE || c.Arch != 0 {
		t.Errorf("hosts table ByAddr = %+v, %v", c, ok)
	}

	// The reserved host gets its address and its name in the event.
	offer, _ = e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(7)), src68, false, t0)
	if offer == nil || offer.YourIPAddr.String() != "10.0.0.77" {
		t.Fatalf("reserved host offer = %v", offer)
	}
	// A client with no option 60/93 (many U-Boot builds): the default boot
	// file and next-server, never an empty file; no PXE class echoed, and
	// no option 66 since its parameter request list leaves it out.
	offer, _ = e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(2), dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter)), src68, false, t0)
	if offer == nil || offer.BootFileName != "boot.scr.uimg" || offer.ServerIPAddr.String() != "10.0.0.1" ||
		offer.Options.Has(dhcpv4.OptionClassIdentifier) || offer.Options.Has(dhcpv4.OptionTFTPServerName) {
		t.Errorf("plain client offer: want boot.scr.uimg from siaddr 10.0.0.1 without options 60 and 66, got %v", offer)
	}
	if offer.YourIPAddr.String() != "10.0.0.11" {
		t.Errorf("second client offered %s, want 10.0.0.11", offer.YourIPAddr)
	}
	if st := e.s.Stats(); st.Offers != 3 || st.Acks != 1 || st.Malformed != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestFullModeRequests(t *testing.T) {
	e := newTestServer(t, configs.ModeFull)
	// mac 1 holds 10.0.0.10.
	e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(1)), src68, false, t0)
	if r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeRequest, mac(1), srvID, reqIP("10.0.0.10")), src68, false, t0); r.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("setup ACK: %v", r)
	}
	relay := dhcpv4.WithGatewayIP(net.IP{10, 0, 0, 254})
	ciaddr := dhcpv4.WithClientIP(net.IP{10, 0, 0, 10})
	tests := map[string]struct {
		p       *dhcpv4.DHCPv4
		onProxy bool
		want    string // reply type and destination, or "none"
	}{
		"selecting another server: silent": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(2), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP{10, 0, 0, 2})), reqIP("10.0.0.11")), false, "none"},
		"address leased to another: NAK broadcast": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(2), srvID, reqIP("10.0.0.10")), false, "NAK 255.255.255.255:68"},
		"selecting with an address we did not offer: NAK": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(8), srvID, reqIP("10.0.0.19")), false, "NAK 255.255.255.255:68"},
		"init-reboot outside the pool: NAK": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(2), reqIP("192.168.1.5")), false, "NAK 255.255.255.255:68"},
		"NAK through relay: to relay with broadcast flag": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(2), reqIP("192.168.1.5"), relay), false, "NAK 10.0.0.254:67 bflag"},
		"renewing own lease: ACK unicast to ciaddr": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(1), ciaddr), false, "ACK 10.0.0.10:68"},
		"discover through relay: OFFER to relay": {
			pkt(t, dhcpv4.MessageTypeDiscover, mac(3), relay), false, "OFFER 10.0.0.254:67"},
		"discover through a relay in a trusted prefix: OFFER to relay": {
			pkt(t, dhcpv4.MessageTypeDiscover, mac(10), dhcpv4.WithGatewayIP(net.IP{10, 9, 3, 1})), false, "OFFER 10.9.3.1:67"},
		"discover through an untrusted relay: dropped": {
			pkt(t, dhcpv4.MessageTypeDiscover, mac(11), dhcpv4.WithGatewayIP(net.IP{10, 0, 0, 253})), false, "none"},
		"request through an untrusted relay: dropped": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(2), reqIP("192.168.1.5"), dhcpv4.WithGatewayIP(net.IP{10, 0, 0, 253})), false, "none"},
		"init-reboot in the pool without a binding: silent": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(12), reqIP("10.0.0.15")), false, "none"},
		"init-reboot on the network outside the pool without a binding: silent": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(12), reqIP("10.0.0.99")), false, "none"},
		"rebinding without a binding: ACK, as after a lost journal": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(13), dhcpv4.WithClientIP(net.IP{10, 0, 0, 16})), false, "ACK 10.0.0.16:68"},
		"discover with broadcast flag": {
			pkt(t, dhcpv4.MessageTypeDiscover, mac(4), dhcpv4.WithBroadcast(true)), false, "OFFER 255.255.255.255:68 bflag"},
		"inform: ACK to ciaddr without lease": {
			pkt(t, dhcpv4.MessageTypeInform, mac(9), dhcpv4.WithClientIP(net.IP{10, 0, 0, 99})), false, "ACK 10.0.0.99:68 nolease"},
		"request with no address: dropped": {
			pkt(t, dhcpv4.MessageTypeRequest, mac(5)), false, "none"},
		"offer message from a client: ignored": {
			pkt(t, dhcpv4.MessageTypeOffer, mac(5)), false, "none"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, dst := e.send(t, tc.p, src68, tc.onProxy, t0.Add(time.Minute))
			got := "none"
			if r != nil {
				got = r.MessageType().String() + " " + dst.String()
				if r.IsBroadcast() {
					got += " bflag"
				}
				if r.MessageType() == dhcpv4.MessageTypeAck && !r.Options.Has(dhcpv4.OptionIPAddressLeaseTime) {
					got += " nolease"
				}
			}
			if got != tc.want {
				t.Errorf("reply = %q, want %q", got, tc.want)
			}
		})
	}
	// RELEASE frees, and the address can go to another client.
	e.send(t, pkt(t, dhcpv4.MessageTypeRelease, mac(1), ciaddr), netip.MustParseAddrPort("10.0.0.10:68"), false, t0.Add(time.Minute))
	if n := len(e.s.Leases()); n != 0 {
		t.Errorf("leases after RELEASE = %d, want 0", n)
	}
	e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(2), reqIP("10.0.0.10")), src68, false, t0.Add(2*time.Minute))
	r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeRequest, mac(2), srvID, reqIP("10.0.0.10")), src68, false, t0.Add(2*time.Minute))
	if r == nil || r.MessageType() != dhcpv4.MessageTypeAck {
		t.Errorf("REQUEST for a released address: %v, want ACK", r)
	}
	// DECLINE takes it out of the pool: mac 2, now known, is NAKed for it.
	e.send(t, pkt(t, dhcpv4.MessageTypeDecline, mac(2), reqIP("10.0.0.10"), srvID), src68, false, t0.Add(3*time.Minute))
	e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(1)), src68, false, t0.Add(4*time.Minute))
	r, _ = e.send(t, pkt(t, dhcpv4.MessageTypeRequest, mac(1), reqIP("10.0.0.10")), src68, false, t0.Add(4*time.Minute))
	if r == nil || r.MessageType() != dhcpv4.MessageTypeNak {
		t.Errorf("REQUEST for a declined address: %v, want NAK", r)
	}
	st := e.s.Stats()
	if st.Releases != 1 || st.Declines != 1 || st.Informs != 1 {
		t.Errorf("stats = %+v", st)
	}
	if st.Refused[reasonUntrustedRelay] != 2 || st.Refused[reasonUnknownReboot] != 2 {
		t.Errorf("refused = %v, want 2 untrusted relays and 2 INIT-REBOOTs without a binding", st.Refused)
	}
}

func TestBootReplies(t *testing.T) {
	e := newTestServer(t, configs.ModeFull)
	tests := map[string]struct {
		mods []dhcpv4.Modifier
		want map[uint8]string
		file string
	}{
		"ipxe gets script url and no-proxy-wait": {
			[]dhcpv4.Modifier{pxeVendor, biosArch, ipxeUC},
			map[uint8]string{60: "PXEClient", 67: "http://10.0.0.1:8080/boot.ipxe?mac=${net0/mac}", 175: "\xb0\x01\x01"},
			"http://10.0.0.1:8080/boot.ipxe?mac=${net0/mac}"},
		"uefi http boot": {
			[]dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016:UNDI:003000")),
				dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{0, 16})},
			map[uint8]string{60: "HTTPClient", 67: "http://10.0.0.1:8080/ipxe.efi"},
			"http://10.0.0.1:8080/ipxe.efi"},
		"efi x64 pxe": {
			[]dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003016")),
				dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{0, 7}),
				dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientUUID), []byte{0, 1, 2, 3})},
			map[uint8]string{60: "PXEClient", 67: "ipxe.efi", 43: "\x06\x01\x08\xff", 97: "\x00\x01\x02\x03"},
			"ipxe.efi"},
	}
	i := byte(20)
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(i), tc.mods...), src68, false, t0)
			if r == nil {
				t.Fatal("no OFFER")
			}
			got := summarize(r, netip.AddrPort{}, 60, 67, 43, 175, 97)
			if d := cmp.Diff(tc.want, got.Opts); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
			if got.File != tc.file {
				t.Errorf("file field = %q, want %q", got.File, tc.file)
			}
		})
	}
}

func TestProxyMode(t *testing.T) {
	e := newTestServer(t, configs.ModeProxy)
	pxeSrc := netip.MustParseAddrPort("10.0.0.50:68")
	tests := map[string]struct {
		p       *dhcpv4.DHCPv4
		src     netip.AddrPort
		onProxy bool
		want    string
	}{
		"plain discover: silent": {pkt(t, dhcpv4.MessageTypeDiscover, mac(1)), src68, false, "none"},
		"other vendor class: silent": {pkt(t, dhcpv4.MessageTypeDiscover, mac(1),
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("udhcp 1.36.1"))), src68, false, "none"},
		"pxe discover: offer without address": {pkt(t, dhcpv4.MessageTypeDiscover, mac(2), pxeVendor, biosArch), src68, false,
			"OFFER 255.255.255.255:68 yiaddr=0.0.0.0 file=undionly.kpxe 60=PXEClient 43"},
		"pxe request on 67: left to the dhcp server": {pkt(t, dhcpv4.MessageTypeRequest, mac(2), pxeVendor, reqIP("10.0.0.50")), src68, false, "none"},
		"pxe request on 4011: ack to source": {pkt(t, dhcpv4.MessageTypeRequest, mac(2), pxeVendor, biosArch,
			dhcpv4.WithClientIP(net.IP{10, 0, 0, 50})), pxeSrc, true,
			"ACK 10.0.0.50:68 yiaddr=0.0.0.0 file=undionly.kpxe 60=PXEClient 43"},
		"plain request on 4011: silent": {pkt(t, dhcpv4.MessageTypeRequest, mac(3)), pxeSrc, true, "none"},
		"discover on 4011: ignored":     {pkt(t, dhcpv4.MessageTypeDiscover, mac(2), pxeVendor), pxeSrc, true, "none"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, dst := e.send(t, tc.p, tc.src, tc.onProxy, t0)
			got := "none"
			if r != nil {
				got = r.MessageType().String() + " " + dst.String() + " yiaddr=" + r.YourIPAddr.String() + " file=" + r.BootFileName +
					" 60=" + r.ClassIdentifier()
				if r.Options.Has(dhcpv4.OptionVendorSpecificInformation) {
					got += " 43"
				}
				if r.Options.Has(dhcpv4.OptionIPAddressLeaseTime) {
					got += " leasetime!"
				}
			}
			if got != tc.want {
				t.Errorf("reply = %q\nwant      %q", got, tc.want)
			}
		})
	}
	_, leases := e.rec.Snapshot()
	if len(leases) != 2 || !leases[0].Proxy || leases[0].Addr.IsValid() {
		t.Errorf("proxy lease events = %+v, want 2 with Proxy and no address", leases)
	}
	if c, ok := e.ht.ByMAC(mac(2)); !ok || !c.Proxy || c.Addr != addr("10.0.0.50") {
		t.Errorf("hosts table for the PXE client = %+v, %v", c, ok)
	}
}

func TestMalformedDropped(t *testing.T) {
	e := newTestServer(t, configs.ModeFull)
	reply := pkt(t, dhcpv4.MessageTypeDiscover, mac(1))
	reply.OpCode = dhcpv4.OpcodeBootReply
	bootp := pkt(t, dhcpv4.MessageTypeDiscover, mac(1))
	bootp.Options.Del(dhcpv4.OptionDHCPMessageType)
	noMAC := pkt(t, dhcpv4.MessageTypeDiscover, nil)
	noMAC.ClientHWAddr = nil
	good := pkt(t, dhcpv4.MessageTypeDiscover, mac(1)).ToBytes()
	badCookie := append([]byte(nil), good...)
	badCookie[236] = 0
	tests := map[string][]byte{
		"empty":          {},
		"short":          good[:100],
		"bad cookie":     badCookie,
		"reply opcode":   reply.ToBytes(),
		"plain bootp":    bootp.ToBytes(),
		"no hw address":  noMAC.ToBytes(),
		"option overrun": append(append([]byte(nil), good[:240]...), 53, 200, 1),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			before := e.s.Stats().Malformed
			if out, _ := e.s.Handle(b, src68, false, t0); out != nil {
				t.Errorf("got a reply to a malformed packet")
			}
			if got := e.s.Stats().Malformed; got != before+1 {
				t.Errorf("malformed counter %d -> %d, want +1", before, got)
			}
		})
	}
}

// FuzzHandle feeds raw datagrams through the function the socket loop calls,
// in both modes and on both ports: nothing may panic, and every reply must
// parse as a BOOTREPLY.
func FuzzHandle(f *testing.F) {
	for _, p := range []*dhcpv4.DHCPv4{
		pkt(f, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, biosArch),
		pkt(f, dhcpv4.MessageTypeDiscover, mac(1), pxeVendor, ipxeUC),
		pkt(f, dhcpv4.MessageTypeRequest, mac(1), srvID, reqIP("10.0.0.10")),
		pkt(f, dhcpv4.MessageTypeRequest, mac(1), dhcpv4.WithClientIP(net.IP{10, 0, 0, 10})),
		pkt(f, dhcpv4.MessageTypeInform, mac(1), dhcpv4.WithClientIP(net.IP{10, 0, 0, 99})),
		pkt(f, dhcpv4.MessageTypeRelease, mac(1), dhcpv4.WithClientIP(net.IP{10, 0, 0, 10})),
		pkt(f, dhcpv4.MessageTypeDecline, mac(1), reqIP("10.0.0.10")),
		pkt(f, dhcpv4.MessageTypeDiscover, mac(1), dhcpv4.WithGatewayIP(net.IP{10, 0, 0, 254})),
	} {
		f.Add(p.ToBytes(), false)
		f.Add(p.ToBytes(), true)
	}
	f.Add([]byte{1, 1, 6, 0}, false)
	// Configured options for every layer, so that each reply runs addOptions
	// and fit against what the datagram's options 55 and 57 say.
	full := newTestServerWith(f, configs.ModeFull, withOptions(f, optionsConfig))
	proxy := newTestServerWith(f, configs.ModeProxy, withOptions(f, optionsConfig))
	f.Fuzz(func(t *testing.T, b []byte, onProxy bool) {
		for _, e := range []*testEnv{full, proxy} {
			out, dst := e.s.Handle(b, src68, onProxy, t0)
			if out == nil {
				continue
			}
			r, err := dhcpv4.FromBytes(out)
			if err != nil || r.OpCode != dhcpv4.OpcodeBootReply {
				t.Fatalf("reply does not parse as BOOTREPLY: %v", err)
			}
			if !dst.IsValid() {
				t.Fatalf("reply without destination")
			}
			if len(out) > maxMessageSize-ipUDPHeaders {
				t.Fatalf("reply of %d bytes", len(out))
			}
		}
	})
}

// BenchmarkHandleDORA is one DISCOVER/OFFER + REQUEST/ACK through Handle,
// without sockets; "fsync" journals to disk as the server does. The
// options pair runs U-Boot clients that ask for options (55) against a
// server with the same two host entries (of the eight MACs) and no
// configured options, and one with options in every layer (optionsConfig:
// global, a matching class, the hosts' own and their names as option 12).
func BenchmarkHandleDORA(b *testing.B) {
	plain := []dhcpv4.Modifier{pxeVendor, biosArch}
	asking := append(ubootClient(22), asks(1, 3, 6, 12, 15, 17, 26, 42, 224))
	for _, bc := range []struct {
		name string
		sync bool
		mods []dhcpv4.Modifier
		edit func(testing.TB) func(*configs.Config)
	}{
		{"nosync", false, plain, nil},
		{"fsync", true, plain, nil},
		{"options-off", false, asking, func(t testing.TB) func(*configs.Config) { return withOptions(t, optionsOffConfig) }},
		{"options-on", false, asking, func(t testing.TB) func(*configs.Config) { return withOptions(t, optionsConfig) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var edit func(*configs.Config)
			if bc.edit != nil {
				edit = bc.edit(b)
			}
			e := newTestServerWith(b, configs.ModeFull, edit)
			benchDORA(b, e, bc.sync, bc.mods)
		})
	}
}

// benchDORA runs DORAs of 8 MACs against e.
func benchDORA(b *testing.B, e *testEnv, sync bool, mods []dhcpv4.Modifier) {
	e.s.leases.j.noSync = !sync
	var disc, req [8][]byte
	for i := range disc {
		disc[i] = pkt(b, dhcpv4.MessageTypeDiscover, mac(byte(i+1)), mods...).ToBytes()
	}
	now := t0
	w := &wire{} // as a socket worker: buffers reused
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() {
		// CPU time, not wall time: on a host busy with other work it says
		// what the request path costs.
		if n := b.N; n > 0 && cpu0 > 0 {
			b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/op")
		}
	}()
	for i := 0; b.Loop(); i++ {
		k := i % len(disc)
		out, _ := e.s.handle(w, disc[k], src68, false, now)
		if out == nil {
			b.Fatal("no offer")
		}
		if req[k] == nil {
			offer, _ := dhcpv4.FromBytes(out)
			r, _ := dhcpv4.NewRequestFromOffer(offer, mods...)
			req[k] = r.ToBytes()
		}
		if out, _ := e.s.handle(w, req[k], src68, false, now); out == nil {
			b.Fatal("no ack")
		}
	}
}
