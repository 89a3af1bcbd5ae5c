package configs

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DHCPOptions are DHCP options to send, keyed as the config writes them:
// by name (root_path, ntp-servers) or by code ("17"). Each value is
// checked and encoded when it is read, so the DHCP server sends the bytes
// as they are; what is wrong with one is kept beside it for Validate to
// report under its key (hosts[0].dhcp_options.root_path), the same way for
// a config file and a host entry sent as JSON.
type DHCPOptions map[string]DHCPOption

// DHCPOption is one option's value as written, whether it is forced, and
// its code and encoding.
type DHCPOption struct {
	// Value is the text written (a list's items joined by ", ").
	Value string `yaml:"value"`
	// Force sends the option even when the client's parameter request list
	// (option 55) does not ask for it, as dnsmasq's dhcp-option-force.
	Force bool `yaml:"force"`

	code    byte
	enc     []byte
	wire    string // enc as a string, for the DHCP server to copy without allocating
	problem *optProblem
}

// optProblem is what is wrong with an option: sub is "" or a key under the
// option's ("force"), msg says what and the fix.
type optProblem struct{ sub, msg string }

// Code is the option's code (0 when it did not parse).
func (o DHCPOption) Code() byte { return o.code }

// Bytes is the option's encoded value, as sent.
func (o DHCPOption) Bytes() []byte { return o.enc }

// Wire is Bytes as a string.
func (o DHCPOption) Wire() string { return o.wire }

// Equal reports whether o and p are the same option value (go-cmp uses
// it, as the encoding is unexported).
func (o DHCPOption) Equal(p DHCPOption) bool {
	same := o.problem == nil && p.problem == nil || o.problem != nil && p.problem != nil && *o.problem == *p.problem
	return o.Value == p.Value && o.Force == p.Force && o.code == p.code && o.wire == p.wire && same
}

// optType says how an option's text is encoded.
type optType uint8

const (
	tRaw     optType = iota // no known type: the value needs hex:, ip: or string:
	tIP                     // one IPv4 address
	tIPs                    // one or more IPv4 addresses
	tString                 // text, as bytes
	tU8                     // unsigned 8-bit number
	tU16                    // unsigned 16-bit number
	tU32                    // unsigned 32-bit number
	tI32                    // signed 32-bit number
	tBool                   // true/false as 1/0
	tDomains                // RFC 1035 names, compressed (option 119, RFC 3397)
	tRoutes                 // RFC 3442 classless static routes
	tHex                    // bytes written as hex
)

var typeText = map[optType]string{
	tRaw: "raw bytes", tIP: "one IPv4 address", tIPs: "IPv4 addresses", tString: "text", tU8: "a number 0..255",
	tU16: "a number 0..65535", tU32: "a number 0..4294967295", tI32: "a signed 32-bit number", tBool: "true or false",
	tDomains: "domain names", tRoutes: `routes "PREFIX via ROUTER"`, tHex: "hex bytes",
}

// optDef is an option pxeperf knows by name. proxy marks the options a
// proxyDHCP reply carries (see dhcp/DESIGN.md#options-in-proxy-mode).
type optDef struct {
	code    byte
	name    string
	typ     optType
	proxy   bool
	aliases []string
}

