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
	// LogFormat is text (logfmt-style key=value) or json (one object per
	// line). Default text.
	LogFormat string `yaml:"log_format"`

	DHCP   DHCP   `yaml:"dhcp"`
	TFTP   TFTP   `yaml:"tftp"`
	HTTP   HTTP   `yaml:"http"`
	Admin  Admin  `yaml:"admin"`
	Stream Stream `yaml:"stream"`
	// Records bounds the memory the record queue may take.
	Records Records `yaml:"records"`
	// Iperf3 and Iperf2 are the servers boards measure against with their
	// own iperf3 / iperf (package perfsrv).
	Iperf3 Iperf `yaml:"iperf3"`
	Iperf2 Iperf `yaml:"iperf2"`
	// Images bounds the decompression cache (see Images).
	Images Images `yaml:"images"`
	// Store is where records go: SQLite in the data folder (default) or a
	// shared PostgreSQL database.
	Store Store `yaml:"store"`
	// Server names this pxeperf on its records.
	Server Server `yaml:"server"`
	// Templates override the built-in boot config templates of pxelinux,
	// GRUB and U-Boot for every host (a host's own templates win). Each is
	// inline text or "@file" read from the root; see package bootcfg.
	Templates Templates `yaml:"templates"`
	Hosts     []Host    `yaml:"hosts"`
	// Events sends milestones to a webhook (see Events).
	Events Events `yaml:"events"`

	// File is the config file this came from ("" for the embedded default),
	// for messages that point into it.
	File string `yaml:"-"`
	// Set holds the dotted keys (dhcp.mode, hosts[0].name) the file
	// itself sets; none for the embedded default. Some defaults depend on
	// whether a setting was chosen: see IsSet.
	Set map[string]bool `yaml:"-"`
	// Warnings are what the file should change though it loads: each an
	// old key name (see aliases) read under its new one, with the file,
	// line and the name to write.
	Warnings []string `yaml:"-"`
}

// IsSet reports whether the config file sets key (dotted, e.g.
// "dhcp.mode" or "dhcp.boot_files.efi-arm64"), rather than taking the
// embedded default's value.
func (c *Config) IsSet(key string) bool { return c.Set[key] }

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
		return typeError(n.Line, "a template is text: inline (use a | block) or @file from the root")
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

	// Budgets against a flood of clients (spoofed MACs); see dhcp/budget.go.
	// Defaults are far above what a lab of 500 boards needs.
	//
	// MaxOffers caps the offers outstanding at once in full mode (held for
	// a client that has not REQUESTed yet); configured hosts are exempt.
	// Default 1024.
	MaxOffers int `yaml:"max_offers"`
	// NewClientsPerSecond is the rate at which clients pxeperf has not seen
	// before are given an address (full mode) or remembered and recorded
	// (proxy mode), per relay (giaddr; clients on the segment share one),
	// with a burst of ten seconds' worth. Default 100 (burst 1000).
	NewClientsPerSecond int `yaml:"new_clients_per_second"`
	// MaxSightings caps the clients remembered for the hosts table and
	// proxy lease records; the least recently seen are forgotten first.
	// Default 4096.
	MaxSightings int `yaml:"max_sightings"`
	// Relays are the DHCP relays (their giaddr: an address, or a prefix
	// for many) whose relayed requests pxeperf answers; a request with any
	// other giaddr is dropped and counted, as a forged giaddr would aim
	// the reply at any address. Each entry has its own new-client budget.
	// Default none: only clients on the served segment are answered.
	Relays []Prefix `yaml:"relays"`
	// Options are DHCP options sent to every client (see DHCPOptions and
	// README "DHCP options"); ClassOptions those for the clients a match
	// picks, later entries winning; a host's dhcp_options win over both.
	Options      DHCPOptions    `yaml:"options,omitempty"`
	ClassOptions []ClassOptions `yaml:"class_options,omitempty"`
}

