package dhcp

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
)

const optionsConfig = `dhcp:
  options:
    ntp_servers: [10.0.0.5, 10.0.0.6]
    root_path: /srv/global
    router: 10.0.0.250
    log_servers: {value: 10.0.0.7, force: true}
    pxelinux_config_file: pxelinux.cfg/lab
    224: "hex:0102ff"
  class_options:
    - match: {vendor_class: U-Boot}
      options: {root_path: /srv/uboot, mtu: 1500}
    - match: {vendor_class: U-Boot, arch: uboot-arm64}
      options: {root_path: /srv/uboot-arm64}
    - match: {user_class: iPXE}
      options: {bootfile: "http://10.0.0.1/lab.ipxe"}
hosts:
  - mac: 52:54:00:00:00:07
    name: board7
    dhcp_options: {root_path: /srv/board7, bootfile: custom.efi}
  - mac: 52:54:00:00:00:08
    name: board8
    dhcp_options: {hostname: other-name}
`

// optionsOffConfig has optionsConfig's host entries without options or
// names: what BenchmarkHandleDORA's options-off runs against.
const optionsOffConfig = `hosts:
  - mac: 52:54:00:00:00:07
  - mac: 52:54:00:00:00:08
`

// withOptions is an edit for newTestServerWith: the dhcp options and hosts
// of text (a config file), as the config reads them.
func withOptions(t testing.TB, text string) func(*configs.Config) {
	c, err := configs.Parse("t.yaml", []byte(text), configs.Default())
	if err != nil {
		t.Fatal(err)
	}
	return func(cfg *configs.Config) {
		cfg.DHCP.Options, cfg.DHCP.ClassOptions, cfg.Hosts = c.DHCP.Options, c.DHCP.ClassOptions, c.Hosts
	}
}

func asks(codes ...uint8) dhcpv4.Modifier {
	var l []dhcpv4.OptionCode
	for _, c := range codes {
		l = append(l, dhcpv4.GenericOptionCode(c))
	}
	return dhcpv4.WithOption(dhcpv4.OptParameterRequestList(l...))
}

func ubootClient(arch byte) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("U-Boot.armv8")),
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{0, arch})}
}

// optionsOf lists a reply's options of codes as "code=value" (value as
// text, or hex for 224, 3, 7, 26, 42).
func optionsOf(r *dhcpv4.DHCPv4, codes ...uint8) string {
	var out []string
	for _, c := range codes {
		v := r.Options.Get(dhcpv4.GenericOptionCode(c))
		switch {
		case v == nil:
		case c == 3 || c == 7 || c == 26 || c == 42 || c == 224:
			out = append(out, fmt.Sprintf("%d=%x", c, v))
		default:
			out = append(out, fmt.Sprintf("%d=%s", c, v))
		}
	}
	return strings.Join(out, " ")
}

