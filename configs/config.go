// Package configs holds pxeperf's typed configuration: one YAML file, decoded
// strictly (an unknown key or a bad value is an error naming the key, its line
// and the fix), an embedded default that is safe on an unknown network
// (proxyDHCP only, never hands out addresses), and example files for labs.
//
// Command-line flags override the file; see cmd/pxeperf.
package configs

import (
	"embed"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

//go:embed default.yaml examples/*.yaml
var files embed.FS

// DHCP modes.
const (
	ModeFull  = "full"  // lease pool: pxeperf is the network's DHCP server
	ModeProxy = "proxy" // proxyDHCP: PXE options only, beside an existing server
	ModeOff   = "off"
)

// Config is the whole configuration. Zero values are filled from the embedded
// default before a file is applied, so every field here has a default.
type Config struct {
	// Interface to bind DHCP to and to read MTU/offloads from. Default: the
	// first up, non-loopback interface with an IPv4 address.
	Interface string `yaml:"interface"`
	// Address clients reach pxeperf at (next-server, URLs). Default: the
	// interface's first IPv4 address.
	Address Addr `yaml:"address"`
	// Root folder served over TFTP and HTTP. Default ./images.
	Root string `yaml:"root"`
	// Data folder for state: leases, records, decompression cache. Default ./pxeperf-data.
	Data string `yaml:"data"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `yaml:"log_level"`

	DHCP  DHCP  `yaml:"dhcp"`
	TFTP  TFTP  `yaml:"tftp"`
	HTTP  HTTP  `yaml:"http"`
	Bench Bench `yaml:"bench"`
	// Templates override the built-in boot config templates of pxelinux,
	// GRUB and U-Boot for every host (a host's own templates win). Each is
	// inline text or "@file" read from the root; see package bootcfg.
	Templates Templates `yaml:"templates"`
	Hosts     []Host    `yaml:"hosts"`

	// File is the config file this came from ("" for the embedded default),
	// for messages that point into it.
	File string `yaml:"-"`
}

// Templates are Go text/template sources for the generated boot configs of
// each loader family: pxelinux.cfg/* (syslinux and U-Boot's `pxe`), GRUB's
// grub.cfg* and U-Boot's boot.scr.uimg. Empty: the built-in template.
type Templates struct {
	PXELinux Template `yaml:"pxelinux,omitempty"`
	GRUB     Template `yaml:"grub,omitempty"`
	UBoot    Template `yaml:"uboot,omitempty"`
}

// Template is a template's text, or "@file" naming a file in the root, with
// the config line its text starts on (for errors that point into the file).
type Template struct {
	Text string
	Line int
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (t *Template) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Msg: "a template is text: inline (use a | block) or @file from the root"}
	}
	t.Text, t.Line = n.Value, n.Line
	if t.Text == "" {
		t.Line = 0
	}
	if t.Line > 0 && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		t.Line++ // a block scalar's text starts on the line after its indicator
	}
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (t Template) MarshalYAML() (any, error) { return t.Text, nil }

// IsZero reports whether the template is unset (for omitempty).
func (t Template) IsZero() bool { return t.Text == "" }

// DHCP configures the DHCP server.
type DHCP struct {
	// Mode is full, proxy or off. Default proxy.
	Mode string `yaml:"mode"`
	// Pool of addresses handed out in full mode, "FIRST-LAST".
	Pool Pool `yaml:"pool"`
	// Netmask handed out in full mode. Default: the interface's.
	Netmask Addr `yaml:"netmask"`
	// Router (option 3) handed out in full mode; none when empty.
	Router Addr `yaml:"router"`
	// DNS servers (option 6) handed out in full mode.
	DNS []Addr `yaml:"dns"`
	// Domain name (option 15).
	Domain string `yaml:"domain"`
	// LeaseTime in full mode. Default 1h.
	LeaseTime time.Duration `yaml:"lease_time"`
	// BootFiles maps a client architecture name (see ArchNames) to the boot
	// file sent to it. Missing names take the defaults; an HTTP boot
	// architecture takes its PXE sibling's file (http-arm64 that of
	// efi-arm64). Two keys are not architectures: "uboot" is for U-Boot
	// clients (option 60 "U-Boot...") no architecture entry covers, and
	// "default" for clients that send neither option 93 nor a known class;
	// both default to boot.scr.uimg.
	BootFiles map[string]string `yaml:"boot_files"`
	// IPXEScript is the HTTP path handed to iPXE clients. Default /boot.ipxe.
	IPXEScript string `yaml:"ipxe_script"`
	// Port for DHCP (67) and PXE/proxy (4011); tests change them.
	Port      int `yaml:"port"`
	ProxyPort int `yaml:"proxy_port"`
}

// TFTP configures the TFTP server.
type TFTP struct {
	Enabled bool `yaml:"enabled"`
	// Listen address. Default ":69".
	Listen string `yaml:"listen"`
	// SinglePort answers every transfer from the listen port (for NAT and
	// containers) instead of one ephemeral port per transfer.
	SinglePort bool `yaml:"single_port"`
	// MaxBlockSize caps the blksize option. 0: as large as the interface MTU allows.
	MaxBlockSize int `yaml:"max_blksize"`
	// MaxWindowSize caps the RFC 7440 windowsize option. Default 64.
	MaxWindowSize int `yaml:"max_windowsize"`
	// Timeout per packet before a resend. Default 1s.
	Timeout time.Duration `yaml:"timeout"`
	// Retries before a transfer is given up. Default 5.
	Retries int `yaml:"retries"`
}

// HTTP configures HTTP boot and the iPXE script endpoint.
type HTTP struct {
	Enabled bool `yaml:"enabled"`
	// Listen address. Default ":80".
	Listen string `yaml:"listen"`
	// ReadHeaderTimeout bounds a slow client's request. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes idle keep-alive connections. Default 60s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// StallTimeout aborts a download that makes no progress for this long. Default 60s.
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// ShutdownGrace is how long running downloads may finish on shutdown. Default 30s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Interval is the period of the per-fetch interval samples (iperf3-style
	// lines in reports). Default (0) 1s.
	Interval time.Duration `yaml:"interval"`
	// Script is the iPXE script template served at /boot.ipxe for clients
	// without a host-specific script (Go text/template; see README), inline
	// or "@file" from the root.
	Script Template `yaml:"script,omitempty"`
}

// Bench configures the stream server (package stream) that
// `pxeperf bench --server HOST` runs its TCP and UDP tests against. It is
// off by default: it sends as fast as it is asked to (bounded to 60 s and
// 10 Gbit/s per test, 8 tests at once), which a lab turns on on purpose.
type Bench struct {
	Enabled bool `yaml:"enabled"`
	// Listen address. Default ":5211".
	Listen string `yaml:"listen"`
}

// Host is a per-MAC entry.
type Host struct {
	MAC      MAC    `yaml:"mac"`
	Name     string `yaml:"name"`
	Address  Addr   `yaml:"address"`   // fixed address in full mode
	BootFile string `yaml:"boot_file"` // overrides the arch map
	// Script is an iPXE script template for this host (inline text), or
	// "@file" to read a template from the root.
	Script  Template `yaml:"script,omitempty"`
	Kernel  string   `yaml:"kernel"`
	Initrd  string   `yaml:"initrd"`
	Cmdline string   `yaml:"cmdline"`
	// FDT is a device tree file for the kernel (pxelinux "fdt", GRUB
	// "devicetree", loaded to ${fdt_addr_r} by the U-Boot script); FDTDir a
	// folder of them, from which U-Boot picks ${fdtfile}.
	FDT    string `yaml:"fdt"`
	FDTDir string `yaml:"fdtdir"`
	// Templates override the generated boot configs for this host.
	Templates Templates         `yaml:"templates"`
	Labels    map[string]string `yaml:"labels"`
}

// HTTPBase is the base of the URLs pxeperf hands out for its HTTP server
// at addr: "http://ADDR", with ":PORT" unless http.listen is on port 80.
func (c *Config) HTTPBase(addr netip.Addr) string {
	base := "http://" + addr.String()
	if _, port, err := net.SplitHostPort(c.HTTP.Listen); err == nil && port != "" && port != "80" {
		if _, err := strconv.Atoi(port); err == nil {
			base += ":" + port
		}
	}
	return base
}

// Default returns the embedded default configuration.
func Default() *Config {
	c, err := Parse("default.yaml", mustRead("default.yaml"), nil)
	if err != nil {
		panic("embedded default config is invalid: " + err.Error())
	}
	return c
}

// Example returns the text of an embedded example config by base name
// ("lab-proxy", "isolated-full").
func Example(name string) ([]byte, error) {
	return files.ReadFile("examples/" + name + ".yaml")
}

// DefaultYAML is the embedded default file's text.
func DefaultYAML() []byte { return mustRead("default.yaml") }

func mustRead(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

// Validate checks the configuration as a whole. Errors name the key and say
// how to fix it.
func (c *Config) Validate() error {
	var errs []error
	add := func(key, format string, a ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, a...)})
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add("log_level", "%q is not a log level; use debug, info, warn or error", c.LogLevel)
	}
	if c.Root == "" {
		add("root", "must not be empty; set the folder to serve, e.g. ./images")
	}
	if c.Data == "" {
		add("data", "must not be empty; set a folder for leases and records, e.g. ./pxeperf-data")
	}
	if c.Address.IsValid() && !c.Address.Is4() {
		add("address", "%s is not an IPv4 address; PXE needs IPv4", c.Address)
	}
	d := &c.DHCP
	switch d.Mode {
	case ModeFull:
		if !d.Pool.IsValid() {
			add("dhcp.mode", "full mode needs an address pool; set dhcp.pool, e.g. pool: 192.168.50.100-192.168.50.200, or use mode: proxy beside an existing DHCP server")
		}
		if d.LeaseTime < time.Minute {
			add("dhcp.lease_time", "%s is too short; use at least 1m (e.g. 1h)", d.LeaseTime)
		}
	case ModeProxy, ModeOff:
	default:
		add("dhcp.mode", "%q is not a mode; use full (pxeperf hands out addresses), proxy (beside an existing DHCP server) or off", d.Mode)
	}
	if d.Netmask.IsValid() {
		if !isMask(d.Netmask) {
			add("dhcp.netmask", "%s is not a netmask; use e.g. 255.255.255.0", d.Netmask)
		}
	}
	for name, file := range d.BootFiles {
		if _, ok := ArchByName(name); !ok && name != BootUBoot && name != BootDefault {
			add("dhcp.boot_files."+name, "%q is not an architecture name; use one of %s", name, strings.Join(BootFileKeys(), ", "))
			continue
		}
		if strings.TrimSpace(file) == "" {
			add("dhcp.boot_files."+name, "is empty; name a file in the root (or a URL), or remove the key for the default")
		}
	}
	if !strings.HasPrefix(d.IPXEScript, "/") {
		add("dhcp.ipxe_script", "%q must be an HTTP path starting with /, e.g. /boot.ipxe", d.IPXEScript)
	}
	if d.Port < 1 || d.Port > 65535 {
		add("dhcp.port", "%d is not a port; use 67", d.Port)
	}
	if d.ProxyPort < 1 || d.ProxyPort > 65535 {
		add("dhcp.proxy_port", "%d is not a port; use 4011", d.ProxyPort)
	}
	t := &c.TFTP
	if _, err := netip.ParseAddrPort(fixHostPort(t.Listen)); err != nil {
		add("tftp.listen", "%q is not HOST:PORT; use e.g. :69 or 0.0.0.0:69", t.Listen)
	}
	if t.MaxBlockSize != 0 && (t.MaxBlockSize < 8 || t.MaxBlockSize > 65464) {
		add("tftp.max_blksize", "%d is outside 8..65464 (RFC 2348); use 0 for as large as the MTU allows", t.MaxBlockSize)
	}
	if t.MaxWindowSize < 1 || t.MaxWindowSize > 65535 {
		add("tftp.max_windowsize", "%d is outside 1..65535 (RFC 7440); 64 is a good cap", t.MaxWindowSize)
	}
	if t.Timeout < 10*time.Millisecond || t.Timeout > 255*time.Second {
		add("tftp.timeout", "%s is outside 10ms..255s; use e.g. 1s", t.Timeout)
	}
	if t.Retries < 1 {
		add("tftp.retries", "%d must be at least 1; use e.g. 5", t.Retries)
	}
	h := &c.HTTP
	if _, err := netip.ParseAddrPort(fixHostPort(h.Listen)); err != nil {
		add("http.listen", "%q is not HOST:PORT; use e.g. :80 or 0.0.0.0:8080", h.Listen)
	}
	for key, v := range map[string]time.Duration{
		"http.read_header_timeout": h.ReadHeaderTimeout, "http.idle_timeout": h.IdleTimeout,
		"http.stall_timeout": h.StallTimeout, "http.shutdown_grace": h.ShutdownGrace,
	} {
		if v <= 0 {
			add(key, "%s must be positive; e.g. 30s", v)
		}
	}
	if _, err := netip.ParseAddrPort(fixHostPort(c.Bench.Listen)); err != nil {
		add("bench.listen", "%q is not HOST:PORT; use e.g. :5211 or 0.0.0.0:5211", c.Bench.Listen)
	}
	seenMAC := map[string]int{}
	seenAddr := map[netip.Addr]int{}
	for i, host := range c.Hosts {
		key := fmt.Sprintf("hosts[%d]", i)
		if len(host.MAC.HardwareAddr) == 0 {
			add(key+".mac", "every host needs a mac, e.g. mac: 52:54:00:12:34:56")
			continue
		}
		if j, dup := seenMAC[host.MAC.String()]; dup {
			add(key+".mac", "%s is also hosts[%d]; merge the two entries", host.MAC, j)
		}
		seenMAC[host.MAC.String()] = i
		if host.Address.IsValid() {
			if !host.Address.Is4() {
				add(key+".address", "%s is not IPv4", host.Address)
			}
			if j, dup := seenAddr[host.Address.Addr]; dup {
				add(key+".address", "%s is also the address of hosts[%d]; give each host its own", host.Address, j)
			}
			seenAddr[host.Address.Addr] = i
		}
	}
	return joinErrors(errs)
}

// fixHostPort accepts ":69" as "0.0.0.0:69" for parsing.
func fixHostPort(s string) string {
	if strings.HasPrefix(s, ":") {
		return "0.0.0.0" + s
	}
	return s
}

func isMask(a Addr) bool {
	b := a.As4()
	m := net.IPv4Mask(b[0], b[1], b[2], b[3])
	ones, bits := m.Size()
	return bits == 32 && ones > 0
}