// optDefs are the options known by name: RFC 2132's that labs use, and
// those of netboot (PXE, pxelinux, iPXE).
var optDefs = []optDef{
	{1, "subnet_mask", tIP, false, []string{"netmask"}},
	{2, "time_offset", tI32, false, nil},
	{3, "router", tIPs, false, []string{"routers", "gateway"}},
	{4, "time_servers", tIPs, false, nil},
	{6, "dns", tIPs, false, []string{"dns_servers", "dns_server"}},
	{7, "log_servers", tIPs, false, []string{"log_server"}},
	{9, "lpr_servers", tIPs, false, nil},
	{12, "hostname", tString, false, []string{"host_name"}},
	{13, "boot_file_size", tU16, true, nil},
	{15, "domain_name", tString, false, []string{"domain"}},
	{16, "swap_server", tIP, false, nil},
	{17, "root_path", tString, false, []string{"rootpath"}},
	{18, "extensions_path", tString, false, nil},
	{19, "ip_forwarding", tBool, false, nil},
	{23, "default_ttl", tU8, false, nil},
	{26, "mtu", tU16, false, []string{"interface_mtu"}},
	{28, "broadcast", tIP, false, []string{"broadcast_address"}},
	{40, "nis_domain", tString, false, nil},
	{41, "nis_servers", tIPs, false, nil},
	{42, "ntp_servers", tIPs, false, []string{"ntp_server", "ntpsrv"}},
	{43, "vendor_specific", tHex, true, []string{"vendor_encap"}},
	{44, "netbios_name_servers", tIPs, false, []string{"netbios_ns"}},
	{46, "netbios_node_type", tU8, false, nil},
	{47, "netbios_scope", tString, false, nil},
	{66, "tftp_server", tString, true, []string{"tftp_server_name"}},
	{67, "bootfile", tString, true, []string{"bootfile_name", "boot_file"}},
	{69, "smtp_servers", tIPs, false, nil},
	{100, "posix_timezone", tString, false, nil},
	{101, "tz_database", tString, false, []string{"timezone"}},
	{114, "captive_portal", tString, false, nil},
	{119, "domain_search", tDomains, false, []string{"search"}},
	{121, "classless_static_routes", tRoutes, false, []string{"classless_routes", "routes"}},
	{150, "tftp_server_address", tIPs, true, nil},
	{175, "ipxe_encap", tHex, true, nil},
	{209, "pxelinux_config_file", tString, true, nil},
	{210, "pxelinux_path_prefix", tString, true, nil},
	{211, "pxelinux_reboot_time", tU32, true, nil},
	{252, "wpad", tString, false, nil},
	// Known so that their names get refusedCodes' fix, not a guess.
	{50, "requested_address", tIP, false, nil},
	{51, "lease_time", tU32, false, nil},
	{52, "overload", tU8, false, nil},
	{53, "message_type", tU8, false, nil},
	{54, "server_id", tIP, false, []string{"server_identifier"}},
	{55, "parameter_request_list", tHex, false, nil},
	{57, "max_message_size", tU16, false, nil},
	{58, "renewal_time", tU32, false, nil},
	{59, "rebinding_time", tU32, false, nil},
	{60, "vendor_class", tString, false, []string{"vendor_class_identifier"}},
	{61, "client_id", tHex, false, nil},
	{82, "relay_agent_information", tHex, false, nil},
	{93, "client_arch", tU16, false, nil},
	{97, "client_uuid", tHex, false, nil},
}

// optByName and optByCode index optDefs.
var optByName, optByCode = func() (map[string]*optDef, [256]*optDef) {
	names := map[string]*optDef{}
	var codes [256]*optDef
	for i := range optDefs {
		d := &optDefs[i]
		codes[d.code] = d
		names[d.name] = d
		for _, a := range d.aliases {
			names[a] = d
		}
	}
	return names, codes
}()

// refusedCodes are options pxeperf sets itself from other settings, or
// that only a client sends: each is refused with the setting to change.
var refusedCodes = map[byte]string{
	0:   "is the Pad option, not one to send; remove it",
	50:  "(requested address) is sent by clients, not servers; for a fixed address set hosts[].address",
	51:  "(lease time) follows dhcp.lease_time; set that instead",
	52:  "(option overload) is pxeperf's to decide; remove it",
	53:  "(message type) is pxeperf's to decide; remove it",
	54:  "(server identifier) is pxeperf's own address; set address (or --addr) instead",
	55:  "(parameter request list) is sent by clients, not servers; remove it",
	57:  "(maximum message size) is sent by clients, not servers; remove it",
	58:  "(renewal time) follows dhcp.lease_time (half of it); set that instead",
	59:  "(rebinding time) follows dhcp.lease_time (7/8 of it); set that instead",
	60:  "(vendor class) is what PXE needs it to be (PXEClient, HTTPClient); remove it",
	61:  "(client identifier) is the client's own, echoed back; remove it",
	82:  "(relay agent information) is the relay's, echoed back; remove it",
	93:  "(client architecture) is sent by clients, not servers; to match on it use dhcp.class_options' match.arch",
	97:  "(client UUID) is the client's own, echoed back; remove it",
	255: "is the End option, not one to send; remove it",
}

// ProxyDHCPOption reports whether a proxyDHCP reply carries option code:
// the boot options PXE firmware and the loaders it starts read from a
// proxyDHCP reply, and the site-specific codes 224-254 (RFC 3942).
func ProxyDHCPOption(code byte) bool {
	if d := optByCode[code]; d != nil {
		return d.proxy
	}
	return code >= 224 && code <= 254
}

// maxOptionLen is the most one option holds: pxeperf does not split an
// option into several (RFC 3396), as many boot ROMs read only the first.
const maxOptionLen = 255

