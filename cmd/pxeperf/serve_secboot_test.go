package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/images"
)

func TestShimWarnings(t *testing.T) {
	pkg := t.TempDir()
	shim := filepath.Join(pkg, "shimx64.efi.signed")
	if err := os.WriteFile(shim, []byte("shim"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	store, err := images.Open(root, "", nil, images.WithFallbackDir(""),
		images.WithSignedLoaders(map[string]string{"shimx64.efi": shim, "grubx64.efi": filepath.Join(pkg, "absent")}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rs := []bootcfg.Resolution{{Key: "efi-x64", File: "shimx64.efi", From: "fallback"}, {Key: "bios", File: "undionly.kpxe"}}
	ws := shimWarnings(rs, store, root)
	if len(ws) != 1 || !strings.Contains(ws[0], "grubx64.efi is not in") || !strings.Contains(ws[0], "apt-get install grub-efi-amd64-signed") {
		t.Fatalf("shim without GRUB: warnings %q; want one naming grubx64.efi and grub-efi-amd64-signed", ws)
	}
	// A shim in a folder asks for GRUB beside it, which only the root can supply.
	ws = shimWarnings([]bootcfg.Resolution{{Key: "efi-x64", File: "efi/shimx64.efi"}}, store, root)
	if len(ws) != 2 || !strings.Contains(ws[0], "apt-get install shim-signed") || !strings.Contains(ws[1], "efi/grubx64.efi") {
		t.Fatalf("shim in a folder: warnings %q; want the shim (shim-signed) and efi/grubx64.efi", ws)
	}
	if err := os.WriteFile(filepath.Join(root, "grubx64.efi"), []byte("grub"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ws := shimWarnings(rs, store, root); len(ws) != 0 {
		t.Fatalf("shim and GRUB both served: warnings %q, want none", ws)
	}
}