// Records configures the record sink between the servers and the store.
type Records struct {
	// QueueEntries caps the records held in memory while the store is slow
	// or failing. Default 65536.
	QueueEntries int `yaml:"queue_entries"`
	// QueueMiB caps their size in MiB (a record counts as its journal
	// line). Past either cap records wait in <data>/records.journal and are
	// imported once the store catches up. Default 64.
	QueueMiB int `yaml:"queue_mib"`
	// JournalMaxMiB caps <data>/records.journal, which grows while the
	// store is away or behind: past three quarters of it records of failed
	// fetches (kind error) are dropped, at the cap every new record is;
	// both are counted (refusals "record: journal ...", records dropped)
	// and shown on /healthz and `pxeperf status`. Default 1024.
	JournalMaxMiB int `yaml:"journal_max_mib"`
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
	// UBootMaxWindowSize caps the windowsize of clients whose option 60 is
	// U-Boot's ("U-Boot.armv8"): U-Boot under virtio-net hangs at 32 and
	// over. Default 16; 0: no cap beyond max_windowsize.
	UBootMaxWindowSize int `yaml:"uboot_max_windowsize"`
	// Timeout per packet before a resend. Default 1s.
	Timeout time.Duration `yaml:"timeout"`
	// Retries before a transfer is given up. Default 5.
	Retries int `yaml:"retries"`
	// MaxTransfers bounds concurrent transfers of the whole server.
	// Default 1024: two each for 500 boards booting at once.
	MaxTransfers int `yaml:"max_transfers"`
	// MaxTransfersPerClient bounds the concurrent transfers of one client
	// address. Default 64; raise it when many boards share one address (NAT).
	MaxTransfersPerClient int `yaml:"max_transfers_per_client"`
	// MaxClientTimeout is the longest RFC 2349 timeout option accepted;
	// longer ones are left out of the OACK. Default 10s (U-Boot asks for 5).
	MaxClientTimeout time.Duration `yaml:"max_client_timeout"`
	// MaxTransferTime bounds one transfer's life. Default 30m.
	MaxTransferTime time.Duration `yaml:"max_transfer_time"`
	// MinRateKiBps: at max_transfers, a new request takes the slot of the
	// slowest transfer acknowledging fewer KiB a second than this since
	// its first reply (after 100 ms). Default 32; 0: never.
	MinRateKiBps int `yaml:"min_rate_kibps"`
	// ErrorRecordsPerMinute is how many fetches that did not complete
	// (not found, refused, given up) one client puts on record a minute,
	// 16 times that all clients together; more are answered and counted,
	// not recorded. Default 120, as http's.
	ErrorRecordsPerMinute int `yaml:"error_records_per_minute"`
	// SinglePortBudgetKiB is how many KiB per minute one client address may
	// be sent in single-port mode by windowed transfers that have not yet
	// proved the client reads them. Default 4096.
	SinglePortBudgetKiB int `yaml:"single_port_budget_kib"`
	// TransferThreads is how many transfers (lock-step or windowed) at
	// once wait for their ACKs on an OS thread of their own (Linux)
	// instead of Go's poller: a blocking read per ACK for the first ones,
	// bounded threads for a crowd (see configs/DESIGN.md#transfer-threads).
	// Default 16; 0: none. It was lockstep_threads when only lock-step
	// transfers had threads.
	TransferThreads int `yaml:"transfer_threads"`
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
	// SendBufferKiB is the kernel send buffer (as `ss -m` shows it, tb) a
	// connection gets for a file body of 1 MiB or more (Linux). A larger
	// buffer means fewer wake-ups per GiB; the record still ends when the
	// client has acknowledged the body. Default 4096; 0: the kernel's
	// autotuning (net.ipv4.tcp_wmem).
	SendBufferKiB int `yaml:"send_buffer_kib"`
	// Script is the iPXE script template served at /boot.ipxe for clients
	// without a host-specific script (Go text/template; see README), inline
	// or "@file" from the root.
	Script Template `yaml:"script,omitempty"`

	// Budgets. A lab network is a hostile network: every board can reach
	// the boot port, so what one client can make pxeperf hold or write is
	// bounded. The defaults are far above what a lab of 500 boards needs.
	// A refusal is logged once per client and reason a minute and counted
	// (GET /healthz, "refused").

	// MaxConns caps open connections to the boot port; more are answered
	// 503 Service Unavailable (Retry-After: 1) naming the setting. Default
	// 2048.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerClient caps open connections from one address (iPXE and
	// UEFI use one or two). Default 32.
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
	// MaxLabels caps ?label.KEY=VALUE parameters on one request; more are
	// refused with 400. Default 32.
	MaxLabels int `yaml:"max_labels"`
	// MaxLabelKey and MaxLabelValue cap a label's key and value in bytes.
	// Defaults 64 and 256.
	MaxLabelKey   int `yaml:"max_label_key"`
	MaxLabelValue int `yaml:"max_label_value"`
	// ErrorRecordsPerMinute is how many failed fetches (404, 400, 403, ...)
	// one client may put on record per minute (a burst of as many, refilled
	// evenly); past it they are still answered and counted, not recorded.
	// Default 120.
	ErrorRecordsPerMinute int `yaml:"error_records_per_minute"`
	// ProbeRecordsPerMinute is how many HEAD requests and small range
	// answers (206 with under 64 KiB of body) one client may put on record
	// per minute, the same way: each costs its client one line, so without
	// a bound one connection fills the store (see
	// configs/DESIGN.md#probe-records). Default 120.
	ProbeRecordsPerMinute int `yaml:"probe_records_per_minute"`
	// MaxRanges caps the ranges of one Range header, as nginx's
	// max_ranges does: a request with more is served whole (200, by
	// sendfile), as many tiny ranges make a multipart answer far larger
	// and costlier than the file (see configs/DESIGN.md#max-ranges).
	// Overlapping and adjacent ranges are merged first. Default 16.
	MaxRanges int `yaml:"max_ranges"`
	// SendBufferTotalMiB caps the send buffers (send_buffer_kib and its
	// boosts) that big downloads hold together: each takes its buffer
	// from this budget and gives it back when its connection closes; past
	// it a download keeps the kernel's own autotuned buffer, which grows
	// only as the client reads. A client that never reads otherwise holds
	// a whole send_buffer_kib of kernel memory. Default 128.
	SendBufferTotalMiB int `yaml:"send_buffer_total_mib"`
	// MinRateKiB and MinRateWindow end a download whose client took in
	// less than MinRateKiB KiB/s over the last MinRateWindow: a trickle
	// that reads a little before each stall_timeout would otherwise hold
	// its connection for as long as it likes. Defaults 8 and 60s; 0
	// turns the floor off.
	MinRateKiB    int           `yaml:"min_rate_kib"`
	MinRateWindow time.Duration `yaml:"min_rate_window"`
	// TrustMACParam lets any client claim any MAC with ?mac= (the lab
	// trusts every machine on it). Default false: a claim binds the MAC to
	// the source address only where pxeperf's DHCP (lease or recent
	// proxyDHCP sighting) or the host entry's address agrees; see README.
	TrustMACParam bool `yaml:"trust_mac_param"`
	// API also serves the record API (/api/) on the boot port, for labs
	// that want it there; default false: only on admin.listen.
	API bool `yaml:"api"`
}

