package bootcfg

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
)

var (
	macBoard = net.HardwareAddr{0x52, 0x54, 0, 0xb0, 0, 1}
	macBare  = net.HardwareAddr{0x52, 0x54, 0, 0xb0, 0, 2} // host entry without kernel
	macNone  = net.HardwareAddr{0x52, 0x54, 0, 0xb0, 0, 3} // no host entry
	macLocal = net.HardwareAddr{0x52, 0x54, 0, 0xb0, 0, 4} // default_boot local, local_boot mmc0
	macShell = net.HardwareAddr{0x52, 0x54, 0, 0xb0, 0, 5} // default_boot shell
)

// testSource builds a Source over a root holding files, with board1
// (kernel) at 10.0.0.21 and bare (no kernel) at 10.0.0.22 in the lease
// table.
func testSource(t *testing.T, cfg *configs.Config, files map[string]string) *Source {
	t.Helper()
	root := t.TempDir()
	for n, body := range files {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := images.Open(root, t.TempDir(), nil, images.WithFallbackDir(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if cfg == nil {
		cfg = &configs.Config{}
	}
	cfg.Hosts = append(cfg.Hosts,
		configs.Host{MAC: configs.MAC{HardwareAddr: macBoard}, Name: "board1", Kernel: "vmlinuz", Initrd: "initrd.img", Cmdline: "console=ttyAMA0"},
		configs.Host{MAC: configs.MAC{HardwareAddr: macBare}, Name: "bare"},
		configs.Host{MAC: configs.MAC{HardwareAddr: macLocal}, Name: "local", DefaultBoot: configs.BootLocal, LocalBoot: "mmc0"},
		configs.Host{MAC: configs.MAC{HardwareAddr: macShell}, Name: "shell", DefaultBoot: configs.BootShell})
	table := hosts.New(cfg.Hosts)
	table.Observe(hosts.Client{MAC: macBoard, Addr: netip.MustParseAddr("10.0.0.21"), Arch: 22})
	table.Observe(hosts.Client{MAC: macBare, Addr: netip.MustParseAddr("10.0.0.22"), Arch: configs.ArchUnknown})
	table.Observe(hosts.Client{MAC: macLocal, Addr: netip.MustParseAddr("10.0.0.23"), Arch: configs.ArchUnknown})
	s, err := New(Options{Config: cfg, Images: store, Hosts: table, Server: netip.MustParseAddr("10.0.0.1"), HTTPBase: "http://10.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func read(t *testing.T, c *Content) string {
	t.Helper()
	defer c.Close()
	b, err := io.ReadAll(c.Reader())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != c.Size {
		t.Errorf("read %d bytes, Size says %d", len(b), c.Size)
	}
	return string(b)
}

func TestSourceOpen(t *testing.T) {
	s := testSource(t, nil, map[string]string{
		"vmlinuz":                           "kernel",
		"pxelinux.cfg/01-52-54-00-b0-00-02": "# hand-written for bare\n",
	})
	from21 := Peer{Client: netip.MustParseAddr("10.0.0.21")}
	from22 := Peer{Client: netip.MustParseAddr("10.0.0.22")}
	from99 := Peer{Client: netip.MustParseAddr("10.0.0.99")}
	tests := map[string]struct {
		name     string
		peer     Peer
		loader   Loader // "" for a root file; "-" for not found
		host     string
		contains string
	}{
		"root file":                         {"vmlinuz", from21, "", "", "kernel"},
		"pxelinux by mac":                   {"pxelinux.cfg/01-52-54-00-b0-00-01", from99, PXELinux, "board1", "kernel vmlinuz"},
		"pxelinux by mac under a folder":    {"/boot/pxelinux.cfg/01-52-54-00-b0-00-01", from99, PXELinux, "board1", "append console=ttyAMA0"},
		"pxelinux by full hex ip":           {"pxelinux.cfg/0A000015", from99, PXELinux, "board1", "kernel vmlinuz"},
		"pxelinux default by lease":         {"pxelinux.cfg/default", from21, PXELinux, "board1", "initrd initrd.img"},
		"pxelinux hex prefix by lease":      {"pxelinux.cfg/0A00", from21, PXELinux, "board1", "kernel vmlinuz"},
		"root file wins over generated":     {"pxelinux.cfg/01-52-54-00-b0-00-02", from22, "", "", "hand-written"},
		"pxelinux for host without kernel":  {"pxelinux.cfg/default", from22, "-", "", ""},
		"pxelinux for unknown mac":          {"pxelinux.cfg/01-52-54-00-b0-00-03", from99, "-", "", ""},
		"pxelinux default for unknown peer": {"pxelinux.cfg/default", from99, "-", "", ""},
		"grub by mac":                       {"grub.cfg-01-52-54-00-b0-00-01", from99, GRUB, "board1", "linux vmlinuz console=ttyAMA0"},
		"grub.cfg by lease":                 {"grub/grub.cfg", from21, GRUB, "board1", "initrd initrd.img"},
		"signed grubnet's /grub/grub.cfg":   {"/grub/grub.cfg", from21, GRUB, "board1", "linux vmlinuz console=ttyAMA0"},
		"uboot script by lease":             {"boot.scr.uimg", from21, UBoot, "board1", "tftpboot ${kernel_addr_r} vmlinuz"},
		"uboot script for host w/o kernel":  {"boot.scr.uimg", from22, UBoot, "bare", "no kernel is set for bare (52:54:00:b0:00:02"},
		"uboot script for unknown peer":     {"boot.scr", from99, UBoot, "", "no kernel is set for 10.0.0.99"},
		"not a config name":                 {"missing.img", from21, "-", "", ""},
		// default_boot makes the pxelinux and GRUB configs of a host
		// without a kernel exist, as the U-Boot script always does.
		"pxelinux local":   {"pxelinux.cfg/01-52-54-00-b0-00-04", from99, PXELinux, "local", "localboot 0"},
		"pxelinux shell":   {"pxelinux.cfg/01-52-54-00-b0-00-05", from99, PXELinux, "shell", "prompt 1\ntimeout 0"},
		"grub local":       {"grub.cfg-01-52-54-00-b0-00-04", from99, GRUB, "local", "\nexit\n"},
		"grub shell":       {"grub.cfg-01-52-54-00-b0-00-05", from99, GRUB, "shell", "stops at the GRUB prompt"},
		"uboot local_boot": {"boot.scr.uimg", Peer{Client: netip.MustParseAddr("10.0.0.23")}, UBoot, "local", "run bootcmd_mmc0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := s.Open(tc.name, tc.peer)
			if tc.loader == "-" {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("Open = %v, %v; want fs.ErrNotExist", c, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Loader != tc.loader || c.Generated() != (tc.loader != "") {
				t.Errorf("loader %q generated %v, want %q", c.Loader, c.Generated(), tc.loader)
			}
			host := ""
			if c.Host != nil {
				host = c.Host.Name
			}
			if host != tc.host {
				t.Errorf("host %q, want %q", host, tc.host)
			}
			body := read(t, c)
			if c.Loader == UBoot {
				_, script, err := ParseScriptImage([]byte(body))
				if err != nil {
					t.Fatalf("U-Boot script image: %v", err)
				}
				body = string(script)
			}
			if !strings.Contains(body, tc.contains) {
				t.Errorf("content lacks %q:\n%s", tc.contains, body)
			}
		})
	}
}

// TestSourceTemplates: a host's template wins over the global one, which
// wins over the built-in; a global template makes configs for hosts
// without a kernel too.
func TestSourceTemplates(t *testing.T) {
	cfg := &configs.Config{Templates: configs.Templates{
		PXELinux: configs.Template{Text: "global {{.Hostname}} {{.Server}} {{.ServerURL}}\n"},
		UBoot:    configs.Template{Text: "@tmpl/uboot.txt"},
	}}
	s := testSource(t, cfg, map[string]string{"tmpl/uboot.txt": "echo from-file {{.MAC}}\n"})

	c, err := s.Open("pxelinux.cfg/default", Peer{Client: netip.MustParseAddr("10.0.0.22"), Local: netip.MustParseAddr("10.0.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, c); got != "global bare 10.0.0.2 http://10.0.0.1:8080\n" {
		t.Errorf("global template for a host without kernel = %q", got)
	}
	c, err = s.Open("boot.scr.uimg", Peer{Client: netip.MustParseAddr("10.0.0.21")})
	if err != nil {
		t.Fatal(err)
	}
	_, script, err := ParseScriptImage([]byte(read(t, c)))
	if err != nil || string(script) != "echo from-file 52:54:00:b0:00:01\n" {
		t.Errorf("@file U-Boot template = %q, %v", script, err)
	}

	cfg2 := &configs.Config{Templates: cfg.Templates}
	cfg2.Hosts = []configs.Host{{MAC: configs.MAC{HardwareAddr: macNone}, Name: "own",
		Templates: configs.Templates{PXELinux: configs.Template{Text: "own {{.MAC}}\n"}}}}
	s2 := testSource(t, cfg2, map[string]string{"tmpl/uboot.txt": "x"})
	c, err = s2.Open("pxelinux.cfg/01-52-54-00-b0-00-03", Peer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, c); got != "own 52:54:00:b0:00:03\n" {
		t.Errorf("host template = %q", got)
	}
}

// TestNewTemplateErrors: every broken template is reported at once, with
// its key, the config file and line, and the fix.
func TestNewTemplateErrors(t *testing.T) {
	store, err := images.Open(t.TempDir(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := &configs.Config{File: "lab.yaml",
		Templates: configs.Templates{GRUB: configs.Template{Text: "linux {{.Kernal}}\n", Line: 7}},
		Hosts: []configs.Host{{MAC: configs.MAC{HardwareAddr: macBoard}, Name: "zynq1",
			Templates: configs.Templates{
				UBoot:    configs.Template{Text: "echo a\n{{if .Kernel}}\n", Line: 20},
				PXELinux: configs.Template{Text: "@missing.tmpl"},
			}}}}
	_, err = New(Options{Config: cfg, Images: store})
	if err == nil {
		t.Fatal("New accepted broken templates")
	}
	msg := err.Error()
	for _, want := range []string{
		"templates.grub (lab.yaml line 7)", "Kernal",
		"hosts[zynq1].templates.uboot (lab.yaml line 2", "fix the template",
		"hosts[zynq1].templates.pxelinux: reading the template @missing.tmpl from the root", "put the file in the root",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestCheckBootFiles(t *testing.T) {
	cfg := configs.Default()
	cfg.DHCP.BootFiles = map[string]string{"efi-arm64": "arm64/snp.efi", "efi-x64": "http://mirror/ipxe.efi"}
	s := testSource(t, cfg, map[string]string{"undionly.kpxe": "x", "arm64/snp.efi.zst": "not really zstd"})
	got := map[string]string{}
	var warn string
	for _, r := range s.CheckBootFiles(cfg) {
		got[r.Key+" "+r.File] = r.From
		if r.Key == "efi-riscv64" {
			warn = r.Warning("/srv/root")
		}
	}
	want := map[string]string{
		"bios undionly.kpxe":             "root",
		"efi-x64 http://mirror/ipxe.efi": "url",
		"efi-arm64 arm64/snp.efi":        "root", // .zst counts: it is served unpacked
		"uboot boot.scr.uimg":            "generated",
		"default boot.scr.uimg":          "generated",
		"efi-riscv64 ipxe-riscv64.efi":   "",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: from %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["http-arm64 arm64/snp.efi"]; ok {
		t.Errorf("http-arm64 listed apart from efi-arm64, whose file it takes: %v", got)
	}
	if d := cmp.Diff("dhcp.boot_files.efi-riscv64: ipxe-riscv64.efi is not in /srv/root nor in the iPXE fallback, so option 93 27/28 clients cannot boot; put ipxe-riscv64.efi in the root, or set dhcp.boot_files.efi-riscv64 to a file you have", warn); d != "" {
		t.Errorf("warning (-want +got):\n%s", d)
	}
}