// ParseDHCPOption reads one option: key is a name or a code, text its
// value (a list's items joined by commas). It returns the code and the
// encoded value, or an error that says what is wrong and the fix.
func ParseDHCPOption(key, text string) (byte, []byte, error) {
	code, def, err := optionKey(key)
	if err != nil {
		return 0, nil, err
	}
	typ := tRaw
	if def != nil {
		typ = def.typ
	}
	if p, rest, ok := strings.Cut(text, ":"); ok {
		switch p {
		case "hex":
			typ, text = tHex, rest
		case "ip":
			typ, text = tIPs, rest
		case "string":
			typ, text = tString, rest
		}
	}
	if typ == tRaw {
		return 0, nil, fmt.Errorf("option %d has no type pxeperf knows; write its value as hex:01ab..., ip:192.168.50.1,192.168.50.2 or string:TEXT", code)
	}
	enc, err := encodeOption(typ, text)
	if err != nil {
		return 0, nil, err
	}
	if len(enc) > maxOptionLen {
		return 0, nil, fmt.Errorf("is %d bytes encoded; one option holds at most %d: shorten it", len(enc), maxOptionLen)
	}
	return code, enc, nil
}

// optionKey reads a key: a code 1..254 or a name (dashes as underscores,
// any case).
func optionKey(key string) (byte, *optDef, error) {
	k := strings.TrimSpace(key)
	if n, err := strconv.Atoi(k); err == nil {
		if n < 0 || n > 255 {
			return 0, nil, fmt.Errorf("code %d is outside 1..254; DHCPv4 option codes are one byte", n)
		}
		if why, ok := refusedCodes[byte(n)]; ok {
			return 0, nil, fmt.Errorf("option %d %s", n, why)
		}
		return byte(n), optByCode[n], nil
	}
	k = strings.ToLower(strings.ReplaceAll(k, "-", "_"))
	if d, ok := optByName[k]; ok {
		if why, ok := refusedCodes[d.code]; ok {
			return 0, nil, fmt.Errorf("option %d %s", d.code, why)
		}
		return d.code, d, nil
	}
	msg := fmt.Sprintf("%q is not an option name pxeperf knows", key)
	if near := nearestOption(k); near != nil {
		msg += fmt.Sprintf("; did you mean %s (%d)?", near.name, near.code)
	} else {
		msg += "; give its code instead (e.g. \"224\": hex:01ab), or see README's DHCP options for the names"
	}
	return 0, nil, fmt.Errorf("%s", msg)
}

// nearestOption is the known option whose name or alias is nearest to k,
// if within maxEdits.
func nearestOption(k string) *optDef {
	var best *optDef
	bestD := maxEdits(k) + 1
	names := make([]string, 0, len(optByName))
	for n := range optByName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if d := editDistance(k, n); d < bestD {
			best, bestD = optByName[n], d
		}
	}
	return best
}

// encodeOption encodes text as typ.
func encodeOption(typ optType, text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	switch typ {
	case tIP, tIPs:
		return encodeIPs(text, typ == tIP)
	case tString:
		if text == "" {
			return nil, fmt.Errorf("is empty; give the text, or remove the option")
		}
		return []byte(text), nil
	case tU8, tU16, tU32:
		bits := map[optType]int{tU8: 8, tU16: 16, tU32: 32}[typ]
		n, err := strconv.ParseUint(text, 0, bits)
		if err != nil {
			return nil, fmt.Errorf("%q is not %s", text, typeText[typ])
		}
		b := []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
		return b[4-bits/8:], nil
	case tI32:
		n, err := strconv.ParseInt(text, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not %s", text, typeText[typ])
		}
		return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, nil
	case tBool:
		switch strings.ToLower(text) {
		case "true", "yes", "on", "1":
			return []byte{1}, nil
		case "false", "no", "off", "0":
			return []byte{0}, nil
		}
		return nil, fmt.Errorf("%q is not true or false", text)
	case tDomains:
		return encodeDomains(text)
	case tRoutes:
		return encodeRoutes(text)
	default:
		return encodeHex(text)
	}
}

// listItems splits a list written as text at commas (and, when spaces,
// at blanks too), dropping empty items.
func listItems(text string, spaces bool) []string {
	f := func(r rune) bool { return r == ',' || spaces && (r == ' ' || r == '\t' || r == '\n') }
	return strings.FieldsFunc(text, f)
}

func encodeIPs(text string, one bool) ([]byte, error) {
	items := listItems(text, true)
	if len(items) == 0 {
		return nil, fmt.Errorf("is empty; give an IPv4 address, e.g. 192.168.50.1")
	}
	if one && len(items) > 1 {
		return nil, fmt.Errorf("%q is %d addresses; this option takes one", text, len(items))
	}
	var out []byte
	for _, it := range items {
		a, err := netip.ParseAddr(it)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("%q is not an IPv4 address; write e.g. 192.168.50.1", it)
		}
		b := a.As4()
		out = append(out, b[:]...)
	}
	return out, nil
}