// Admin configures the admin listener: the record API (/api/...) on an
// address of its own, loopback by default, so boards cannot read what
// other boards fetched.
type Admin struct {
	// Listen address HOST:PORT, or "off". Default 127.0.0.1:9069.
	Listen string `yaml:"listen"`
	// TokenFile names a file holding a bearer token; when set, every request
	// needs "Authorization: Bearer TOKEN". Default "": no token.
	TokenFile string `yaml:"token_file"`
	// MaxPage caps /api/fetches?limit= (records per page; next pages by
	// the cursor in the Link header). Default 1000.
	MaxPage int `yaml:"max_page"`
	// MaxPageMiB ends a /api/fetches page early, with the cursor of the
	// next, once this many MiB of it are encoded (old records may carry
	// large labels). Default 4.
	MaxPageMiB int `yaml:"max_page_mib"`
	// MaxReportRecords caps the records one /api/report table is built
	// from; more are refused with advice to narrow the filter. Default 50000.
	MaxReportRecords int `yaml:"max_report_records"`
	// StallTimeout drops an answer whose client reads nothing for this
	// long. Default 10s.
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// WriteTimeout bounds one whole answer. Default 60s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxConns caps the admin connections open at once; past it a new one
	// is closed at once (counted in /healthz's refused). Default 256.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerClient caps those of one address. Default 16.
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
	// AllowedHosts are names (Host header, no port) the listener answers
	// to when it has no token, besides IP addresses, localhost and the
	// server's name: any other is refused with 421, so a web page whose
	// name is pointed at the listener (DNS rebinding) reads nothing.
	// With admin.token_file set every Host is accepted. Default none.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// AdminOff is the admin.listen value that turns the admin listener off.
const AdminOff = "off"

// Stream configures pxeperf's own throughput server (package stream) that
// `pxeperf bench --server HOST` runs its TCP and UDP tests against. It is
// off by default: it sends as fast as it is asked to (bounded to 60 s and
// 10 Gbit/s per test, 8 tests at once), which a lab turns on on purpose.
// Its key was bench until the service was named for what it serves; an
// old file's bench: is read as stream: with a warning (see aliases).
type Stream struct {
	Enabled bool `yaml:"enabled"`
	// Listen address. Default ":5211".
	Listen string `yaml:"listen"`
}

// Iperf configures an iperf3- or iperf 2-compatible server (package
// perfsrv). Off by default, like the stream server: it sends as fast
// as a board asks, within the caps. Every test is recorded (source iperf3 or
// iperf2, one record per direction).
type Iperf struct {
	Enabled bool `yaml:"enabled"`
	// Listen address, TCP and UDP. Default ":5201" (iperf3), ":5001" (iperf2).
	Listen string `yaml:"listen"`
	// MaxTests running at once over all boards. Default 16.
	MaxTests int `yaml:"max_tests"`
	// MaxPerClient tests at once from one board address. Default 4.
	MaxPerClient int `yaml:"max_per_client"`
	// MaxDuration of one test (-t plus -O). Default 60s.
	MaxDuration time.Duration `yaml:"max_duration"`
	// MaxRateMbps is the largest -b a test may ask for, Mbit/s over all its
	// streams and directions. Default 10000.
	MaxRateMbps int64 `yaml:"max_rate_mbps"`
	// MaxStreams per test (-P). Default 16.
	MaxStreams int `yaml:"max_streams"`
	// The UDP packet budget, iperf3 and iperf 2 (a datagram costs the server
	// about the same CPU whatever its size). MinUDPLen is the smallest -l
	// of a UDP test, bytes (default 128); MaxPPS the most datagrams/s one
	// test may ask for, -b / (8 x -l) over its streams and directions
	// (default 100000; -b 0 asks without bound); MaxPPSTotal the UDP tests
	// running at once together (default 200000).
	MinUDPLen   int   `yaml:"min_udp_len"`
	MaxPPS      int64 `yaml:"max_pps"`
	MaxPPSTotal int64 `yaml:"max_pps_total"`
	// VerifiedFor (iperf2 only): for how long after an address ran an
	// iperf 2 TCP test (its handshake proves it receives) its UDP tests
	// may be sent more than twice what they sent; UDP -R needs it. 0: never.
	// Default 10m.
	VerifiedFor time.Duration `yaml:"verified_for"`
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
	// DefaultBoot is what a host with no kernel (and no script) boots:
	// "" (the loader's message, then its prompt or the next boot target),
	// BootLocal (the local disk) or BootShell (the loader's prompt, for a
	// person).
	DefaultBoot string `yaml:"default_boot,omitempty"`
	// DHCPOptions are this host's DHCP options, over dhcp.class_options
	// and dhcp.options; hostname (12) defaults to Name.
	DHCPOptions DHCPOptions `yaml:"dhcp_options,omitempty"`
	// LocalBoot is the U-Boot distro boot target (mmc0, usb0, nvme0, ...)
	// the boot script runs for BootLocal; "" lets distro boot go on with
	// its next target.
	LocalBoot string `yaml:"local_boot,omitempty"`
}

// Values of Host.DefaultBoot.
const (
	BootLocal = "local"
	BootShell = "shell"
)

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
	c.Set = nil // the default chooses nothing
	return c
}

