package configs

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// TestParseDHCPOptionTypes encodes one value of each type, by name, by
// code and raw.
func TestParseDHCPOptionTypes(t *testing.T) {
	tests := []struct {
		key, text string
		code      byte
		want      string // hex
	}{
		{"subnet_mask", "255.255.255.0", 1, "ffffff00"},
		{"router", "10.0.0.1, 10.0.0.2", 3, "0a0000010a000002"},
		{"dns", "10.0.0.53", 6, "0a000035"},
		{"ntp-servers", "10.0.0.5 10.0.0.6", 42, "0a0000050a000006"},
		{"hostname", "board7", 12, hex.EncodeToString([]byte("board7"))},
		{"root_path", "10.0.0.1:/srv/nfs,vers=3", 17, hex.EncodeToString([]byte("10.0.0.1:/srv/nfs,vers=3"))},
		{"17", "/srv/nfs", 17, hex.EncodeToString([]byte("/srv/nfs"))},
		{"mtu", "9000", 26, "2328"},
		{"default_ttl", "64", 23, "40"},
		{"pxelinux_reboot_time", "0x10", 211, "00000010"},
		{"time_offset", "-3600", 2, "fffff1f0"},
		{"ip_forwarding", "false", 19, "00"},
		{"vendor_specific", "06:01:08:ff", 43, "060108ff"},
		{"224", "hex:01AB02", 224, "01ab02"},
		{"225", "ip:1.2.3.4,5.6.7.8", 225, "0102030405060708"},
		{"226", "string:hello", 226, "68656c6c6f"},
		{"root_path", "hex:", 17, ""},
		// RFC 3397's own example: eng.apple.com., marketing.apple.com.
		{"domain_search", "eng.apple.com, marketing.apple.com", 119,
			"03656e67056170706c6503636f6d00" + "096d61726b6574696e67c004"},
		{"domain_search", "lab.example., LAB.example, example", 119, "036c6162076578616d706c6500c000c004"},
		// RFC 3442: 0/0 via 10.0.0.1; 10.0.0.0/8; 192.168.128.0/17.
		{"classless_static_routes", "0.0.0.0/0 via 10.0.0.1, 10.0.0.0/8 10.0.0.2, 192.168.200.0/17 via 10.0.0.3", 121,
			"000a000001" + "080a0a000002" + "11c0a8800a000003"},
	}
	for _, tt := range tests {
		code, enc, err := ParseDHCPOption(tt.key, tt.text)
		if err != nil || code != tt.code || hex.EncodeToString(enc) != tt.want {
			t.Errorf("ParseDHCPOption(%q, %q) = %d %x %v; want %d %s", tt.key, tt.text, code, enc, err, tt.code, tt.want)
		}
	}
}

// TestParseDHCPOptionRefuses: every bad value says what and how to fix.
func TestParseDHCPOptionRefuses(t *testing.T) {
	tests := []struct{ key, text, want string }{
		{"ntp_servers", "10.0.0.300", `"10.0.0.300" is not an IPv4 address`},
		{"dns", "fe80::1", "not an IPv4 address"},
		{"broadcast", "10.0.0.255, 10.0.1.255", "takes one"},
		{"root_pth", "x", `did you mean root_path (17)?`},
		{"frobnicate", "x", "give its code instead"},
		{"0", "hex:00", "Pad option"},
		{"255", "hex:00", "End option"},
		{"256", "hex:00", "outside 1..254"},
		{"-1", "hex:00", "outside 1..254"},
		{"53", "hex:05", "message type"},
		{"54", "ip:10.0.0.1", "set address (or --addr)"},
		{"51", "3600", "dhcp.lease_time"},
		{"lease-time", "3600", "option 51 (lease time) follows dhcp.lease_time; set that instead"},
		{"server_id", "10.0.0.1", "option 54 (server identifier) is pxeperf's own address"},
		{"224", "0102", "hex:01ab..., ip:"},
		{"root_path", strings.Repeat("x", 256), "is 256 bytes encoded; one option holds at most 255"},
		{"root_path", "", "is empty"},
		{"mtu", "70000", `"70000" is not a number 0..65535`},
		{"ip_forwarding", "maybe", "not true or false"},
		{"224", "hex:0g", "not hex bytes"},
		{"224", "hex:012", "not hex bytes"},
		{"domain_search", "a..b", "empty label"},
		{"domain_search", "bad!name", "not a letter"},
		{"classless_static_routes", "10.0.0.0/8", `write "PREFIX via ROUTER"`},
		{"classless_static_routes", "10.0.0.0/33 via 1.2.3.4", "not a route of IPv4"},
	}
	for _, tt := range tests {
		_, _, err := ParseDHCPOption(tt.key, tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDHCPOption(%q, %q) = %v; want an error with %q", tt.key, tt.text, err, tt.want)
		}
	}
}

