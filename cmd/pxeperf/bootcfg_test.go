package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes a config with a U-Boot host entry and extra YAML.
func writeConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	cfg := `root: ` + filepath.Join(dir, "root") + `
data: ` + filepath.Join(dir, "data") + `
dhcp:
  mode: off
  boot_files:
    efi-arm64: arm64/snp.efi
hosts:
  - mac: 52:54:00:aa:00:01
    name: zynq1
    kernel: zImage
    cmdline: console=ttyPS0,115200
` + extra
	p := filepath.Join(dir, "pxeperf.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "root", "pxelinux.cfg"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigCheckBootFiles: config check --root resolves every
// architecture's boot file, names what is missing with the fix, and says
// which configs are generated and which root files replace them.
func TestConfigCheckBootFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "")
	root := filepath.Join(dir, "root")
	if err := os.WriteFile(filepath.Join(root, "pxelinux.cfg", "default"), []byte("# lab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "config", "check", cfg, "--root", root)
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	for _, want := range []string{
		"# WARNING dhcp.boot_files.efi-arm64: arm64/snp.efi is not in " + root + " nor in the iPXE fallback, so option 93 11/19 clients cannot boot;",
		"# dhcp.boot_files.uboot: boot.scr.uimg (generated)",
		"# pxelinux.cfg/default: served from the root (replaces the config pxeperf would generate)",
		"# host zynq1 (52:54:00:aa:00:01): generated pxelinux.cfg/01-52-54-00-aa-00-01",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "# WARNING dhcp.boot_files.efi-arm64") != 1 || strings.Contains(out, "boot_files.http-arm64") {
		t.Errorf("efi-arm64 should be warned about once, http-arm64 sharing it:\n%s", out)
	}
	if err := os.MkdirAll(filepath.Join(root, "arm64"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "arm64", "snp.efi"), []byte("MZ"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "config", "check", cfg, "--root", root)
	if err != nil || !strings.Contains(out, "# dhcp.boot_files.efi-arm64: arm64/snp.efi (root)") {
		t.Errorf("after adding the file: %v\n%s", err, out)
	}
}

// TestBrokenTemplateFailsEarly: a template that does not parse fails
// config check and serve at start, naming the key, file, line and fix.
func TestBrokenTemplateFailsEarly(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `    templates:
      uboot: |
        echo {{.Hostname}}
        tftpboot ${kernel_addr_r} {{.Kernal}}
`)
	want := "hosts[zynq1].templates.uboot (" + cfg + " line 15)"
	_, err := runCmd(t, "config", "check", cfg)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Kernal") || !strings.Contains(err.Error(), "fix the template") {
		t.Errorf("config check: %v\nwant it to contain %q", err, want)
	}
	_, err = runCmd(t, "serve", "--config", cfg, "--iface", "lo", "--addr", "127.0.0.1",
		"--tftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serve: %v\nwant it to contain %q", err, want)
	}

	dir2 := t.TempDir()
	cfg2 := writeConfig(t, dir2, "http:\n  script: |\n    #!ipxe\n    echo {{.MAC}\n")
	_, err = runCmd(t, "serve", "--config", cfg2, "--iface", "lo", "--addr", "127.0.0.1",
		"--tftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "iPXE script template http.script: "+cfg2+":15:") {
		t.Errorf("serve with a broken iPXE script: %v", err)
	}
}

// TestConfigCheckUncommonArchs: config check details every architecture
// without a boot file, but warns only about the common ones and those the
// config names; the rest (ia32, arm32, RISC-V, ...) are "no boot file".
func TestConfigCheckUncommonArchs(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "images")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("root: "+root+"\ndhcp:\n  boot_files:\n    efi-riscv64: riscv/snp.efi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "config", "check", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# no boot file: dhcp.boot_files.efi-ia32: ipxe-i386.efi", "# no boot file: dhcp.boot_files.rpiboot",
		"# WARNING dhcp.boot_files.efi-riscv64: riscv/snp.efi"} {
		if !strings.Contains(out, want) {
			t.Errorf("config check lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "WARNING dhcp.boot_files.efi-ia32") {
		t.Errorf("config check warns about an architecture nobody asked for:\n%s", out)
	}
}