// Example returns the text of an embedded example config by base name
// ("lab-proxy", "isolated-full").
func Example(name string) ([]byte, error) {
	return files.ReadFile("examples/" + name + ".yaml")
}

// ExampleNames lists the embedded examples by base name, each with the
// first phrase of its leading comment.
func ExampleNames() (names, about []string) {
	ents, _ := files.ReadDir("examples")
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".yaml")
		if !ok {
			continue
		}
		b, _ := files.ReadFile("examples/" + e.Name())
		var comment []string
		for _, line := range strings.Split(string(b), "\n") {
			text, ok := strings.CutPrefix(line, "#")
			if !ok {
				break
			}
			comment = append(comment, strings.TrimSpace(text))
		}
		first := strings.Join(comment, " ")
		if i := strings.IndexAny(first, ".:"); i > 0 {
			first = first[:i]
		}
		names = append(names, n)
		about = append(about, first)
	}
	return names, about
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

// validateTFTPBudgets checks the tftp keys that bound what clients may
// hold (issue 9).
func validateTFTPBudgets(t *TFTP, add func(key, format string, a ...any)) {
	if t.MaxTransfers < 1 {
		add("tftp.max_transfers", "%d must be at least 1; use e.g. 1024", t.MaxTransfers)
	}
	if t.MaxTransfersPerClient < 1 {
		add("tftp.max_transfers_per_client", "%d must be at least 1; use e.g. 64", t.MaxTransfersPerClient)
	} else if t.MaxTransfers >= 1 && t.MaxTransfersPerClient > t.MaxTransfers {
		add("tftp.max_transfers_per_client", "%d is over tftp.max_transfers (%d); lower it or raise tftp.max_transfers",
			t.MaxTransfersPerClient, t.MaxTransfers)
	}
	if t.MaxClientTimeout < time.Second || t.MaxClientTimeout > 255*time.Second || t.MaxClientTimeout%time.Second != 0 {
		add("tftp.max_client_timeout", "%s is not whole seconds in 1s..255s (RFC 2349); use e.g. 10s", t.MaxClientTimeout)
	}
	if t.MaxTransferTime < time.Second {
		add("tftp.max_transfer_time", "%s is too short for a transfer; use e.g. 30m", t.MaxTransferTime)
	}
	if t.TransferThreads < 0 || t.TransferThreads > t.MaxTransfers {
		add("tftp.transfer_threads", "%d is outside 0..tftp.max_transfers (%d); use e.g. 16, or 0 for none", t.TransferThreads, t.MaxTransfers)
	}
	if t.MinRateKiBps < 0 || t.MinRateKiBps > 1<<20 {
		add("tftp.min_rate_kibps", "%d is outside 0..1048576 KiB/s; use e.g. 32, or 0 to let slow transfers keep their slots", t.MinRateKiBps)
	}
	if t.ErrorRecordsPerMinute < 1 {
		add("tftp.error_records_per_minute", "%d must be at least 1; use e.g. 120", t.ErrorRecordsPerMinute)
	}
	if t.SinglePortBudgetKiB < 256 {
		add("tftp.single_port_budget_kib", "%d is under 256 KiB, less than a few clients need to prove they read; use e.g. 4096", t.SinglePortBudgetKiB)
	}
}