func encodeHex(text string) ([]byte, error) {
	h := strings.NewReplacer(":", "", " ", "", "-", "").Replace(text)
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("%q is not hex bytes; write e.g. hex:01ab02 or hex:01:ab:02", text)
	}
	return b, nil
}

// encodeDomains writes names as RFC 1035 labels, each suffix already
// written replaced by a pointer to it (offsets count from the option's
// first byte, as RFC 3397 says).
func encodeDomains(text string) ([]byte, error) {
	names := listItems(text, true)
	if len(names) == 0 {
		return nil, fmt.Errorf("is empty; give domain names, e.g. [lab.example, example.com]")
	}
	var out []byte
	at := map[string]int{} // a suffix written, to its offset
	for _, name := range names {
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		labels := strings.Split(name, ".")
		if err := checkDomain(name, labels); err != nil {
			return nil, err
		}
		for i := range labels {
			suffix := strings.Join(labels[i:], ".")
			if off, ok := at[suffix]; ok {
				out = append(out, 0xc0|byte(off>>8), byte(off))
				break
			}
			if len(out) < 0x3fff {
				at[suffix] = len(out)
			}
			out = append(out, byte(len(labels[i])))
			out = append(out, labels[i]...)
			if i == len(labels)-1 {
				out = append(out, 0)
			}
		}
	}
	return out, nil
}

func checkDomain(name string, labels []string) error {
	if len(name) > 253 {
		return fmt.Errorf("%q is longer than 253 characters, too long for a domain name", name)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("%q has an empty label or one over 63 characters; write e.g. lab.example.com", name)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("%q has %q, not a letter, digit, - or _; write e.g. lab.example.com", name, r)
			}
		}
	}
	return nil
}

// encodeRoutes writes RFC 3442 routes: the prefix length, the
// destination's significant octets, the router.
func encodeRoutes(text string) ([]byte, error) {
	items := listItems(text, false)
	if len(items) == 0 {
		return nil, fmt.Errorf(`is empty; give routes, e.g. ["10.0.0.0/8 via 192.168.50.1"]`)
	}
	var out []byte
	for _, it := range items {
		f := strings.Fields(it)
		if len(f) == 3 && f[1] == "via" {
			f = []string{f[0], f[2]}
		}
		if len(f) != 2 {
			return nil, fmt.Errorf(`%q is not a route; write "PREFIX via ROUTER", e.g. "10.0.0.0/8 via 192.168.50.1" (0.0.0.0/0 for the default)`, it)
		}
		p, err1 := netip.ParsePrefix(f[0])
		gw, err2 := netip.ParseAddr(f[1])
		if err1 != nil || err2 != nil || !p.Addr().Is4() || !gw.Is4() {
			return nil, fmt.Errorf(`%q is not a route of IPv4 addresses; write e.g. "10.0.0.0/8 via 192.168.50.1"`, it)
		}
		dst, g := p.Masked().Addr().As4(), gw.As4()
		out = append(out, byte(p.Bits()))
		out = append(out, dst[:(p.Bits()+7)/8]...)
		out = append(out, g[:]...)
	}
	return out, nil
}

// UnmarshalYAML implements yaml.Unmarshaler: a mapping of option (name
// or code) to a value, a list of values, or {value: ..., force: true}.
// Bad values are kept for Validate (see DHCPOptions); only a value that
// is not a mapping at all fails here.
func (o *DHCPOptions) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || n.Value == "") {
		*o = nil
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return typeError(n.Line, "DHCP options are a mapping of NAME or CODE to a value, e.g. root_path: 192.168.50.1:/srv/nfs")
	}
	out := make(DHCPOptions, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if _, dup := out[k]; dup {
			out[k] = DHCPOption{problem: &optProblem{"", "is given twice; keep one"}}
			continue
		}
		out[k] = readOption(k, n.Content[i+1])
	}
	*o = out
	return nil
}

// readOption reads one option's value node.
func readOption(key string, v *yaml.Node) DHCPOption {
	var o DHCPOption
	if v.Kind == yaml.MappingNode {
		var val *yaml.Node
		for i := 0; i+1 < len(v.Content); i += 2 {
			switch sub, x := v.Content[i].Value, v.Content[i+1]; sub {
			case "value":
				val = x
			case "force":
				if err := x.Decode(&o.Force); err != nil {
					o.problem = &optProblem{"force", fmt.Sprintf("%q is not true or false", x.Value)}
					return o
				}
			default:
				o.problem = &optProblem{sub, fmt.Sprintf("unknown key %q; an option's mapping has value and force", sub)}
				return o
			}
		}
		if val == nil {
			o.problem = &optProblem{"", "has no value; write {value: ..., force: true}"}
			return o
		}
		v = val
	}
	text, err := nodeText(v)
	if err != nil {
		o.problem = &optProblem{"", err.Error()}
		return o
	}
	o.Value = text
	code, enc, err := ParseDHCPOption(key, text)
	if err != nil {
		o.problem = &optProblem{"", err.Error()}
		return o
	}
	o.code, o.enc, o.wire = code, enc, string(enc)
	return o
}

