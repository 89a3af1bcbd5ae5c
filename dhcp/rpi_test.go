package dhcp

import (
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// piOpt97 is a Pi 4 B's option 97: type 0, "RPi4", revision 0x00c03111,
// the MAC's low four bytes, serial 0x1a2b3c4d (all little-endian).
var piOpt97 = mustHex("00" + "52506934" + "1131c000" + "320136c2" + "4d3c2b1a")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseRPiOption97(t *testing.T) {
	i, ok := ParseRPiOption97(piOpt97)
	want := RPiInfo{Model: "RPi4", Revision: 0x00c03111, MACLow: [4]byte{0x32, 0x01, 0x36, 0xc2}, Serial: 0x1a2b3c4d}
	if !ok || i != want || i.SerialString() != "1a2b3c4d" {
		t.Fatalf("parse: %+v %v (serial %q), want %+v", i, ok, i.SerialString(), want)
	}
	if b := AppendRPiOption97(nil, want); !bytes.Equal(b, piOpt97) {
		t.Fatalf("encode: %x, want %x", b, piOpt97)
	}
	five := bytes.Clone(piOpt97)
	five[4] = '5'
	if i, ok := ParseRPiOption97(five); !ok || i.Model != "RPi5" {
		t.Fatalf("RPi5: %+v %v", i, ok)
	}
	for name, v := range map[string][]byte{
		"pc uuid":    mustHex("00" + "4c4c4544004a3310804cb4c04f4d4432"),
		"short":      piOpt97[:16],
		"long":       append(bytes.Clone(piOpt97), 0),
		"type 1":     append([]byte{1}, piOpt97[1:]...),
		"other cc":   append([]byte{0, 'R', 'P', 'i', '3'}, piOpt97[5:]...),
		"empty":      nil,
		"serial hex": []byte("00000000000000000"),
	} {
		if i, ok := ParseRPiOption97(v); ok {
			t.Errorf("%s: parsed as %+v", name, i)
		}
	}
	pi, _ := net.ParseMAC("dc:a6:32:01:36:c2")
	const class = "PXEClient:Arch:00000:UNDI:002001"
	old := mustHex("00" + "4d3c2b1a4d3c2b1a4d3c2b1a4d3c2b1a")  // DHCP_OPTION97=0: the serial four times
	custom := append(mustHex("00"+"78563412"), piOpt97[5:]...) // DHCP_OPTION97=0x12345678
	for name, tc := range map[string]struct {
		mac    net.HardwareAddr
		v      []byte
		serial string
		rpi    bool
	}{
		"default":         {pi, piOpt97, "1a2b3c4d", true},
		"old format":      {pi, old, "1a2b3c4d", true},
		"custom prefix":   {pi, custom, "1a2b3c4d", true},
		"no 97":           {pi, nil, "", true},
		"old, not a pi":   {net.HardwareAddr{2, 0, 0, 0, 0, 1}, old, "", false},
		"pi, pc-sized 97": {pi, piOpt97[:16], "", true},
	} {
		c := client{MAC: tc.mac, Vendor: class}
		c.Pi, c.RPi = isRPi(tc.mac, class, tc.v)
		if c.RPi != tc.rpi || c.serial() != tc.serial {
			t.Errorf("%s: rpi %v serial %q, want %v %q", name, c.RPi, c.serial(), tc.rpi, tc.serial)
		}
	}
	if got := serialHex(0x0000abcd); got != "0000abcd" {
		t.Errorf("serialHex: %q", got)
	}
}

// TestRPiVendorOption: option 43 is byte for byte what dnsmasq sends for
// pxe-service=0,"Raspberry Pi Boot", and the menu check finds the item
// in it and nowhere else.
func TestRPiVendorOption(t *testing.T) {
	want := mustHex("060103" + "0a0400505845" + "0914000011" + hex.EncodeToString([]byte("Raspberry Pi Boot")) + "ff")
	if !bytes.Equal(rpiVendorOption, want) {
		t.Fatalf("option 43 %x, want %x", rpiVendorOption, want)
	}
	if !HasRPiBootMenu(rpiVendorOption) {
		t.Fatal("HasRPiBootMenu misses pxeperf's own option 43")
	}
	for name, v := range map[string][]byte{
		"x86 pxe":       pxeVendorOption[:],
		"no menu":       mustHex("0a0400505845ff"),
		"other item":    append(mustHex("090a00000007"), "Windows"...),
		"truncated":     want[:20],
		"item in other": append(mustHex("0a1400"), "Raspberry Pi Boot.."...),
	} {
		if HasRPiBootMenu(v) {
			t.Errorf("%s: %x taken for a Pi boot menu", name, v)
		}
	}
}

// TestRPiReply: a Pi's DISCOVER (option 97, or a Pi MAC without it) gets
// option 43 with the boot menu, option 66 as a dotted quad, siaddr, and
// no boot file, in full and proxy mode; a PC with the same option 60 from
// another OUI still gets undionly.kpxe and no menu.
func TestRPiReply(t *testing.T) {
	for _, mode := range []string{"full", "proxy"} {
		e := newTestServer(t, mode)
		for name, tc := range map[string]struct {
			mac   string
			opt97 []byte
			pi    bool
		}{
			"pi4 opt97":     {"dc:a6:32:01:36:c2", piOpt97, true},
			"pi oui only":   {"e4:5f:01:00:00:01", nil, true},
			"opt97 any mac": {"02:00:00:00:00:09", piOpt97, true},
			"pc same class": {"02:00:00:00:00:0a", nil, false},
		} {
			out := e.piDiscover(t, tc.mac, tc.opt97)
			if out == nil {
				t.Fatalf("%s/%s: no reply", mode, name)
			}
			opt43 := out.Options.Get(dhcpv4.OptionVendorSpecificInformation)
			if got := HasRPiBootMenu(opt43); got != tc.pi {
				t.Errorf("%s/%s: boot menu %v (43=%x), want %v", mode, name, got, opt43, tc.pi)
			}
			if !tc.pi {
				if out.BootFileName != "undionly.kpxe" {
					t.Errorf("%s/%s: file %q, want undionly.kpxe", mode, name, out.BootFileName)
				}
				continue
			}
			siaddr, _ := netip.AddrFromSlice(out.ServerIPAddr.To4())
			if string(out.Options.Get(dhcpv4.OptionTFTPServerName)) != e.s.tftpAddr.String() || siaddr != e.s.tftpAddr ||
				out.BootFileName != "" || out.Options.Has(dhcpv4.OptionBootfileName) {
				t.Errorf("%s/%s: 66=%q siaddr=%s file=%q 67=%v, want 66 and siaddr %s, no file", mode, name,
					out.Options.Get(dhcpv4.OptionTFTPServerName), siaddr, out.BootFileName,
					out.Options.Has(dhcpv4.OptionBootfileName), e.s.tftpAddr)
			}
		}
	}
}

// piDiscover hands the server a Pi bootloader's DISCOVER.
func (e *testEnv) piDiscover(t *testing.T, mac string, opt97 []byte) *dhcpv4.DHCPv4 {
	t.Helper()
	hw, _ := net.ParseMAC(mac)
	r, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, hw, dhcpv4.WithBroadcast(true), piRequestOptions(opt97)),
		src68, false, time.Now())
	return r
}

