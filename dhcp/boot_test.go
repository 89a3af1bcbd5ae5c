package dhcp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
)

func TestNewBooterURLBase(t *testing.T) {
	tests := map[string]string{
		":80":          "http://10.0.0.1",
		":8080":        "http://10.0.0.1:8080",
		"0.0.0.0:8080": "http://10.0.0.1:8080",
		"[::]:80":      "http://10.0.0.1",
		"":             "http://10.0.0.1",
	}
	d := configs.Default().DHCP
	for listen, want := range tests {
		t.Run(listen, func(t *testing.T) {
			if got := newBooter(&d, netip.MustParseAddr("10.0.0.1"), listen).httpBase; got != want {
				t.Errorf("httpBase for %q = %q, want %q", listen, got, want)
			}
		})
	}
}

// toMsg parses a request built with dhcpv4 as the server does.
func toMsg(t testing.TB, req *dhcpv4.DHCPv4) *msg {
	t.Helper()
	var m msg
	if err := m.parse(req.ToBytes()); err != nil {
		t.Fatal(err)
	}
	return &m
}

// request builds a DISCOVER with the given option 60, 93 and 77/175.
func request(t testing.TB, vendor string, arch int, ipxe string) *dhcpv4.DHCPv4 {
	t.Helper()
	mods := []dhcpv4.Modifier{}
	if vendor != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptClassIdentifier(vendor)))
	}
	if arch >= 0 {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{byte(arch >> 8), byte(arch)}))
	}
	switch ipxe {
	case "77":
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optUserClass), []byte("iPXE")))
	case "77rfc":
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optUserClass), []byte("\x04iPXE")))
	case "175":
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optIPXEEncap), []byte{19, 1, 1}))
	}
	req, err := dhcpv4.NewDiscovery(net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}, mods...)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestDecide(t *testing.T) {
	cfg := configs.Default().DHCP
	cfg.BootFiles = map[string]string{"efi-arm64": "arm/grubaa64.efi"}
	b := newBooter(&cfg, netip.MustParseAddr("10.0.0.1"), ":8080")
	hostFile := &configs.Host{Name: "board7", BootFile: "custom/board7.efi"}
	hostURL := &configs.Host{Name: "board8", BootFile: "http://10.0.0.9/x.efi"}
	const pxe = "PXEClient:Arch:00000:UNDI:002001"
	tests := map[string]struct {
		vendor string
		arch   int
		ipxe   string
		host   *configs.Host
		proxy  bool
		want   bootReply
		wantOK bool
	}{
		"bios pxe without option 93": {pxe, -1, "", nil, false,
			bootReply{File: "undionly.kpxe", Class: classPXE, PXEVendor: true}, true},
		"bios pxe arch 0": {pxe, 0, "", nil, true,
			bootReply{File: "undionly.kpxe", Class: classPXE, PXEVendor: true}, true},
		"efi x64 arch 7": {"PXEClient:Arch:00007:UNDI:003000", 7, "", nil, false,
			bootReply{File: "ipxe.efi", Class: classPXE, PXEVendor: true}, true},
		"efi x64 arch 9": {"PXEClient:Arch:00009:UNDI:003000", 9, "", nil, false,
			bootReply{File: "ipxe.efi", Class: classPXE, PXEVendor: true}, true},
		"arm64 from boot_files": {"PXEClient:Arch:00011:UNDI:003000", 11, "", nil, true,
			bootReply{File: "arm/grubaa64.efi", Class: classPXE, PXEVendor: true}, true},
		"unknown arch code falls back to bios": {pxe, 200, "", nil, false,
			bootReply{File: "undionly.kpxe", Class: classPXE, PXEVendor: true}, true},
		"ipxe user class gets script url": {pxe, 7, "77", nil, false,
			bootReply{File: "http://10.0.0.1:8080/boot.ipxe?mac=${net0/mac}", Class: classPXE, IPXE: true}, true},
		"ipxe rfc3004 user class": {pxe, 0, "77rfc", nil, true,
			bootReply{File: "http://10.0.0.1:8080/boot.ipxe?mac=${net0/mac}", Class: classPXE, IPXE: true}, true},
		"ipxe option 175": {pxe, 0, "175", nil, false,
			bootReply{File: "http://10.0.0.1:8080/boot.ipxe?mac=${net0/mac}", Class: classPXE, IPXE: true}, true},
		"ipxe ignores host boot file (no chainload loop)": {pxe, 0, "77", hostFile, false,
			bootReply{File: "http://10.0.0.1:8080/boot.ipxe?mac=${net0/mac}", Class: classPXE, IPXE: true}, true},
		"uefi http boot gets url": {"HTTPClient:Arch:00016:UNDI:003000", 16, "", nil, false,
			bootReply{File: "http://10.0.0.1:8080/ipxe.efi", Class: classHTTP}, true},
		"uefi http boot in proxy mode": {"HTTPClient:Arch:00016:UNDI:003000", 16, "", nil, true,
			bootReply{File: "http://10.0.0.1:8080/ipxe.efi", Class: classHTTP}, true},
		"host override for pxe": {pxe, 7, "", hostFile, false,
			bootReply{File: "custom/board7.efi", Class: classPXE, PXEVendor: true}, true},
		"host override for http boot becomes url": {"HTTPClient", 16, "", hostFile, false,
			bootReply{File: "http://10.0.0.1:8080/custom/board7.efi", Class: classHTTP}, true},
		"host url kept as is": {"HTTPClient", 16, "", hostURL, false,
			bootReply{File: "http://10.0.0.9/x.efi", Class: classHTTP}, true},
		"proxy silent to plain client":                 {"", -1, "", nil, true, bootReply{}, false},
		"proxy silent to other vendor class":           {"udhcp 1.36.1", 0, "", hostFile, true, bootReply{}, false},
		"full mode plain client gets the default file": {"", -1, "", nil, false, bootReply{File: "boot.scr.uimg"}, true},
		"full mode other vendor class gets the default file": {"udhcp 1.36.1", -1, "", nil, false,
			bootReply{File: "boot.scr.uimg"}, true},
		"full mode option 93 without class": {"", 7, "", nil, false, bootReply{File: "ipxe.efi"}, true},
		"u-boot armv8 with option 93 22": {"U-Boot.armv8", 22, "", nil, false,
			bootReply{File: "boot.scr.uimg"}, true},
		"u-boot armv7 with option 93 21": {"U-Boot.armv7", 21, "", nil, false,
			bootReply{File: "boot.scr.uimg"}, true},
		"u-boot without option 93": {"U-Boot", -1, "", nil, false,
			bootReply{File: "boot.scr.uimg"}, true},
		"u-boot with option 93 0 is not bios": {"U-Boot.x86_64", 0, "", nil, false,
			bootReply{File: "boot.scr.uimg"}, true},
		"u-boot with a configured arch entry": {"U-Boot.armv8", 11, "", nil, false,
			bootReply{File: "arm/grubaa64.efi"}, true},
		"u-boot in proxy mode is left to the dhcp server": {"U-Boot.armv8", 22, "", nil, true, bootReply{}, false},
		"http arm64 takes efi-arm64's file": {"HTTPClient:Arch:00019:UNDI:003000", 19, "", nil, false,
			bootReply{File: "http://10.0.0.1:8080/arm/grubaa64.efi", Class: classHTTP}, true},
		"full mode host entry with boot file": {"", -1, "", hostFile, false,
			bootReply{File: "custom/board7.efi"}, true},
		"u-boot host entry with boot file": {"U-Boot.armv7", 21, "", hostFile, false,
			bootReply{File: "custom/board7.efi"}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := classify(toMsg(t, request(t, tc.vendor, tc.arch, tc.ipxe)))
			got, ok := b.decide(c, tc.host, tc.proxy)
			if ok != tc.wantOK {
				t.Fatalf("decide ok = %v, want %v", ok, tc.wantOK)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("decide (-want +got):\n%s", d)
			}
		})
	}
}