// problems collects what Validate finds, each naming its key.
type problems []error

// add records a problem with key, its message formatted from format and a.
func (p *problems) add(key, format string, a ...any) {
	*p = append(*p, &Error{Key: key, Msg: fmt.Sprintf(format, a...)})
}

// Validate checks the configuration as a whole. Errors name the key and say
// how to fix it.
func (c *Config) Validate() error {
	var p problems
	c.validateTop(p.add)
	validateDHCP(&c.DHCP, p.add)
	validateTFTP(&c.TFTP, p.add)
	validateHTTPServer(&c.HTTP, p.add)
	c.validateHTTPBudgets(p.add)
	c.validateStore(p.add)
	if _, err := netip.ParseAddrPort(fixHostPort(c.Stream.Listen)); err != nil {
		p.add("stream.listen", "%q is not HOST:PORT; use e.g. :5211 or 0.0.0.0:5211", c.Stream.Listen)
	}
	validateBudgets(c, p.add)
	for key, ip := range map[string]*Iperf{"iperf3": &c.Iperf3, "iperf2": &c.Iperf2} {
		validateIperf(key, ip, p.add)
	}
	c.validateImages(p.add)
	validateHosts(c.Hosts, p.add)
	validateEvents(&c.Events, p.add)
	return joinErrors(p)
}