const optionsYAML = `dhcp:
  mode: full
  pool: 10.0.0.10-10.0.0.20
  options:
    ntp_servers: [10.0.0.5, 10.0.0.6]
    domain_search: lab.example
    224: {value: "hex:0102", force: true}
  class_options:
    - match: {arch: uboot-arm64, vendor_class: U-Boot}
      options:
        root_path: 10.0.0.1:/srv/uboot
hosts:
  - mac: 52:54:00:00:00:07
    name: board7
    dhcp_options:
      root_path: 10.0.0.1:/srv/board7
      mtu: 9000
`

// TestDHCPOptionsYAML: the shapes read, encode and render back.
func TestDHCPOptionsYAML(t *testing.T) {
	c, err := Parse("t.yaml", []byte(optionsYAML), Default())
	if err != nil {
		t.Fatal(err)
	}
	o := c.DHCP.Options
	if got := hex.EncodeToString(o["ntp_servers"].Bytes()); got != "0a0000050a000006" || o["ntp_servers"].Force {
		t.Errorf("ntp_servers = %s force %v", got, o["ntp_servers"].Force)
	}
	if f := o["224"]; !f.Force || f.Code() != 224 || hex.EncodeToString(f.Bytes()) != "0102" {
		t.Errorf("224 = %+v", f)
	}
	if m := c.DHCP.ClassOptions[0].Match; m.Arch != "uboot-arm64" || m.VendorClass != "U-Boot" {
		t.Errorf("class match = %+v", m)
	}
	h := c.Hosts[0].DHCPOptions
	if string(h["root_path"].Bytes()) != "10.0.0.1:/srv/board7" || h["mtu"].Code() != 26 {
		t.Errorf("host options = %+v", h)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("again.yaml", out, Default())
	if err != nil {
		t.Fatalf("rendered config does not load: %v\n%s", err, out)
	}
	for k, v := range c.DHCP.Options {
		w := again.DHCP.Options[k]
		if w.Code() != v.Code() || string(w.Bytes()) != string(v.Bytes()) || w.Force != v.Force {
			t.Errorf("round trip of %s: %+v, was %+v", k, w, v)
		}
	}
}

// TestDHCPOptionsErrors: a bad option in a file names its key, its line
// and the fix, as every config error does.
func TestDHCPOptionsErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"bad ip", "dhcp:\n  options:\n    ntp_servers: [10.0.0.5, 10.0.0.256]\n",
			[]string{"t.yaml:3", "dhcp.options.ntp_servers", `"10.0.0.256" is not an IPv4 address`}},
		{"host option", "hosts:\n  - mac: 52:54:00:00:00:01\n    dhcp_options:\n      root_pth: /srv\n",
			[]string{"t.yaml:4", "hosts[0].dhcp_options.root_pth", "did you mean root_path (17)?"}},
		{"server id", "dhcp:\n  options:\n    54: ip:10.0.0.9\n", []string{"t.yaml:3", "dhcp.options.54", "set address (or --addr)"}},
		{"force misspelt", "dhcp:\n  options:\n    mtu: {value: 1500, forced: true}\n",
			[]string{"t.yaml:3", "dhcp.options.mtu.forced", `did you mean "force"`}},
		{"twice", "dhcp:\n  options:\n    17: /a\n    root_path: /b\n", []string{"dhcp.options.root_path", "is option 17, as 17 is"}},
		{"class arch", "dhcp:\n  class_options:\n    - match: {arch: efi-x65}\n      options: {mtu: 1500}\n",
			[]string{"t.yaml:3", "dhcp.class_options[0].match.arch", `"efi-x65" is not an architecture name`}},
		{"class matches all", "dhcp:\n  class_options:\n    - options: {mtu: 1500}\n",
			[]string{"dhcp.class_options[0].match", "matches every client"}},
		{"class key", "dhcp:\n  class_options:\n    - match: {vendor: U-Boot}\n      options: {mtu: 1500}\n",
			[]string{"dhcp.class_options[0].match.vendor", "known keys here: arch, user_class, vendor_class"}},
		{"same key twice", "dhcp:\n  options:\n    mtu: 1500\n    mtu: 9000\n", []string{"dhcp.options.mtu", "is given twice"}},
		{"not a mapping", "dhcp:\n  options: [mtu]\n", []string{"t.yaml:2", "NAME or CODE to a value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml), Default())
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			at := 0
			for _, w := range tt.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q lacks %q (after offset %d)", msg, w, at)
				}
				at += i
			}
		})
	}
}

