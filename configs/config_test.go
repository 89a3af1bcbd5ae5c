package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDefaultIsSafe(t *testing.T) {
	c := Default()
	if c.DHCP.Mode != ModeProxy {
		t.Errorf("default DHCP mode = %q, want proxy (never hand out addresses on an unknown network)", c.DHCP.Mode)
	}
	if c.DHCP.Pool.IsValid() {
		t.Errorf("default has a pool %s", c.DHCP.Pool)
	}
	if !c.TFTP.Enabled || !c.HTTP.Enabled || c.Root != "./images" {
		t.Errorf("default should serve ./images over TFTP and HTTP: %+v %+v %q", c.TFTP, c.HTTP, c.Root)
	}
	// Budgets a lab of 500 boards never reaches (issue 9).
	if tf := c.TFTP; tf.SinglePort || tf.MaxTransfers != 1024 || tf.MaxTransfersPerClient != 64 ||
		tf.MaxClientTimeout != 10*time.Second || tf.MaxTransferTime != 30*time.Minute || tf.SinglePortBudgetKiB != 4096 || tf.TransferThreads != 16 ||
		tf.MinRateKiBps != 32 || tf.ErrorRecordsPerMinute != 120 {
		t.Errorf("default tftp budgets = %+v", tf)
	}
	// The stream server sends as fast as a client asks: a lab turns it on.
	if c.Stream.Enabled || c.Stream.Listen != ":5211" {
		t.Errorf("default stream = %+v, want off, listen :5211", c.Stream)
	}
}

