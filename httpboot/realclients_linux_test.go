//go:build linux

// The built binary (`pxeperf serve`) against real clients in namespaces:
// curl, and QEMU's iPXE ROM.
package httpboot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestCurlRealBinary runs `pxeperf serve` (HTTP only) in a server namespace
// and fetches with curl from a client namespace over veth.
func TestCurlRealBinary(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "curl")
	bin := nstest.Binary(t)
	p := nstest.NewPair(t, nstest.Options{})
	dir := t.TempDir()
	root, data, out := filepath.Join(dir, "root"), filepath.Join(dir, "data"), filepath.Join(dir, "out")
	for _, d := range []string{root, data, out, filepath.Join(dir, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nstest.RandomFile(t, filepath.Join(root, "big.img"), 24<<20+123, 11)
	nstest.RandomFile(t, filepath.Join(root, "ipxe.efi"), 1<<20, 12)
	if err := os.WriteFile(filepath.Join(dir, "outside", "secret"), []byte("secret-outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := nstest.Start(t, p.Server, bin, "serve", "--dhcp", "off", "--tftp-addr", "off",
		"--http-addr", p.ServerIP.String()+":8080", "--root", root, "--data", data, "--iface", p.ServerIf)
	base := fmt.Sprintf("http://%s:8080", p.ServerIP)
	curl := func(args ...string) (string, error) {
		return nstest.Output(p.Client, 60*time.Second, "curl", append([]string{"-sS", "--max-time", "30"}, args...)...)
	}
	if !nstest.WaitFor(10*time.Second, func() bool {
		o, err := curl("-f", base+"/healthz")
		return err == nil && strings.Contains(o, `"status":"ok"`)
	}) {
		t.Fatalf("pxeperf did not answer /healthz:\n%s", srv.Out.String())
	}

	t.Run("byte-exact download", func(t *testing.T) {
		for _, name := range []string{"big.img", "ipxe.efi"} {
			dst := filepath.Join(out, name)
			if o, err := curl("-f", "-o", dst, base+"/"+name); err != nil {
				t.Fatalf("curl %s: %v\n%s", name, err, o)
			}
			if got, want := nstest.FileSHA256(t, dst), nstest.FileSHA256(t, filepath.Join(root, name)); got != want {
				t.Errorf("%s: sha256 %s, want %s", name, got, want)
			}
		}
	})
	t.Run("escapes refused", func(t *testing.T) {
		rel, _ := filepath.Rel(root, filepath.Join(dir, "outside", "secret"))
		for _, target := range []string{"/" + rel, "/%2e%2e/" + strings.TrimPrefix(rel, "../"), "/sub/../../" + strings.TrimPrefix(rel, "../")} {
			o, err := curl("--path-as-is", "-o", "/dev/null", "-w", "%{http_code}", base+target)
			if err != nil {
				t.Fatalf("curl %s: %v %s", target, err, o)
			}
			if o != "403" && o != "404" {
				t.Errorf("GET %s: HTTP %s, want 403 or 404", target, o)
			}
		}
	})
	t.Run("range", func(t *testing.T) {
		dst := filepath.Join(out, "range")
		o, err := curl("-f", "-r", "1000-1999", "-o", dst, "-w", "%{http_code}", base+"/ipxe.efi")
		if err != nil || o != "206" {
			t.Fatalf("curl -r: %v %s", err, o)
		}
		got, _ := os.ReadFile(dst)
		whole, _ := os.ReadFile(filepath.Join(root, "ipxe.efi"))
		if string(got) != string(whole[1000:2000]) {
			t.Errorf("range body differs (%d bytes)", len(got))
		}
	})
	t.Run("head", func(t *testing.T) {
		o, err := curl("-f", "-I", base+"/big.img")
		if err != nil {
			t.Fatal(err, o)
		}
		if !strings.Contains(strings.ToLower(o), fmt.Sprintf("content-length: %d", 24<<20+123)) {
			t.Errorf("HEAD headers lack the size:\n%s", o)
		}
	})
	t.Run("script compressed", func(t *testing.T) {
		// No ?mac=: with DHCP off nothing binds a MAC to curl's address.
		o, err := curl("-f", "--compressed", base+"/boot.ipxe")
		if err != nil || !strings.HasPrefix(o, "#!ipxe") || !strings.Contains(o, "pxeperf: no kernel is set for") {
			t.Errorf("boot.ipxe: %v\n%s", err, o)
		}
	})
	if !nstest.WaitFor(5*time.Second, func() bool {
		return strings.Contains(srv.Out.String(), "file=big.img") && strings.Contains(srv.Out.String(), "outcome=ok")
	}) {
		t.Errorf("no fetch event logged for big.img:\n%s", srv.Out.String())
	}
}

// TestIPXERealClient boots QEMU's iPXE ROM in the client namespace (QEMU
// user networking hands it the script URL as boot file) against the real
// binary in the server namespace: iPXE fetches /boot.ipxe?mac=${net0/mac},
// the built-in script picks the host entry by MAC and iPXE fetches its
// kernel. Both fetches must be logged ok and put on the host.
func TestIPXERealClient(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "qemu-system-x86_64", "curl")
	if _, err := os.Stat("/usr/lib/ipxe/qemu/pxe-virtio.rom"); err != nil {
		t.Skip("needs QEMU's iPXE ROMs (apt-get install ipxe-qemu)")
	}
	bin := nstest.Binary(t)
	p := nstest.NewPair(t, nstest.Options{})
	dir := t.TempDir()
	root, data := filepath.Join(dir, "root"), filepath.Join(dir, "data")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	const kernelSize = 300_000
	nstest.RandomFile(t, filepath.Join(root, "vmlinuz-fake"), kernelSize, 21)
	const mac = "52:54:00:12:34:56"
	cfg := fmt.Sprintf(`dhcp:
  mode: "off"
tftp:
  enabled: false
http:
  listen: %s:8080
hosts:
  - mac: %q
    name: qemu-vm
    address: %s   # DHCP is off: the entry's address lets ?mac= claim the host
    kernel: vmlinuz-fake
    cmdline: console=ttyS0
`, p.ServerIP, mac, p.ClientIP)
	cfgPath := filepath.Join(dir, "pxeperf.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := nstest.Start(t, p.Server, bin, "serve", "--config", cfgPath, "--root", root, "--data", data, "--iface", p.ServerIf)
	base := fmt.Sprintf("http://%s:8080", p.ServerIP)
	if !nstest.WaitFor(10*time.Second, func() bool {
		_, err := nstest.Output(p.Client, 5*time.Second, "curl", "-sf", base+"/healthz")
		return err == nil
	}) {
		t.Fatalf("pxeperf did not answer /healthz:\n%s", srv.Out.String())
	}
	vm := nstest.Start(t, p.Client, "qemu-system-x86_64", "-accel", "tcg", "-m", "128", "-nographic",
		"-monitor", "none", "-no-reboot", "-boot", "n",
		"-netdev", "user,id=n0,bootfile="+base+"/boot.ipxe?mac=${net0/mac}",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac)
	fetchLine := func(file string) string {
		for _, l := range strings.Split(srv.Out.String(), "\n") {
			if strings.Contains(l, "msg=fetch") && strings.Contains(l, "file="+file+" ") {
				return l
			}
		}
		return ""
	}
	if !nstest.WaitFor(180*time.Second, func() bool { return fetchLine("vmlinuz-fake") != "" }) {
		t.Fatalf("iPXE did not fetch the kernel in 180 s\nserver:\n%s\nqemu:\n%s", srv.Out.String(), vm.Out.String())
	}
	want := map[string][]string{
		"boot.ipxe":    {"outcome=ok", "client_mac=" + mac, "host=qemu-vm", "rtt="},
		"vmlinuz-fake": {"outcome=ok", fmt.Sprintf("bytes=%d ", kernelSize), "client_mac=" + mac, "host=qemu-vm", "max_wnd="},
	}
	for file, subs := range want {
		l := fetchLine(file)
		for _, s := range subs {
			if !strings.Contains(l, s) {
				t.Errorf("fetch of %s lacks %q: %s", file, s, l)
			}
		}
	}
}
