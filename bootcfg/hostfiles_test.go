package bootcfg

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/configs"
)

// TestCheckHostFiles: every kernel, initrd, fdt, fdtdir and script
// "@file" a host entry names that the root lacks is listed with its host,
// key and the root's nearest name; files present (also as .zst), URLs and
// names with template actions are not.
func TestCheckHostFiles(t *testing.T) {
	mac := func(b byte) configs.MAC {
		return configs.MAC{HardwareAddr: net.HardwareAddr{0x52, 0x54, 0, 0xc0, 0, b}}
	}
	cfg := &configs.Config{Hosts: []configs.Host{
		{MAC: mac(1), Name: "board7", Kernel: "arm64/Imag", Initrd: "http://10.0.0.1/initrd.img",
			FDT: "dtbs/rk3588/board.dtb", FDTDir: "dtbs/rk3588"},
		{MAC: mac(2), Kernel: "Image", Initrd: "initrd-arm64.img", FDTDir: "dtb",
			Script: configs.Template{Text: "@lab/custom.ipxe"}},
		{MAC: mac(3), Name: "tmpl", Kernel: "{{.MAC}}/Image", Script: configs.Template{Text: "#!ipxe\nexit\n"}},
	}}
	s := testSource(t, cfg, map[string]string{
		"arm64/Image": "k", "initrd-arm64.img.zst": "z", "dtbs/rk3588/board.dtb": "d",
		"vmlinuz": "k", "initrd.img": "i", // testSource's board1
	})
	got := s.CheckHostFiles(cfg)
	want := []HostFile{
		{Index: 0, Host: "board7", Key: "kernel", File: "arm64/Imag", Nearest: "arm64/Image"},
		{Index: 1, Key: "kernel", File: "Image", Nearest: "arm64/Image"},
		{Index: 1, Key: "fdtdir", File: "dtb", Nearest: "dtbs"},
		{Index: 1, Key: "script", File: "lab/custom.ipxe"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("missing host files (-want +got):\n%s", diff)
	}
	root := s.images.Dir()
	for i, w := range []string{
		"hosts[0] (board7).kernel: arm64/Imag is not in the root " + root + "; nearest: arm64/Image (fix the name, or put the file in the root)",
		"hosts[1].kernel: Image is not in the root " + root + "; nearest: arm64/Image",
		"hosts[1].fdtdir: dtb is not in the root " + root + "; nearest: dtbs (fix the name, or put the folder in the root)",
		"hosts[1].script: lab/custom.ipxe is not in the root " + root + " (put the file in the root, or fix the name)",
	} {
		if p := got[i].Problem(root); !strings.HasPrefix(p, w) {
			t.Errorf("problem %d:\n %s\nwant it to start with\n %s", i, p, w)
		}
	}
}