// TestDHCPOptionsJSON: a host entry's options read from JSON as from YAML
// (the host API's bodies) and render in the same shape.
func TestDHCPOptionsJSON(t *testing.T) {
	var o DHCPOptions
	if err := json.Unmarshal([]byte(`{"root_path": "/srv/x", "ntp_servers": ["10.0.0.5"], "224": {"value": "hex:ff", "force": true}, "mtu": 1500}`), &o); err != nil {
		t.Fatal(err)
	}
	var p problems
	validateDHCPOptions("dhcp_options", o, p.add)
	if len(p) != 0 || o["mtu"].Code() != 26 || string(o["mtu"].Bytes()) != "\x05\xdc" || !o["224"].Force {
		t.Fatalf("from JSON: %+v, problems %v", o, p)
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"224":{"value":"hex:ff","force":true},"mtu":"1500","ntp_servers":"10.0.0.5","root_path":"/srv/x"}`; string(b) != want {
		t.Errorf("to JSON: %s, want %s", b, want)
	}
	var host struct {
		Opts DHCPOptions `json:"dhcp_options"`
	}
	host.Opts = o
	if err := json.Unmarshal([]byte(`{"dhcp_options": null}`), &host); err != nil || host.Opts != nil {
		t.Errorf("null options: %v, %v", host.Opts, err)
	}
	var bad DHCPOptions
	if err := json.Unmarshal([]byte(`{"ntp_servers": "10.0.0.999"}`), &bad); err != nil {
		t.Fatal(err)
	}
	p = nil
	validateDHCPOptions("dhcp_options", bad, p.add)
	if len(p) != 1 || !strings.Contains(p[0].Error(), "dhcp_options.ntp_servers: \"10.0.0.999\" is not an IPv4 address") {
		t.Errorf("bad JSON option: %v", p)
	}
}

// FuzzParseDHCPOption: no text panics the parser; what it accepts fits
// one option, and a domain list decodes back (pointers followed) to the
// names given.
func FuzzParseDHCPOption(f *testing.F) {
	for _, s := range [][2]string{{"domain_search", "a.b, c.a.b"}, {"domain_search", "x.y z.y x.y"},
		{"classless_static_routes", "0.0.0.0/0 via 1.2.3.4"}, {"224", "hex:01ab"}, {"ntp_servers", "1.2.3.4 5.6.7.8"},
		{"mtu", "1500"}, {"time_offset", "-1"}, {"300", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, key, text string) {
		code, enc, err := ParseDHCPOption(key, text)
		if err != nil {
			return
		}
		if len(enc) > 255 || code == 0 || code == 255 {
			t.Fatalf("accepted code %d with %d bytes", code, len(enc))
		}
		if code != 119 || strings.Contains(text, ":") {
			return
		}
		var want []string
		for _, n := range listItems(text, true) {
			want = append(want, strings.ToLower(strings.TrimSuffix(n, ".")))
		}
		if got := decodeDomains(t, enc); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("%q encodes as %x, which reads %q", text, enc, got)
		}
	})
}

// decodeDomains reads RFC 1035 names with compression pointers (each
// pointing back), as a client does.
func decodeDomains(t *testing.T, b []byte) []string {
	var out []string
	for i := 0; i < len(b); {
		var labels []string
		at, jumped, hops := i, false, 0
		for {
			if at >= len(b) || hops > 64 {
				t.Fatalf("%x: runs off at %d", b, at)
			}
			n := int(b[at])
			if n == 0 {
				if !jumped {
					i = at + 1
				}
				break
			}
			if n&0xc0 == 0xc0 {
				off := (n&0x3f)<<8 | int(b[at+1])
				if off >= at {
					t.Fatalf("%x: pointer at %d points forward to %d", b, at, off)
				}
				if !jumped {
					i = at + 2
				}
				at, jumped = off, true
				hops++
				continue
			}
			labels = append(labels, string(b[at+1:at+1+n]))
			at += 1 + n
		}
		out = append(out, strings.Join(labels, "."))
	}
	return out
}