// validateTop checks the top-level keys: log level and format, the root
// and data folders, the address.
func (c *Config) validateTop(add func(key, format string, a ...any)) {
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add("log_level", "%q is not a log level; use debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		add("log_format", "%q is not a log format; use text or json", c.LogFormat)
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
}

// validateDHCP checks the dhcp section but its budgets (validateBudgets).
func validateDHCP(d *DHCP, add func(key, format string, a ...any)) {
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
	for i, r := range d.Relays {
		if !r.IsValid() || !r.Addr().Is4() || r.Bits() < 8 {
			add(fmt.Sprintf("dhcp.relays[%d]", i), "%q is not an IPv4 relay; write a relay's giaddr (10.0.8.1) or a prefix of /8 or longer (10.0.8.0/22)", r.String())
		}
	}
	validateDHCPOptions("dhcp.options", d.Options, add)
	validateClassOptions(d.ClassOptions, add)
}

// validateTFTP checks the tftp section: its budgets, then the protocol
// settings.
func validateTFTP(t *TFTP, add func(key, format string, a ...any)) {
	validateTFTPBudgets(t, add)
	if _, err := netip.ParseAddrPort(fixHostPort(t.Listen)); err != nil {
		add("tftp.listen", "%q is not HOST:PORT; use e.g. :69 or 0.0.0.0:69", t.Listen)
	}
	if t.MaxBlockSize != 0 && (t.MaxBlockSize < 8 || t.MaxBlockSize > 65464) {
		add("tftp.max_blksize", "%d is outside 8..65464 (RFC 2348); use 0 for as large as the MTU allows", t.MaxBlockSize)
	}
	if t.MaxWindowSize < 1 || t.MaxWindowSize > 65535 {
		add("tftp.max_windowsize", "%d is outside 1..65535 (RFC 7440); 64 is a good cap", t.MaxWindowSize)
	}
	if t.UBootMaxWindowSize < 0 || t.UBootMaxWindowSize > 65535 {
		add("tftp.uboot_max_windowsize", "%d is outside 0..65535 (RFC 7440); 16 is safe for U-Boot, 0 for no cap", t.UBootMaxWindowSize)
	}
	if t.Timeout < 10*time.Millisecond || t.Timeout > 255*time.Second {
		add("tftp.timeout", "%s is outside 10ms..255s; use e.g. 1s", t.Timeout)
	}
	if t.Retries < 1 {
		add("tftp.retries", "%d must be at least 1; use e.g. 5", t.Retries)
	}
}

// validateHTTPServer checks http.listen and the http timeouts (the
// budgets are validateHTTPBudgets').
func validateHTTPServer(h *HTTP, add func(key, format string, a ...any)) {
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
}

// validateIperf checks one iperf server's section (key iperf3 or iperf2).
func validateIperf(key string, ip *Iperf, add func(key, format string, a ...any)) {
	if _, err := netip.ParseAddrPort(fixHostPort(ip.Listen)); err != nil {
		add(key+".listen", "%q is not HOST:PORT; use e.g. :5201 (iperf3) or :5001 (iperf2)", ip.Listen)
	}
	if ip.MaxTests < 1 || ip.MaxPerClient < 1 || ip.MaxStreams < 1 {
		add(key, "max_tests, max_per_client and max_streams must be at least 1 (defaults 16, 4, 16)")
	}
	if ip.MaxDuration < time.Second || ip.MaxRateMbps < 1 {
		add(key, "max_duration must be at least 1s and max_rate_mbps at least 1 (defaults 60s, 10000)")
	}
	if ip.VerifiedFor < 0 {
		add(key+".verified_for", "%s is negative; use 0 (never) or e.g. 10m (the default)", ip.VerifiedFor)
	}
	if ip.MinUDPLen < 16 || ip.MinUDPLen > 65507 {
		add(key+".min_udp_len", "%d is outside 16..65507 (iperf3's and iperf 2's datagram header is 16 bytes); default 128", ip.MinUDPLen)
	}
	if ip.MaxPPS < 1 || ip.MaxPPSTotal < ip.MaxPPS {
		add(key+".max_pps", "max_pps %d and max_pps_total %d: both at least 1, the total at least max_pps (defaults 100000, 200000)", ip.MaxPPS, ip.MaxPPSTotal)
	}
}

// validateHosts checks every host entry has a MAC, and that no MAC or
// fixed address is given twice.
func validateHosts(hosts []Host, add func(key, format string, a ...any)) {
	seenMAC := map[string]int{}
	seenAddr := map[netip.Addr]int{}
	for i, host := range hosts {
		key := fmt.Sprintf("hosts[%d]", i)
		validateDHCPOptions(key+".dhcp_options", host.DHCPOptions, add)
		if len(host.MAC.HardwareAddr) == 0 {
			add(key+".mac", "every host needs a mac, e.g. mac: 52:54:00:12:34:56")
			continue
		}
		if j, dup := seenMAC[host.MAC.String()]; dup {
			add(key+".mac", "%s is also hosts[%d]; merge the two entries", host.MAC, j)
		}
		seenMAC[host.MAC.String()] = i
		switch host.DefaultBoot {
		case "", BootLocal, BootShell:
		default:
			add(key+".default_boot", "%q is not one of local, shell (or leave it out)", host.DefaultBoot)
		}
		if err := checkLocalBoot(host.LocalBoot); err != "" {
			add(key+".local_boot", "%s", err)
		}
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
}

// checkLocalBoot says what is wrong with a local_boot value, "" when
// nothing is: the boot script runs it as `run bootcmd_NAME`, so it must
// be a plain name, and not a network target that would boot this again.
func checkLocalBoot(name string) string {
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("%q is not a U-Boot boot target name; use letters, digits, _ and - only, e.g. mmc0 (as in ${boot_targets})", name)
		}
	}
	switch name {
	case "dhcp", "pxe", "http":
		return fmt.Sprintf("%q boots from the network again; name a local target such as mmc0, usb0 or nvme0 (or leave it out)", name)
	}
	return ""
}

