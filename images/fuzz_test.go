package images

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseSidecar: a .sha256 file in the root is user input; whatever it
// holds, ParseSidecar returns a 64-digit lower-case hex digest or an error.
func FuzzParseSidecar(f *testing.F) {
	d := strings.Repeat("ab", 32)
	for _, s := range []string{d + "  vmlinuz\n", strings.ToUpper(d) + " *vmlinuz", "SHA256 (vmlinuz) = " + d, d, "", "\n" + d, "SHA256 (x) =", "zz" + d[2:]} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseSidecar(b)
		if err != nil {
			return
		}
		if len(got) != 64 || strings.Trim(got, "0123456789abcdef") != "" {
			t.Fatalf("ParseSidecar(%q) = %q, not a sha256 hex digest", b, got)
		}
	})
}

// FuzzOpenCompressed: a NAME.zst or NAME.gz in the root is unpacked for
// clients; whatever bytes it holds, Open serves the decompressed bytes or
// refuses with ErrCorrupt or ErrTooLarge, never panics, and leaves no temp
// file in the cache. A second Open answers the same (the failure is
// remembered, the success cached).
func FuzzOpenCompressed(f *testing.F) {
	small := []byte("pxeperf fuzz seed: an image")
	f.Add(true, compress(f, ".zst", small))
	f.Add(false, compress(f, ".gz", small))
	f.Add(true, compress(f, ".zst", bytes.Repeat([]byte{0}, 2<<20))) // past the limit
	f.Add(false, []byte("\x1f\x8b\x08\x00garbage"))
	f.Add(true, []byte("\x28\xb5\x2f\xfd"))
	f.Fuzz(func(t *testing.T, zst bool, b []byte) {
		ext := ".gz"
		if zst {
			ext = ".zst"
		}
		s, root, data := newStore(t, WithMaxUnpacked(1<<20))
		if err := os.WriteFile(filepath.Join(root, "img"+ext), b, 0o644); err != nil {
			t.Fatal(err)
		}
		got1, _, err1 := readOpen(t, s, "img")
		got2, _, err2 := readOpen(t, s, "img")
		for _, err := range []error{err1, err2} {
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Open = %v, want content, ErrCorrupt or ErrTooLarge", err)
			}
		}
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(got1, got2) {
			t.Fatalf("two Opens differ: %v / %v", err1, err2)
		}
		if n := s.attempts.Load(); n > 1 {
			t.Errorf("two Opens unpacked %d times", n)
		}
		if ents, err := os.ReadDir(data); err == nil {
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp") {
					t.Errorf("temp file %s left in the cache", e.Name())
				}
			}
		}
	})
}