// TestRPiSerialObserved: the ACK of a Pi's REQUEST carries the boot menu
// too and puts its serial on its sighting, which TFTP reads by address.
func TestRPiSerialObserved(t *testing.T) {
	e := newTestServer(t, "full")
	hw, _ := net.ParseMAC("dc:a6:32:01:36:c2")
	offer := e.piDiscover(t, hw.String(), piOpt97)
	if offer == nil {
		t.Fatal("no offer")
	}
	ack, _ := e.send(t, pkt(t, dhcpv4.MessageTypeRequest, hw, piRequestOptions(piOpt97), srvID,
		reqIP(offer.YourIPAddr.String())), src68, false, time.Now())
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck ||
		!HasRPiBootMenu(ack.Options.Get(dhcpv4.OptionVendorSpecificInformation)) || ack.BootFileName != "" {
		t.Fatalf("reply %v, want ACK with the boot menu and no file", ack)
	}
	a, _ := netip.AddrFromSlice(ack.YourIPAddr.To4())
	c, ok := e.ht.ByAddr(a)
	if !ok || c.Serial != "1a2b3c4d" || c.MAC.String() != hw.String() {
		t.Fatalf("sighting of %s: %+v %v, want MAC %s serial 1a2b3c4d", a, c, ok, hw)
	}
}

// piRequestOptions are the options the Pi 4 bootloader sends: option 60
// "PXEClient:Arch:00000:UNDI:002001", 93 = 0 (x86 BIOS), 94 UNDI 2.1, 97
// when given, and a request list with 43, 60 and 66.
func piRequestOptions(opt97 []byte) dhcpv4.Modifier {
	return func(d *dhcpv4.DHCPv4) {
		d.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001"))
		d.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{0, 0}))
		d.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 2, 1}))
		if opt97 != nil {
			d.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientMachineIdentifier, opt97))
		}
		d.UpdateOption(dhcpv4.OptParameterRequestList(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter,
			dhcpv4.OptionVendorSpecificInformation, dhcpv4.OptionClassIdentifier, dhcpv4.OptionTFTPServerName))
	}
}

func FuzzParseRPiOption97(f *testing.F) {
	f.Add(piOpt97)
	f.Add([]byte{})
	f.Add(mustHex("00" + "52506935" + "00000000" + "00000000" + "ffffffff"))
	pi := net.HardwareAddr{0xdc, 0xa6, 0x32, 1, 2, 3}
	f.Fuzz(func(t *testing.T, v []byte) {
		// Any option 97 from a Pi MAC: a Pi, with a serial of 8 digits or none.
		c := client{}
		if c.Pi, c.RPi = isRPi(pi, rpiVendorClass, v); !c.RPi || (c.serial() != "" && len(c.serial()) != 8) {
			t.Fatalf("%x from a Pi MAC: rpi %v serial %q", v, c.RPi, c.serial())
		}
		i, ok := ParseRPiOption97(v)
		if !ok {
			return
		}
		if b := AppendRPiOption97(nil, i); !bytes.Equal(b, v) {
			t.Fatalf("round trip %x -> %+v -> %x", v, i, b)
		}
		if s := i.SerialString(); len(s) != 8 {
			t.Fatalf("serial %q", s)
		}
	})
}