// validateBudgets checks the resource budgets of dhcp and records.
func validateBudgets(c *Config, add func(key, format string, a ...any)) {
	for _, b := range []struct {
		key       string
		v, lo, hi int
		eg        string
	}{
		{"dhcp.max_offers", c.DHCP.MaxOffers, 1, 1 << 20, "1024"},
		{"dhcp.new_clients_per_second", c.DHCP.NewClientsPerSecond, 1, 1 << 20, "100"},
		{"dhcp.max_sightings", c.DHCP.MaxSightings, 16, 1 << 22, "4096"},
		{"records.queue_entries", c.Records.QueueEntries, 16, 1 << 24, "65536"},
		{"records.queue_mib", c.Records.QueueMiB, 1, 1 << 16, "64"},
		{"records.journal_max_mib", c.Records.JournalMaxMiB, 1, 1 << 20, "1024"},
	} {
		if b.v < b.lo || b.v > b.hi {
			add(b.key, "%d is outside %d..%d; the default %s is far above what a lab of 500 boards needs", b.v, b.lo, b.hi, b.eg)
		}
	}
}

// validateHTTPBudgets checks the http budgets and the admin section.
func (c *Config) validateHTTPBudgets(add func(key, format string, a ...any)) {
	h := &c.HTTP
	for _, b := range []struct {
		key      string
		v, min   int
		suggests string
	}{
		{"http.max_conns", h.MaxConns, 1, "2048"},
		{"http.max_conns_per_client", h.MaxConnsPerClient, 1, "32"},
		{"http.max_labels", h.MaxLabels, 1, "32"},
		{"http.max_label_key", h.MaxLabelKey, 1, "64"},
		{"http.max_label_value", h.MaxLabelValue, 1, "256"},
		{"http.error_records_per_minute", h.ErrorRecordsPerMinute, 1, "120"},
		{"http.probe_records_per_minute", h.ProbeRecordsPerMinute, 1, "120"},
		{"http.max_ranges", h.MaxRanges, 1, "16"},
		{"http.send_buffer_total_mib", h.SendBufferTotalMiB, 1, "128"},
		{"http.min_rate_kib", h.MinRateKiB, 0, "8 (0: no floor)"},
		{"admin.max_page", c.Admin.MaxPage, 1, "1000"},
		{"admin.max_page_mib", c.Admin.MaxPageMiB, 1, "4"},
		{"admin.max_report_records", c.Admin.MaxReportRecords, 1, "50000"},
		{"admin.max_conns", c.Admin.MaxConns, 1, "256"},
		{"admin.max_conns_per_client", c.Admin.MaxConnsPerClient, 1, "16"},
	} {
		if b.v < b.min {
			add(b.key, "%d must be at least %d; the default is %s", b.v, b.min, b.suggests)
		}
	}
	if h.SendBufferKiB != 0 && (h.SendBufferKiB < 64 || h.SendBufferKiB > 65536) {
		add("http.send_buffer_kib", "%d is outside 64..65536 KiB; use e.g. 4096, or 0 for the kernel's autotuning", h.SendBufferKiB)
	}
	if h.MinRateKiB > 0 && h.MinRateWindow < time.Second {
		add("http.min_rate_window", "%s is shorter than a second, too short to tell a slow client from a trickle; use e.g. 60s (or http.min_rate_kib: 0 for no floor)", h.MinRateWindow)
	}
	if h.MaxConnsPerClient > h.MaxConns && h.MaxConns > 0 {
		add("http.max_conns_per_client", "%d is more than http.max_conns (%d); lower it or raise max_conns", h.MaxConnsPerClient, h.MaxConns)
	}
	a := &c.Admin
	if a.Listen != AdminOff {
		if _, err := netip.ParseAddrPort(fixHostPort(a.Listen)); err != nil {
			add("admin.listen", "%q is not HOST:PORT; use e.g. 127.0.0.1:9069, or off to turn the admin listener off", a.Listen)
		}
	}
	if a.StallTimeout <= 0 {
		add("admin.stall_timeout", "%s must be positive; e.g. 10s", a.StallTimeout)
	}
	if a.WriteTimeout < a.StallTimeout {
		add("admin.write_timeout", "%s must be at least admin.stall_timeout (%s); e.g. 60s", a.WriteTimeout, a.StallTimeout)
	}
	if a.TokenFile != "" && strings.TrimSpace(a.TokenFile) != a.TokenFile {
		add("admin.token_file", "%q has leading or trailing spaces; write the path alone", a.TokenFile)
	}
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
