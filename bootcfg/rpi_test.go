package bootcfg

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRPiFallback: a Pi folder name is served from the root unless the
// folder exists; other names are left alone.
func TestRPiFallback(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "1a2b3c4d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"5e6f7a8b/start4.elf":          "start4.elf",
		"/5e6f7a8b/overlays/a.dtbo":    "overlays/a.dtbo",
		"dc-a6-32-01-36-c2/config.txt": "config.txt",
		"1a2b3c4d/start4.elf":          "", // its folder exists: served from it alone
		"5E6F7A8B/start4.elf":          "", // the bootloader writes lower case
		"5e6f7a8/start4.elf":           "",
		"5e6f7a8b/":                    "",
		"start4.elf":                   "",
		"dc:a6:32:01:36:c2/config.txt": "",
		"pxelinux.cfg/default":         "",
		"abcdefgh/x":                   "",
	} {
		got, ok := rpiFallback(dir, name)
		if ok != (want != "") || got != want {
			t.Errorf("%s: %q %v, want %q", name, got, ok, want)
		}
	}
}
