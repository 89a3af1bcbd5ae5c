package bootcfg

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
)

// TestSourceReload: Reload swaps in the new templates at once; a template
// that does not parse leaves the old set serving.
func TestSourceReload(t *testing.T) {
	cfg := &configs.Config{Templates: configs.Templates{PXELinux: configs.Template{Text: "old {{.Hostname}}\n"}}}
	s := testSource(t, cfg, nil)
	peer := Peer{Client: netip.MustParseAddr("10.0.0.22")}
	open := func() string {
		t.Helper()
		c, err := s.Open("pxelinux.cfg/default", peer)
		if err != nil {
			t.Fatal(err)
		}
		return read(t, c)
	}
	if got := open(); got != "old bare\n" {
		t.Fatalf("before reload: %q", got)
	}
	next := *cfg
	next.Templates = configs.Templates{PXELinux: configs.Template{Text: "new {{.Hostname}}\n"}}
	if err := s.Reload(Options{Config: &next}); err != nil {
		t.Fatal(err)
	}
	if got := open(); got != "new bare\n" {
		t.Fatalf("after reload: %q", got)
	}
	broken := *cfg
	broken.Templates = configs.Templates{PXELinux: configs.Template{Text: "bad {{.Hostname\n", Line: 7}}
	broken.File = "lab.yaml"
	err := s.Reload(Options{Config: &broken})
	if err == nil || !strings.Contains(err.Error(), "templates.pxelinux") {
		t.Fatalf("broken reload: %v, want the template's key", err)
	}
	if got := open(); got != "new bare\n" {
		t.Fatalf("a refused reload changed what is served: %q", got)
	}
}