// nodeText is a value node's text: a scalar's, or a list's items joined
// by ", ".
func nodeText(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return v.Value, nil
	case yaml.SequenceNode:
		var items []string
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("a list item is not a single value; write e.g. [192.168.50.1, 192.168.50.2]")
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ", "), nil
	}
	return "", fmt.Errorf("is not a value; write a value, a list, or {value: ..., force: true}")
}

// MarshalYAML implements yaml.Marshaler: the value as written, or
// {value, force} when forced.
func (o DHCPOption) MarshalYAML() (any, error) {
	if !o.Force {
		return o.Value, nil
	}
	return struct {
		Value string `yaml:"value" json:"value"`
		Force bool   `yaml:"force" json:"force"`
	}{o.Value, true}, nil
}

// MarshalJSON writes the YAML shape as JSON.
func (o DHCPOption) MarshalJSON() ([]byte, error) {
	v, _ := o.MarshalYAML()
	return json.Marshal(v)
}

// UnmarshalJSON reads the YAML shape from JSON (a JSON document is YAML),
// through UnmarshalYAML: the same values, the same problems.
func (o *DHCPOptions) UnmarshalJSON(b []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("dhcp_options: %v", err)
	}
	if len(doc.Content) == 0 {
		*o = nil
		return nil
	}
	return o.UnmarshalYAML(doc.Content[0])
}

// Sorted lists the options by code (then key), for the DHCP server to
// compile once.
func (o DHCPOptions) Sorted() []DHCPOption {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]DHCPOption, 0, len(o))
	for _, k := range keys {
		out = append(out, o[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].code < out[j].code })
	return out
}

// validateDHCPOptions reports each option's problem under its key, and
// two keys naming the same option.
func validateDHCPOptions(prefix string, opts DHCPOptions, add func(key, format string, a ...any)) {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[byte]string{}
	for _, k := range keys {
		o := opts[k]
		if p := o.problem; p != nil {
			key := join(prefix, k)
			if p.sub != "" {
				key = join(key, p.sub)
			}
			add(key, "%s", p.msg)
			continue
		}
		if other, dup := seen[o.code]; dup {
			add(join(prefix, k), "is option %d, as %s is; keep one of the two", o.code, other)
		}
		seen[o.code] = k
	}
}

// ClassOptions are DHCP options for the clients a match picks.
type ClassOptions struct {
	Match   ClassMatch  `yaml:"match"`
	Options DHCPOptions `yaml:"options"`
}

// ClassMatch picks clients; every field given must match.
type ClassMatch struct {
	// Arch is an architecture name as dhcp.boot_files has them (option
	// 93): efi-x64, uboot-arm64, bios... A client without option 93
	// matches no arch.
	Arch string `yaml:"arch,omitempty"`
	// VendorClass matches option 60 by its start: "U-Boot" matches
	// "U-Boot.armv8", "PXEClient" every PXE ROM.
	VendorClass string `yaml:"vendor_class,omitempty"`
	// UserClass matches option 77 exactly (or one of its RFC 3004
	// entries): "iPXE".
	UserClass string `yaml:"user_class,omitempty"`
}

// validateClassOptions checks dhcp.class_options: each entry matches on
// something known and sets options.
func validateClassOptions(classes []ClassOptions, add func(key, format string, a ...any)) {
	for i, c := range classes {
		key := fmt.Sprintf("dhcp.class_options[%d]", i)
		m := c.Match
		if m.Arch == "" && m.VendorClass == "" && m.UserClass == "" {
			add(key+".match", "matches every client; give arch, vendor_class or user_class, or put the options in dhcp.options")
		}
		if _, ok := ArchByName(m.Arch); m.Arch != "" && !ok {
			add(key+".match.arch", "%q is not an architecture name; use one of %s", m.Arch, strings.Join(ArchNames(), ", "))
		}
		if len(c.Options) == 0 {
			add(key+".options", "sets no option; add e.g. root_path: ..., or remove the entry")
		}
		validateDHCPOptions(key+".options", c.Options, add)
	}
}
