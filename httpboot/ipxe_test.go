//go:build linux

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