func TestClassifyArch(t *testing.T) {
	tests := map[string]struct {
		arch int
		want uint16
	}{
		"absent": {-1, configs.ArchUnknown},
		"bios":   {0, 0},
		"x64":    {7, 7},
		"http":   {16, 16},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := classify(toMsg(t, request(t, "", tc.arch, ""))).Arch; got != tc.want {
				t.Errorf("arch = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDecideConfiguredUBootAndDefault(t *testing.T) {
	cfg := configs.Default().DHCP
	cfg.BootFiles = map[string]string{"uboot": "uboot/boot.scr", "default": "fallback.bin", "uboot-arm32": "zynq/boot.scr"}
	b := newBooter(&cfg, netip.MustParseAddr("10.0.0.1"), ":80")
	tests := map[string]struct {
		vendor string
		arch   int
		want   string
	}{
		"u-boot arm64 takes boot_files.uboot":        {"U-Boot.armv8", 22, "uboot/boot.scr"},
		"u-boot arm32 takes its own entry":           {"U-Boot.armv7", 21, "zynq/boot.scr"},
		"u-boot without option 93":                   {"U-Boot", -1, "uboot/boot.scr"},
		"no class no option 93 takes default":        {"", -1, "fallback.bin"},
		"pxe client without option 93 is still bios": {"PXEClient", -1, "undionly.kpxe"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := b.decide(classify(toMsg(t, request(t, tc.vendor, tc.arch, ""))), nil, false)
			if !ok || got.File != tc.want {
				t.Errorf("decide = %q, %v; want %q", got.File, ok, tc.want)
			}
		})
	}
}

// TestApplyBoot: siaddr is always the TFTP server; option 66 only when the
// client asks for it (option 55, or no option 55 at all: RFC 2131 3.5), and
// then it names the same address.
func TestApplyBoot(t *testing.T) {
	tftp := netip.MustParseAddr("10.0.0.5")
	for name, tc := range map[string]struct {
		prl []dhcpv4.OptionCode
		ask bool
	}{
		"asks for 66":           {[]dhcpv4.OptionCode{dhcpv4.OptionTFTPServerName, dhcpv4.OptionBootfileName}, true},
		"asks for others":       {[]dhcpv4.OptionCode{dhcpv4.OptionSubnetMask, dhcpv4.OptionBootfileName}, false},
		"sends no request list": {nil, true},
	} {
		ask := tc.ask
		t.Run(name, func(t *testing.T) {
			mods := []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("U-Boot.armv8"))}
			if tc.prl != nil {
				mods = append(mods, dhcpv4.WithOption(dhcpv4.OptParameterRequestList(tc.prl...)))
			}
			req, err := dhcpv4.New(append(mods, dhcpv4.WithHwAddr(net.HardwareAddr{0x52, 0x54, 0, 0, 0, 9}), dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover))...)
			if err != nil {
				t.Fatal(err)
			}
			m := toMsg(t, req)
			var rb reply
			rb.start(m, dhcpv4.MessageTypeOffer, tftp)
			applyBoot(&rb, m, classify(m), bootReply{File: "boot.scr.uimg"}, tftp)
			r, err := dhcpv4.FromBytes(rb.appendTo(nil))
			if err != nil {
				t.Fatal(err)
			}
			if r.ServerIPAddr.String() != "10.0.0.5" || r.BootFileName != "boot.scr.uimg" {
				t.Errorf("siaddr %s file %q, want 10.0.0.5 boot.scr.uimg", r.ServerIPAddr, r.BootFileName)
			}
			if got := r.Options.Get(dhcpv4.OptionTFTPServerName); ask != (string(got) == "10.0.0.5") || (!ask && got != nil) {
				t.Errorf("option 66 = %q with ask=%v", got, ask)
			}
		})
	}
}

func TestTFTPServerAddr(t *testing.T) {
	addr := netip.MustParseAddr("10.0.0.1")
	for listen, want := range map[string]string{":69": "10.0.0.1", "0.0.0.0:69": "10.0.0.1", "10.0.0.7:69": "10.0.0.7", "bad": "10.0.0.1"} {
		cfg := configs.Default()
		cfg.TFTP.Listen = listen
		if got := tftpServerAddr(cfg, addr); got.String() != want {
			t.Errorf("tftp.listen %q: next-server %s, want %s", listen, got, want)
		}
	}
}
