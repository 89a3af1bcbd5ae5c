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
		"proxy silent to plain client":             {"", -1, "", nil, true, bootReply{}, false},
		"proxy silent to other vendor class":       {"udhcp 1.36.1", 0, "", hostFile, true, bootReply{}, false},
		"full mode plain client gets no boot info": {"", -1, "", nil, false, bootReply{}, false},
		"full mode u-boot with option 93 only": {"U-Boot.armv8", 22, "", nil, false,
			bootReply{File: "boot.scr.uimg"}, true},
		"full mode host entry with boot file": {"", -1, "", hostFile, false,
			bootReply{File: "custom/board7.efi"}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := classify(request(t, tc.vendor, tc.arch, tc.ipxe))
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
			if got := classify(request(t, "", tc.arch, "")).Arch; got != tc.want {
				t.Errorf("arch = %d, want %d", got, tc.want)
			}
		})
	}
}