func TestExamplesValid(t *testing.T) {
	for _, name := range []string{"lab-proxy", "isolated-full"} {
		t.Run(name, func(t *testing.T) {
			b, err := Example(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(name+".yaml", b, Default()); err != nil {
				t.Fatalf("example %s invalid: %v", name, err)
			}
		})
	}
}

// TestErrors checks that every kind of bad input names the key, its line and a fix.
func TestErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error, in order of appearance
	}{
		{"unknown key with suggestion", "dhcp:\n  mod: full\n", []string{"t.yaml:2", "dhcp.mod", `unknown key "mod"`, `did you mean "mode"`}},
		{"renamed key", "tftp:\n  lockstep_threads: 8\n", []string{"t.yaml:2", "tftp.lockstep_threads", "was renamed tftp.transfer_threads", "rename the key"}},
		{"unknown top key lists keys", "zzz: 1\n", []string{"t.yaml:1", "zzz", "known keys here:", "dhcp"}},
		{"full without pool", "dhcp:\n  mode: full\n", []string{"t.yaml:2", "dhcp.mode", "needs an address pool", "mode: proxy"}},
		{"bad mode", "dhcp:\n  mode: fast\n", []string{"t.yaml:2", "dhcp.mode", `"fast" is not a mode`}},
		{"bad duration", "tftp:\n  timeout: abc\n", []string{"t.yaml:2", "tftp.timeout", "as a duration", "30s"}},
		{"bad int", "tftp:\n  retries: many\n", []string{"t.yaml:2", "tftp.retries", "whole number"}},
		{"bad mac", "hosts:\n  - mac: zz\n", []string{"t.yaml:2", "hosts[0].mac", "not an Ethernet MAC", "52:54:00"}},
		{"missing mac", "hosts:\n  - name: a\n", []string{"t.yaml:2", "hosts[0].mac", "needs a mac"}},
		{"duplicate mac", "hosts:\n  - mac: 52:54:00:00:00:01\n  - mac: 52:54:00:00:00:01\n", []string{"t.yaml:3", "hosts[1].mac", "also hosts[0]"}},
		{"local_boot not a name", "hosts:\n  - mac: 52:54:00:00:00:01\n    local_boot: mmc0; reset\n", []string{"t.yaml:3", "hosts[0].local_boot", "not a U-Boot boot target", "mmc0"}},
		{"local_boot network", "hosts:\n  - mac: 52:54:00:00:00:01\n    local_boot: dhcp\n", []string{"t.yaml:3", "hosts[0].local_boot", "network again", "mmc0"}},
		{"reversed pool", "dhcp:\n  pool: 10.0.0.5-10.0.0.1\n", []string{"t.yaml:2", "dhcp.pool", "ends before it starts"}},
		{"pool not a range", "dhcp:\n  pool: 10.0.0.5\n", []string{"dhcp.pool", "FIRST-LAST"}},
		{"bad address", "address: banana\n", []string{"t.yaml:1", "address", "not an IP address"}},
		{"ipv6 address", "address: \"::1\"\n", []string{"address", "not an IPv4"}},
		{"bad netmask", "dhcp:\n  netmask: 255.0.255.0\n", []string{"dhcp.netmask", "not a netmask"}},
		{"bad relay", "dhcp:\n  relays: [10.0.8.1, relay1]\n", []string{"t.yaml:2", "dhcp.relays", "neither an address nor a prefix", "10.0.8.0/22"}},
		{"ipv6 relay", "dhcp:\n  relays: [\"fe80::/64\"]\n", []string{"dhcp.relays[0]", "not an IPv4 relay", "10.0.8.0/22"}},
		{"relay prefix too wide", "dhcp:\n  relays: [0.0.0.0/0]\n", []string{"dhcp.relays[0]", "/8 or longer"}},
		{"bad arch name", "dhcp:\n  boot_files:\n    efi-x65: a.efi\n", []string{"t.yaml:3", "dhcp.boot_files.efi-x65", "efi-x64"}},
		{"bad listen", "http:\n  listen: nowhere\n", []string{"http.listen", "HOST:PORT"}},
		{"bad stream listen", "stream:\n  enabled: true\n  listen: 5211\n", []string{"stream.listen", "HOST:PORT", ":5211"}},
		{"stream typo", "stream:\n  enable: true\n", []string{"t.yaml:2", "stream.enable", `did you mean "enabled"`}},
		{"old name, bad value", "bench:\n  enabled: true\n  listen: 5211\n", []string{"t.yaml:1", "bench: was renamed stream", "t.yaml:3", "stream.listen", "HOST:PORT"}},
		{"old name beside new", "stream:\n  enabled: true\nbench:\n  listen: :5300\n", []string{"t.yaml:3", "bench", "old name of stream, which is also set"}},
		{"blksize range", "tftp:\n  max_blksize: 70000\n", []string{"tftp.max_blksize", "8..65464"}},
		{"no transfers", "tftp:\n  max_transfers: 0\n", []string{"tftp.max_transfers", "at least 1", "1024"}},
		{"per client over all", "tftp:\n  max_transfers: 10\n  max_transfers_per_client: 20\n", []string{"tftp.max_transfers_per_client", "over tftp.max_transfers"}},
		{"client timeout over 255s", "tftp:\n  max_client_timeout: 5m\n", []string{"tftp.max_client_timeout", "1s..255s", "10s"}},
		{"client timeout not whole seconds", "tftp:\n  max_client_timeout: 1500ms\n", []string{"tftp.max_client_timeout", "whole seconds"}},
		{"transfer time", "tftp:\n  max_transfer_time: 10ms\n", []string{"tftp.max_transfer_time", "30m"}},
		{"transfer threads negative", "tftp:\n  transfer_threads: -1\n", []string{"tftp.transfer_threads", "0..tftp.max_transfers", "16"}},
		{"single-port budget", "tftp:\n  single_port_budget_kib: 10\n", []string{"tftp.single_port_budget_kib", "4096"}},
		{"min rate negative", "tftp:\n  min_rate_kibps: -1\n", []string{"tftp.min_rate_kibps", "0..1048576", "32"}},
		{"no error records", "tftp:\n  error_records_per_minute: 0\n", []string{"tftp.error_records_per_minute", "at least 1", "120"}},
		{"bad yaml", "dhcp: [\n", []string{"t.yaml", "not valid YAML"}},
		{"log level", "log_level: loud\n", []string{"log_level", "debug, info, warn or error"}},
		{"list for map", "dhcp: [1, 2]\n", []string{"t.yaml:1", "cannot use a list"}},
		{"zero labels", "http:\n  max_labels: 0\n", []string{"t.yaml:2", "http.max_labels", "at least 1", "32"}},
		{"per client over all", "http:\n  max_conns: 10\n  max_conns_per_client: 20\n", []string{"http.max_conns_per_client", "more than http.max_conns"}},
		{"zero ranges", "http:\n  max_ranges: 0\n", []string{"t.yaml:2", "http.max_ranges", "at least 1", "16"}},
		{"zero probe records", "http:\n  probe_records_per_minute: 0\n", []string{"t.yaml:2", "http.probe_records_per_minute", "at least 1", "120"}},
		{"zero send buffer total", "http:\n  send_buffer_total_mib: 0\n", []string{"t.yaml:2", "http.send_buffer_total_mib", "at least 1", "128"}},
		{"negative rate floor", "http:\n  min_rate_kib: -1\n", []string{"t.yaml:2", "http.min_rate_kib", "at least 0"}},
		{"rate window too short", "http:\n  min_rate_window: 100ms\n", []string{"t.yaml:2", "http.min_rate_window", "60s", "min_rate_kib: 0"}},
		{"admin listen", "admin:\n  listen: loopback\n", []string{"t.yaml:2", "admin.listen", "127.0.0.1:9069", "off"}},
		{"admin timeouts", "admin:\n  stall_timeout: 30s\n  write_timeout: 10s\n", []string{"admin.write_timeout", "at least admin.stall_timeout"}},
		{"admin typo", "admin:\n  tokenfile: x\n", []string{"t.yaml:2", "admin.tokenfile", `did you mean "token_file"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml), Default())
			if err == nil {
				t.Fatalf("no error for %q", tt.yaml)
			}
			msg := err.Error()
			rest := msg
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q lacks %q (in order %q)", msg, w, tt.want)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestBudgetDefaults: the defaults a lab of 500 boards never reaches, and
// the admin listener on loopback.
func TestBudgetDefaults(t *testing.T) {
	c := Default()
	h := c.HTTP
	if h.MaxConns != 2048 || h.MaxConnsPerClient != 32 || h.MaxLabels != 32 || h.MaxLabelKey != 64 ||
		h.MaxLabelValue != 256 || h.ErrorRecordsPerMinute != 120 || h.TrustMACParam || h.API ||
		h.ProbeRecordsPerMinute != 120 || h.MaxRanges != 16 || h.SendBufferTotalMiB != 128 ||
		h.MinRateKiB != 8 || h.MinRateWindow != time.Minute {
		t.Errorf("http budgets %+v", h)
	}
	a := c.Admin
	if a.Listen != "127.0.0.1:9069" || a.TokenFile != "" || a.MaxPage != 1000 || a.MaxReportRecords != 50000 ||
		a.StallTimeout != 10*time.Second || a.WriteTimeout != 60*time.Second {
		t.Errorf("admin %+v", a)
	}
	if _, err := Parse("t.yaml", []byte("admin:\n  listen: \"off\"\n"), Default()); err != nil {
		t.Errorf("admin.listen off: %v", err)
	}
}

func TestOverlay(t *testing.T) {
	c, err := Parse("t.yaml", []byte(`
dhcp:
  mode: full
  pool: 192.168.50.100-192.168.50.199
  boot_files:
    efi-x64: custom.efi
hosts:
  - mac: 52:54:00:aa:bb:01
    name: b1
    address: 192.168.50.10
    labels: {rx_offload: "off"}
tftp:
  timeout: 2s
`), Default())
	if err != nil {
		t.Fatal(err)
	}
	if c.DHCP.Pool.Size() != 100 || c.DHCP.LeaseTime != time.Hour || c.TFTP.Timeout != 2*time.Second || c.TFTP.Retries != 5 {
		t.Errorf("overlay lost defaults or values: pool %d lease %s timeout %s retries %d",
			c.DHCP.Pool.Size(), c.DHCP.LeaseTime, c.TFTP.Timeout, c.TFTP.Retries)
	}
	x64, _ := ArchByCode(7)
	bios, _ := ArchByCode(0)
	if got := c.DHCP.BootFile(x64); got != "custom.efi" {
		t.Errorf("efi-x64 boot file = %q", got)
	}
	if got := c.DHCP.BootFile(bios); got != "undionly.kpxe" {
		t.Errorf("bios boot file = %q", got)
	}
	if diff := cmp.Diff(map[string]string{"rx_offload": "off"}, c.Hosts[0].Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	// The base must not be changed by the overlay.
	if d := Default(); len(d.DHCP.BootFiles) != 0 || len(d.Hosts) != 0 {
		t.Errorf("default changed by overlay: %+v", d.DHCP.BootFiles)
	}
}

func TestPool(t *testing.T) {
	p, err := ParsePool("10.0.0.250-10.0.1.4")
	if err != nil {
		t.Fatal(err)
	}
	if p.Size() != 11 || p.Nth(6).String() != "10.0.1.0" || !p.Contains(p.Nth(10)) || p.Contains(p.Nth(11)) {
		t.Errorf("pool arithmetic wrong: size %d nth6 %s", p.Size(), p.Nth(6))
	}
}

func TestArchTable(t *testing.T) {
	tests := []struct {
		code     uint16
		name     string
		http     bool
		bootFile string
	}{
		{0, "bios", false, "undionly.kpxe"},
		{6, "efi-ia32", false, "ipxe-i386.efi"},
		{7, "efi-x64", false, "ipxe.efi"},
		{9, "efi-x64", false, "ipxe.efi"},
		{10, "efi-arm32", false, "ipxe-arm32.efi"},
		{11, "efi-arm64", false, "ipxe-arm64.efi"},
		{15, "http-ia32", true, "ipxe-i386.efi"},
		{16, "http-x64", true, "ipxe.efi"},
		{18, "http-arm32", true, "ipxe-arm32.efi"},
		{19, "http-arm64", true, "ipxe-arm64.efi"},
		{21, "uboot-arm32", false, "boot.scr.uimg"},
		{22, "uboot-arm64", false, "boot.scr.uimg"},
	}
	d := Default().DHCP
	for _, tt := range tests {
		a, ok := ArchByCode(tt.code)
		if !ok {
			t.Errorf("arch %d unknown", tt.code)
			continue
		}
		if a.Name != tt.name || a.HTTP != tt.http || d.BootFile(a) != tt.bootFile {
			t.Errorf("arch %d = %+v (file %q), want %s http=%v %s", tt.code, a, d.BootFile(a), tt.name, tt.http, tt.bootFile)
		}
	}
	if _, ok := ArchByCode(200); ok {
		t.Error("arch 200 should be unknown")
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("err = %v", err)
	}
}

func TestEffectiveRoundTrip(t *testing.T) {
	b, _ := Example("isolated-full")
	c, err := Parse("x.yaml", b, Default())
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse("effective.yaml", out, nil)
	if err != nil {
		t.Fatalf("effective config does not parse back: %v\n%s", err, out)
	}
	if diff := cmp.Diff(c, c2, cmp.Comparer(func(a, b Addr) bool { return a.Addr == b.Addr }),
		cmp.Comparer(func(a, b MAC) bool { return a.String() == b.String() }),
		cmp.Comparer(func(a, b Pool) bool { return a == b }),
		// Lines point into the file each was read from; the text must match.
		cmp.Comparer(func(a, b Template) bool { return a.Text == b.Text }), cmpopts.EquateEmpty(),
		// Set is which keys each file wrote: the effective config writes all.
		cmpopts.IgnoreFields(Config{}, "Set")); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(DefaultYAML()))
	for _, n := range []string{"lab-proxy", "isolated-full"} {
		b, _ := Example(n)
		f.Add(b)
	}
	f.Add([]byte("dhcp:\n  pool: 10.0.0.1-10.0.0.9\n  mode: full\n"))
	f.Add([]byte("hosts:\n  - mac: 52:54:00:00:00:01\n    address: 1.2.3.4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data, Default())
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if verr := c.Validate(); verr != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
		}
	})
}

// TestTemplateLines: a template remembers the config line its text starts
// on (the line after a | block indicator), so errors point into the file.
func TestTemplateLines(t *testing.T) {
	yml := "templates:\n  pxelinux: |\n    default x\n  grub: \"set timeout=1\"\n  uboot: \"\"\nhosts:\n  - mac: 52:54:00:00:00:01\n    fdt: a.dtb\n    templates:\n      uboot: |-\n        echo hi\n"
	c, err := Parse("t.yaml", []byte(yml), Default())
	if err != nil {
		t.Fatal(err)
	}
	got := []int{c.Templates.PXELinux.Line, c.Templates.GRUB.Line, c.Templates.UBoot.Line, c.Hosts[0].Templates.UBoot.Line}
	if d := cmp.Diff([]int{3, 4, 0, 11}, got); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
	if c.Hosts[0].FDT != "a.dtb" || c.Templates.PXELinux.Text != "default x\n" {
		t.Errorf("decoded %+v", c.Hosts[0])
	}
	_, err = Parse("t.yaml", []byte("templates:\n  grub: [a, b]\n"), Default())
	if err == nil || !strings.Contains(err.Error(), "t.yaml:2") || !strings.Contains(err.Error(), "a template is text") {
		t.Errorf("a list as template: %v", err)
	}
}

func TestBootFileKeys(t *testing.T) {
	for yml, want := range map[string]string{
		"dhcp:\n  boot_files:\n    uboot: u/boot.scr\n    default: fallback.scr\n    http-arm64: x.efi\n": "",
		"dhcp:\n  boot_files:\n    ubot: x\n":       `"ubot" is not an architecture name; use one of`,
		"dhcp:\n  boot_files:\n    efi-x64: \"\"\n": "dhcp.boot_files.efi-x64: is empty",
	} {
		_, err := Parse("b.yaml", []byte(yml), Default())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: err %v, want %q", yml, err, want)
		}
	}
	d := Default().DHCP
	d.BootFiles = map[string]string{"efi-arm64": "a.efi"}
	for code, want := range map[uint16]string{19: "a.efi", 11: "a.efi", 22: "boot.scr.uimg", 16: "ipxe.efi"} {
		a, _ := ArchByCode(code)
		if got := d.BootFile(a); got != want {
			t.Errorf("code %d: %q, want %q", code, got, want)
		}
	}
	a, _ := ArchByCode(19)
	if k := d.BootFileKey(a); k != "efi-arm64" {
		t.Errorf("key for http-arm64 = %q", k)
	}
}

// TestRenamedSection: an old file's bench: (the stream server's key before
// it was named stream) loads as stream:, with a warning naming the new key
// and the line; the new name loads without one.
func TestRenamedSection(t *testing.T) {
	c, err := Parse("t.yaml", []byte("log_level: info\nbench:\n  enabled: true\n  listen: :5300\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if !c.Stream.Enabled || c.Stream.Listen != ":5300" || !c.IsSet("stream.enabled") {
		t.Errorf("bench: read as %+v (stream.enabled set: %v), want on at :5300", c.Stream, c.IsSet("stream.enabled"))
	}
	want := "t.yaml:2: bench: was renamed stream; read as stream for now: rename the key"
	if len(c.Warnings) != 1 || c.Warnings[0] != want {
		t.Errorf("warnings %q, want [%q]", c.Warnings, want)
	}
	c, err = Parse("t.yaml", []byte("stream:\n  enabled: true\n"), Default())
	if err != nil || !c.Stream.Enabled || len(c.Warnings) != 0 {
		t.Errorf("stream: read as %+v, warnings %q, err %v; want on, no warning", c.Stream, c.Warnings, err)
	}
}
