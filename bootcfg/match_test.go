package bootcfg

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustMAC(t testing.TB, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMatch(t *testing.T) {
	mac := mustMAC(t, "aa:bb:cc:dd:ee:0f")
	tests := map[string]struct {
		name string
		want Request
		ok   bool
	}{
		"pxelinux mac":           {"pxelinux.cfg/01-aa-bb-cc-dd-ee-0f", Request{Loader: PXELinux, MAC: mac, Name: "pxelinux.cfg/01-aa-bb-cc-dd-ee-0f"}, true},
		"pxelinux mac upper":     {"pxelinux.cfg/01-AA-BB-CC-DD-EE-0F", Request{Loader: PXELinux, MAC: mac, Name: "pxelinux.cfg/01-AA-BB-CC-DD-EE-0F"}, true},
		"pxelinux leading slash": {"/pxelinux.cfg/01-aa-bb-cc-dd-ee-0f", Request{Loader: PXELinux, MAC: mac, Name: "pxelinux.cfg/01-aa-bb-cc-dd-ee-0f"}, true},
		"pxelinux in boot dir":   {"boot/pxelinux.cfg/01-aa-bb-cc-dd-ee-0f", Request{Loader: PXELinux, MAC: mac, Dir: "boot/", Name: "pxelinux.cfg/01-aa-bb-cc-dd-ee-0f"}, true},
		"pxelinux in deep dir":   {"/a/b/pxelinux.cfg/C0A8320A", Request{Loader: PXELinux, IPHex: "C0A8320A", Dir: "a/b/", Name: "pxelinux.cfg/C0A8320A"}, true},
		"pxelinux ip prefix":     {"pxelinux.cfg/C0A8", Request{Loader: PXELinux, IPHex: "C0A8", Name: "pxelinux.cfg/C0A8"}, true},
		"pxelinux ip lower":      {"pxelinux.cfg/c0a8320a", Request{Loader: PXELinux, IPHex: "C0A8320A", Name: "pxelinux.cfg/c0a8320a"}, true},
		"pxelinux ip one digit":  {"pxelinux.cfg/C", Request{Loader: PXELinux, IPHex: "C", Name: "pxelinux.cfg/C"}, true},
		"pxelinux default":       {"pxelinux.cfg/default", Request{Loader: PXELinux, Default: true, Name: "pxelinux.cfg/default"}, true},
		"uboot default arch":     {"pxelinux.cfg/default-arm-sunxi-sunxi", Request{Loader: PXELinux, Default: true, Name: "pxelinux.cfg/default-arm-sunxi-sunxi"}, true},
		"grub default":           {"grub.cfg", Request{Loader: GRUB, Default: true, Name: "grub.cfg"}, true},
		"grub prefix dir":        {"/boot/grub/grub.cfg", Request{Loader: GRUB, Default: true, Dir: "boot/grub/", Name: "grub.cfg"}, true},
		"grub mac":               {"boot/grub/grub.cfg-01-aa-bb-cc-dd-ee-0f", Request{Loader: GRUB, MAC: mac, Dir: "boot/grub/", Name: "grub.cfg-01-aa-bb-cc-dd-ee-0f"}, true},
		"grub ip":                {"grub.cfg-C0A832", Request{Loader: GRUB, IPHex: "C0A832", Name: "grub.cfg-C0A832"}, true},
		"uboot script":           {"boot.scr.uimg", Request{Loader: UBoot, Default: true, Name: "boot.scr.uimg"}, true},
		"uboot script plain":     {"/boot/boot.scr", Request{Loader: UBoot, Default: true, Dir: "boot/", Name: "boot.scr"}, true},

		// UUID names come first in every loader's chain; pxeperf knows
		// hosts by MAC, so they are left to the file root.
		"pxelinux uuid":        {"pxelinux.cfg/b8945908-d6a6-41a9-611d-74a6ab80b83d", Request{}, false},
		"grub uuid":            {"grub.cfg-b8945908-d6a6-41a9-611d-74a6ab80b83d", Request{}, false},
		"grub ipv6":            {"grub.cfg-fe80--1", Request{}, false},
		"grub default suffix":  {"grub.cfg-default", Request{}, false},
		"pxelinux ip too long": {"pxelinux.cfg/C0A8320A0", Request{}, false},
		"pxelinux not hex":     {"pxelinux.cfg/C0G8", Request{}, false},
		"pxelinux infiniband":  {"pxelinux.cfg/20-aa-bb-cc-dd-ee-0f", Request{}, false},
		"pxelinux mac colons":  {"pxelinux.cfg/01-aa:bb:cc:dd:ee:0f", Request{}, false},
		"pxelinux mac short":   {"pxelinux.cfg/01-aa-bb-cc-dd-ee", Request{}, false},
		"pxelinux bare dir":    {"pxelinux.cfg/", Request{}, false},
		"pxelinux subdir":      {"pxelinux.cfg/x/default", Request{}, false},
		"pxelinux.cfg suffix":  {"mypxelinux.cfg/default", Request{}, false},
		"default dash only":    {"pxelinux.cfg/default-", Request{}, false},
		"kernel":               {"boot/vmlinuz", Request{}, false},
		"empty":                {"", Request{}, false},
		"slash":                {"/", Request{}, false},
		"grub.cfg dir":         {"grub.cfg/x", Request{}, false},
		"garbage":              {"\x00\xff../..//pxelinux.cfg", Request{}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := Match(tt.name)
			if ok != tt.ok {
				t.Fatalf("Match(%q) ok = %v, want %v (%+v)", tt.name, ok, tt.ok, got)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Match(%q) (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func TestChains(t *testing.T) {
	mac := mustMAC(t, "88:99:AA:BB:CC:DD")
	ip := netip.MustParseAddr("192.168.2.91")
	tests := map[string]struct {
		got, want []string
	}{
		// The example of syslinux's pxelinux documentation, U-Boot's
		// pxe_mac_path + pxe_ipaddr_paths (8 names) + "default".
		"pxelinux": {PXELinuxChain(mac, ip), []string{
			"pxelinux.cfg/01-88-99-aa-bb-cc-dd",
			"pxelinux.cfg/C0A8025B", "pxelinux.cfg/C0A8025", "pxelinux.cfg/C0A802", "pxelinux.cfg/C0A80",
			"pxelinux.cfg/C0A8", "pxelinux.cfg/C0A", "pxelinux.cfg/C0", "pxelinux.cfg/C",
			"pxelinux.cfg/default",
		}},
		"uboot": {UBootPXEChain(mac, ip, "arm", "sunxi", "sunxi"), []string{
			"pxelinux.cfg/01-88-99-aa-bb-cc-dd",
			"pxelinux.cfg/C0A8025B", "pxelinux.cfg/C0A8025", "pxelinux.cfg/C0A802", "pxelinux.cfg/C0A80",
			"pxelinux.cfg/C0A8", "pxelinux.cfg/C0A", "pxelinux.cfg/C0", "pxelinux.cfg/C",
			"pxelinux.cfg/default-arm-sunxi-sunxi", "pxelinux.cfg/default-arm-sunxi", "pxelinux.cfg/default-arm",
			"pxelinux.cfg/default",
		}},
		"uboot no soc": {UBootDefaults("arm", "", "qemu-arm"), []string{"pxelinux.cfg/default-arm"}},
		"grub": {GRUBChain(mac, ip), []string{
			"grub.cfg-01-88-99-aa-bb-cc-dd",
			"grub.cfg-C0A8025B", "grub.cfg-C0A8025", "grub.cfg-C0A802", "grub.cfg-C0A80",
			"grub.cfg-C0A8", "grub.cfg-C0A", "grub.cfg-C0", "grub.cfg-C",
			"grub.cfg",
		}},
		"ipv4-mapped":  {PXELinuxChain(nil, netip.MustParseAddr("::ffff:10.0.2.15"))[:1], []string{"pxelinux.cfg/0A00020F"}},
		"no mac, ipv6": {GRUBChain(nil, netip.MustParseAddr("fe80::1")), []string{"grub.cfg"}},
		"nothing":      {PXELinuxChain(nil, netip.Addr{}), []string{"pxelinux.cfg/default"}},
		"8-byte mac":   {GRUBChain(net.HardwareAddr{1, 2, 3, 4, 5, 6, 7, 8}, netip.Addr{}), []string{"grub.cfg"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every name a loader asks for must come back as a request for the client
// it was built from, under any folder.
func TestChainsRoundTrip(t *testing.T) {
	mac := mustMAC(t, "52:54:00:12:34:56")
	ip := netip.MustParseAddr("10.0.2.15")
	hex := "0A00020F"
	chains := map[Loader][]string{
		PXELinux: UBootPXEChain(mac, ip, "arm", "sunxi", "sunxi"),
		GRUB:     GRUBChain(mac, ip),
	}
	for l, names := range chains {
		for _, dir := range []string{"", "/", "boot/", "/tftp/boot/grub/"} {
			for _, n := range names {
				r, ok := Match(dir + n)
				if !ok || r.Loader != l {
					t.Errorf("Match(%q) = %+v, %v; want a %s request", dir+n, r, ok, l)
					continue
				}
				switch {
				case r.MAC != nil:
					if r.MAC.String() != mac.String() {
						t.Errorf("Match(%q).MAC = %s, want %s", dir+n, r.MAC, mac)
					}
				case r.IPHex != "":
					if hex[:len(r.IPHex)] != r.IPHex {
						t.Errorf("Match(%q).IPHex = %s, not a prefix of %s", dir+n, r.IPHex, hex)
					}
				case !r.Default:
					t.Errorf("Match(%q) = %+v: neither MAC, IP nor default", dir+n, r)
				}
				if got := r.Dir + r.Name; got != trimLeadingSlash(dir+n) {
					t.Errorf("Match(%q): Dir+Name = %q", dir+n, got)
				}
			}
		}
	}
}

func trimLeadingSlash(s string) string {
	for len(s) > 0 && s[0] == '/' {
		s = s[1:]
	}
	return s
}

func FuzzMatch(f *testing.F) {
	for _, s := range []string{
		"pxelinux.cfg/01-aa-bb-cc-dd-ee-ff", "boot/pxelinux.cfg/C0A8", "pxelinux.cfg/default-arm",
		"grub.cfg", "grub.cfg-01-aa-bb-cc-dd-ee-ff", "grub.cfg-0A", "boot.scr.uimg", "/", "", "pxelinux.cfg/",
		"pxelinux.cfg/01-aa-bb-cc-dd-ee-f\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		r, ok := Match(name)
		if !ok {
			if r.Loader != "" {
				t.Fatalf("Match(%q) = %+v with ok false", name, r)
			}
			return
		}
		n := 0
		if r.MAC != nil {
			n++
			if len(r.MAC) != 6 {
				t.Fatalf("Match(%q).MAC = %v", name, r.MAC)
			}
		}
		if r.IPHex != "" {
			n++
			if len(r.IPHex) > 8 {
				t.Fatalf("Match(%q).IPHex = %q", name, r.IPHex)
			}
		}
		if r.Default {
			n++
		}
		if n != 1 {
			t.Fatalf("Match(%q) = %+v: want exactly one of MAC, IPHex, Default", name, r)
		}
	})
}