// TestOptionsPrecedence: host over class over global over pxeperf's own;
// sent when asked for or forced; option 12 is the host's name unless its
// options say otherwise; option 67 replaces the boot file everywhere.
func TestOptionsPrecedence(t *testing.T) {
	e := newTestServerWith(t, configs.ModeFull, withOptions(t, optionsConfig))
	all := []uint8{3, 7, 12, 17, 26, 42, 67, 209, 224}
	tests := []struct {
		name string
		mac  net.HardwareAddr
		mods []dhcpv4.Modifier
		want string
		file string
	}{
		{"global, router replaced, 7 forced, 209 not asked", mac(1), []dhcpv4.Modifier{asks(1, 3, 6, 12, 15, 17, 26, 42, 224)},
			"3=0a0000fa 7=0a000007 17=/srv/global 42=0a0000050a000006 67=boot.scr.uimg 224=0102ff", "boot.scr.uimg"},
		{"nothing asked but the forced", mac(1), []dhcpv4.Modifier{asks(1)}, "3=0a0000fa 7=0a000007 67=boot.scr.uimg", "boot.scr.uimg"},
		{"first class", mac(1), append(ubootClient(21), asks(17, 26)),
			"3=0a0000fa 7=0a000007 17=/srv/uboot 26=05dc 67=boot.scr.uimg", "boot.scr.uimg"},
		{"later class wins", mac(1), append(ubootClient(22), asks(17, 26)),
			"3=0a0000fa 7=0a000007 17=/srv/uboot-arm64 26=05dc 67=boot.scr.uimg", "boot.scr.uimg"},
		{"host wins, name as 12, bootfile", mac(7), append(ubootClient(22), asks(12, 17, 26)),
			"3=0a0000fa 7=0a000007 12=board7 17=/srv/board7 26=05dc 67=custom.efi", "custom.efi"},
		{"host's own hostname", mac(8), []dhcpv4.Modifier{asks(12)}, "3=0a0000fa 7=0a000007 12=other-name 67=boot.scr.uimg", "boot.scr.uimg"},
		{"iPXE class replaces the script URL", mac(1), []dhcpv4.Modifier{ipxeUC, asks(1)},
			"3=0a0000fa 7=0a000007 67=http://10.0.0.1/lab.ipxe", "http://10.0.0.1/lab.ipxe"},
		{"a host's bootfile is not iPXE's", mac(7), []dhcpv4.Modifier{ipxeUC, asks(1, 12)},
			"3=0a0000fa 7=0a000007 12=board7 67=http://10.0.0.1/lab.ipxe", "http://10.0.0.1/lab.ipxe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			offer, dst := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, tt.mac, tt.mods...), src68, false, t0)
			if offer == nil {
				t.Fatal("no OFFER")
			}
			if got := optionsOf(offer, all...); got != tt.want || offer.BootFileName != tt.file {
				t.Errorf("OFFER options\n got %s file %s\nwant %s file %s", got, offer.BootFileName, tt.want, tt.file)
			}
			req, _ := dhcpv4.NewRequestFromOffer(offer, tt.mods...)
			ack, _ := e.send(t, req, src68, false, t0)
			if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
				t.Fatalf("no ACK after %v", dst)
			}
			if got := optionsOf(ack, all...); got != tt.want {
				t.Errorf("ACK options\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	if _, l := e.rec.Snapshot(); len(l) == 0 || l[len(l)-1].BootFile != "http://10.0.0.1/lab.ipxe" {
		t.Errorf("last lease record %+v, want the replaced boot file", l)
	}
}

// TestOptionsProxyMode: a proxyDHCP reply carries only the options of
// configs.ProxyDHCPOption, on 67 and on 4011; client configuration (17,
// 42, even forced 7) is left to the network's DHCP server.
func TestOptionsProxyMode(t *testing.T) {
	e := newTestServerWith(t, configs.ModeProxy, withOptions(t, optionsConfig))
	mods := []dhcpv4.Modifier{pxeVendor, biosArch, asks(7, 17, 42, 66, 67, 209, 224)}
	offer, _ := e.send(t, pkt(t, dhcpv4.MessageTypeDiscover, mac(1), mods...), src68, false, t0)
	want := "66=10.0.0.1 67=undionly.kpxe 209=pxelinux.cfg/lab 224=0102ff"
	if offer == nil {
		t.Fatal("no proxy OFFER")
	}
	if got := optionsOf(offer, 3, 7, 17, 42, 66, 67, 209, 224); got != want {
		t.Errorf("proxy OFFER options\n got %s\nwant %s", got, want)
	}
	req := pkt(t, dhcpv4.MessageTypeRequest, mac(7), append(mods, dhcpv4.WithClientIP(net.IP{10, 0, 0, 99}))...)
	ack, _ := e.send(t, req, src68, true, t0)
	want = "66=10.0.0.1 67=custom.efi 209=pxelinux.cfg/lab 224=0102ff"
	if ack == nil {
		t.Fatal("no 4011 ACK")
	}
	if got := optionsOf(ack, 3, 7, 12, 17, 42, 66, 67, 209, 224); got != want || ack.BootFileName != "custom.efi" {
		t.Errorf("4011 ACK options\n got %s file %s\nwant %s", got, ack.BootFileName, want)
	}
}

// TestOptionsFitTheClient: configured options that would make a reply
// longer than 576 bytes (option 57: more) are left out, those the client
// asked for last first, and counted; pxeperf's own always stay.
func TestOptionsFitTheClient(t *testing.T) {
	var conf strings.Builder
	conf.WriteString("dhcp:\n  options:\n")
	var codes []uint8
	for c := 224; c < 231; c++ {
		fmt.Fprintf(&conf, "    %d: \"string:%s\"\n", c, strings.Repeat(string(rune('a'+c-224)), 120))
		codes = append(codes, uint8(c))
	}
	e := newTestServerWith(t, configs.ModeFull, withOptions(t, conf.String()))
	for _, tt := range []struct {
		maxSize  uint16
		limit, n int // reply at most limit bytes, with the first n of codes
	}{{0, 548, 1}, {1000, 972, 5}, {9000, 1472, 7}} {
		mods := []dhcpv4.Modifier{asks(codes...)}
		if tt.maxSize > 0 {
			mods = append(mods, dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(tt.maxSize)))
		}
		out, _ := e.s.Handle(pkt(t, dhcpv4.MessageTypeDiscover, mac(2), mods...).ToBytes(), src68, false, t0)
		r, err := dhcpv4.FromBytes(out)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint8
		for _, c := range codes {
			if r.Options.Has(dhcpv4.GenericOptionCode(c)) {
				got = append(got, c)
			}
		}
		if len(out) > tt.limit || !cmp.Equal(got, codes[:tt.n]) || r.Options.Get(dhcpv4.OptionSubnetMask) == nil {
			t.Errorf("57=%d: %d bytes with %v; want at most %d with %v and pxeperf's own", tt.maxSize, len(out), got, tt.limit, codes[:tt.n])
		}
	}
	if n := e.s.Stats().Refused[reasonOptionsDropped]; n != 2 {
		t.Errorf("refusals %q = %d, want 2 (one per reply that left options out)", reasonOptionsDropped, n)
	}
}

// TestOptionsAllocateNothing: a DORA with options for the client (global,
// class, host, hostname) allocates no more than one without any.
func TestOptionsAllocateNothing(t *testing.T) {
	mods := append(ubootClient(22), asks(1, 3, 6, 12, 15, 17, 26, 42, 224))
	allocs := func(e *testEnv, m net.HardwareAddr) float64 {
		disc := pkt(t, dhcpv4.MessageTypeDiscover, m, mods...).ToBytes()
		w := &wire{}
		out, _ := e.s.handle(w, disc, src68, false, t0)
		offer, _ := dhcpv4.FromBytes(out)
		r, _ := dhcpv4.NewRequestFromOffer(offer, mods...)
		req := r.ToBytes()
		return testing.AllocsPerRun(50, func() {
			e.s.handle(w, disc, src68, false, t0)
			e.s.handle(w, req, src68, false, t0)
		})
	}
	plain := allocs(newTestServer(t, configs.ModeFull, configs.Host{MAC: configs.MAC{HardwareAddr: mac(7)}}), mac(7))
	with := allocs(newTestServerWith(t, configs.ModeFull, withOptions(t, optionsConfig)), mac(7))
	if with > plain {
		t.Errorf("a DORA allocates %.0f times with options, %.0f without", with, plain)
	}
}
