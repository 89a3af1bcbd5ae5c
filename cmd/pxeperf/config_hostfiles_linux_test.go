//go:build linux

package main

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// hostFilesConfig writes a config whose host board7 names a misspelt
// kernel, an fdt the root lacks and an initrd by URL, over a root holding
// arm64/Image; it returns the config's path and the root.
func hostFilesConfig(t *testing.T, kernel string) (cfg, root string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "arm64"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "arm64", "Image"), []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "pxeperf.yaml")
	yaml := "root: " + root + "\ndata: " + filepath.Join(dir, "data") + `
dhcp:
  mode: off
hosts:
  - mac: 52:54:00:aa:00:01
    name: zynq1
  - mac: 52:54:00:aa:00:07
    name: board7
    kernel: ` + kernel + `
    initrd: http://10.0.0.1/initrd.img
    fdt: arm64/board7.dtb
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, root
}

// TestConfigCheckHostFiles: the built binary's `config check` lists each
// host file missing from the root with host, key, the nearest root name
// and the fix, and still exits 0 (a missing file is a warning, as a
// missing boot file is); a URL is not checked; once the name is right
// only the fdt is left.
func TestConfigCheckHostFiles(t *testing.T) {
	bin := nstest.Binary(t)
	cfg, root := hostFilesConfig(t, "arm64/Imag")
	out, err := exec.Command(bin, "config", "check", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	for _, want := range []string{
		"# WARNING hosts[1] (board7).kernel: arm64/Imag is not in the root " + root + "; nearest: arm64/Image (fix the name, or put the file in the root)",
		"# WARNING hosts[1] (board7).fdt: arm64/board7.dtb is not in the root " + root,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config check lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), ".initrd:") || strings.Contains(string(out), "hosts[0]") {
		t.Errorf("config check lists a URL or a host with no files:\n%s", out)
	}

	cfg, _ = hostFilesConfig(t, "arm64/Image")
	out, err = exec.Command(bin, "config", "check", cfg).CombinedOutput()
	if err != nil || strings.Contains(string(out), ".kernel:") || !strings.Contains(string(out), "(board7).fdt:") {
		t.Errorf("with the kernel's name right: %v\n%s", err, out)
	}
}

// TestServeWarnsHostFiles: serve's boot setup (newBootSource) warns about
// each missing host file with the same line, and goes on serving.
func TestServeWarnsHostFiles(t *testing.T) {
	path, root := hostFilesConfig(t, "arm64/Imag")
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := images.Open(root, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs bytes.Buffer
	src, err := newBootSource(cfg, netip.MustParseAddr("127.0.0.1"), store, hosts.New(cfg.Hosts), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || src == nil {
		t.Fatalf("a missing host file must not stop serve: %v", err)
	}
	want := `level=WARN msg="host file missing: hosts[1] (board7).kernel: arm64/Imag is not in the root ` + root + `; nearest: arm64/Image`
	if !strings.Contains(logs.String(), want) || strings.Count(logs.String(), "host file missing") != 2 {
		t.Errorf("serve's log lacks %q (and one line for the fdt):\n%s", want, logs.String())
	}
}
