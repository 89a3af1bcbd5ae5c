package tftp

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pin "github.com/pin/tftp/v3"
	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// TestGeneratedConfigOverTFTP: the pxelinux.cfg chain U-Boot's `pxe get`
// walks is answered from the host entry (01-MAC first, missing names
// refused at once with "File not found"), the U-Boot script by the
// client's lease, a root file wins; generated fetches are recorded as
// configs with the host.
func TestGeneratedConfigOverTFTP(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:0d:0e:0f")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pxelinux.cfg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pxelinux.cfg", "default"), []byte("# lab default\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := images.Open(root, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hostList := []configs.Host{{MAC: configs.MAC{HardwareAddr: mac}, Name: "imx8", Kernel: "Image", FDT: "imx8mp-evk.dtb", Cmdline: "console=ttymxc1"}}
	table := hosts.New(hostList)
	table.Observe(hosts.Client{MAC: mac, Addr: netip.MustParseAddr("127.0.0.1"), Arch: 22})
	src, err := bootcfg.New(bootcfg.Options{Config: &configs.Config{Hosts: hostList}, Images: store, Hosts: table})
	if err != nil {
		t.Fatal(err)
	}
	rec := &event.Recorder{}
	s, err := New(Config{Listen: "127.0.0.1:0", MTU: 1500, Files: src, Hosts: table, Sink: rec, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "tftp", 15*time.Second, s.Serve)

	fetch := func(name string) (string, error) {
		c, err := pin.NewClient(s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(2 * time.Second)
		wt, err := c.Receive(name, "octet")
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		_, err = wt.WriteTo(&b)
		return b.String(), err
	}
	body, err := fetch("pxelinux.cfg/01-52-54-00-0d-0e-0f")
	if err != nil || !strings.Contains(body, "kernel Image") || !strings.Contains(body, "fdt imx8mp-evk.dtb") {
		t.Fatalf("pxelinux.cfg/01-MAC: %v\n%s", err, body)
	}
	if _, err := fetch("pxelinux.cfg/01-52-54-00-0d-0e-10"); err == nil || !strings.Contains(err.Error(), "File not found") {
		t.Errorf("another MAC's config: %v, want File not found", err)
	}
	if body, err = fetch("pxelinux.cfg/default"); err != nil || body != "# lab default\n" {
		t.Errorf("root pxelinux.cfg/default: %v %q", err, body)
	}
	body, err = fetch("boot.scr.uimg")
	if err != nil {
		t.Fatal(err)
	}
	if _, script, err := bootcfg.ParseScriptImage([]byte(body)); err != nil || !strings.Contains(string(script), "imx8") {
		t.Errorf("boot.scr.uimg: %v\n%s", err, script)
	}
	fs, _ := rec.WaitFetches(4, 10*time.Second)
	if len(fs) != 4 {
		t.Fatalf("%d fetch events, want 4", len(fs))
	}
	// Events come in the order transfers end, not start.
	byFile := map[string]event.Fetch{}
	for _, f := range fs {
		byFile[f.File] = f
	}
	for file, want := range map[string]struct{ kind, outcome string }{
		"pxelinux.cfg/01-52-54-00-0d-0e-0f": {event.KindConfig, event.OutcomeOK},
		"pxelinux.cfg/01-52-54-00-0d-0e-10": {"", event.OutcomeNotFound},
		"pxelinux.cfg/default":              {"", event.OutcomeOK},
		"boot.scr.uimg":                     {event.KindConfig, event.OutcomeOK},
	} {
		f := byFile[file]
		if f.Kind != want.kind || f.Outcome != want.outcome || f.Host != "imx8" {
			t.Errorf("%s: kind %q outcome %q host %q, want %+v", file, f.Kind, f.Outcome, f.Host, want)
		}
	}
}
