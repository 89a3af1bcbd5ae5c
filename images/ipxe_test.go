package images

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// countHandler counts log records by message.
type countHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs[r.Message]++
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

func TestIPXEFallback(t *testing.T) {
	fb := t.TempDir()
	for _, n := range []string{"undionly.kpxe", "ipxe.efi", "snponly.efi", "other.rom"} {
		writeFile(t, filepath.Join(fb, n), []byte("debian "+n))
	}
	root, data := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(root, "ipxe.efi"), []byte("my own ipxe.efi"))
	writeFile(t, filepath.Join(root, "snponly.efi.zst"), compress(t, ".zst", []byte("my compressed snponly")))
	h := &countHandler{msgs: map[string]int{}}
	s := openStore(t, root, data, slog.New(h), WithFallbackDir(fb))

	checkOpens(t, s, map[string]openCase{
		"root lacks it: fallback":      {name: "undionly.kpxe", want: "debian undionly.kpxe"},
		"leading slash still fallback": {name: "/undionly.kpxe", want: "debian undionly.kpxe"},
		"root has it: root's":          {name: "ipxe.efi", want: "my own ipxe.efi"},
		"root has it compressed":       {name: "snponly.efi", want: "my compressed snponly"},
		"not an iPXE name":             {name: "other.rom", wantErr: fs.ErrNotExist},
		"iPXE name in a folder":        {name: "x86/undionly.kpxe", wantErr: fs.ErrNotExist},
		"iPXE name fallback lacks":     {name: "ipxe.lkrn", wantErr: fs.ErrNotExist},
	})
	for range 3 {
		if _, _, err := readOpen(t, s, "undionly.kpxe"); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.msgs["serving iPXE binary from the fallback folder; put your own build in the root to override"]; n != 1 {
		t.Errorf("fallback logged %d times for one name, want once", n)
	}

	// Dropping a build into the root overrides the fallback at once.
	writeFile(t, filepath.Join(root, "undionly.kpxe"), []byte("mine now"))
	if got, _, err := readOpen(t, s, "undionly.kpxe"); err != nil || !bytes.Equal(got, []byte("mine now")) {
		t.Fatalf("root copy did not win over the fallback: %q, %v", got, err)
	}
}

func TestIPXEFallbackOff(t *testing.T) {
	fb := t.TempDir()
	writeFile(t, filepath.Join(fb, "undionly.kpxe"), []byte("debian"))
	s := openStore(t, t.TempDir(), "", nil, WithFallbackDir(""))
	if _, _, err := s.Open("undionly.kpxe"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("fallback off still served: %v", err)
	}
}

// TestIPXEFallbackDebian uses the real package, where it is installed.
func TestIPXEFallbackDebian(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(DefaultFallbackDir, "undionly.kpxe"))
	if err != nil {
		t.Skipf("Debian's ipxe package is not installed (%v); apt-get install ipxe", err)
	}
	s := openStore(t, t.TempDir(), "", nil)
	got, _, err := readOpen(t, s, "undionly.kpxe")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("default fallback did not serve %s/undionly.kpxe: %v", DefaultFallbackDir, err)
	}
}

func TestSignedLoaderFallback(t *testing.T) {
	pkg := t.TempDir()
	shim, grub := filepath.Join(pkg, "shimx64.efi.signed"), filepath.Join(pkg, "grubnetx64.efi.signed")
	writeFile(t, shim, []byte("debian shim"))
	writeFile(t, grub, []byte("debian grub"))
	root := t.TempDir()
	h := &countHandler{msgs: map[string]int{}}
	s := openStore(t, root, "", slog.New(h), WithFallbackDir(""),
		WithSignedLoaders(map[string]string{"shimx64.efi": shim, "grubx64.efi": grub, "mmx64.efi": filepath.Join(pkg, "absent")}))
	checkOpens(t, s, map[string]openCase{
		"shim from the package":        {name: "shimx64.efi", want: "debian shim"},
		"grub under shim's name":       {name: "/grubx64.efi", want: "debian grub"},
		"package lacks the file":       {name: "mmx64.efi", wantErr: fs.ErrNotExist},
		"a folder is the user's":       {name: "efi/grubx64.efi", wantErr: fs.ErrNotExist},
		"shim's probe is not supplied": {name: "revocations_sbat.efi", wantErr: fs.ErrNotExist},
	})
	if from, err := s.Source("grubx64.efi"); from != "fallback" || err != nil {
		t.Errorf("Source(grubx64.efi) = %q, %v; want fallback", from, err)
	}
	if n := h.msgs["serving the signed Secure Boot loader from the host's grub-efi-amd64-signed package; put your own in the root to override"]; n != 1 {
		t.Errorf("signed grub logged %d times, want once (naming its package): %v", n, h.msgs)
	}
	writeFile(t, filepath.Join(root, "grubx64.efi"), []byte("my grub"))
	if got, _, err := readOpen(t, s, "grubx64.efi"); err != nil || string(got) != "my grub" {
		t.Fatalf("root copy did not win over the package: %q, %v", got, err)
	}
	off := openStore(t, t.TempDir(), "", nil, WithSignedLoaders(nil))
	if _, _, err := off.Open("shimx64.efi"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("signed fallback off still served: %v", err)
	}
}

func TestIsShim(t *testing.T) {
	for n, want := range map[string]bool{"shimx64.efi": true, "efi/SHIMAA64.EFI": true, "grubx64.efi": false, "shim.txt": false, "ipxe.efi": false} {
		if IsShim(n) != want {
			t.Errorf("IsShim(%q) = %v, want %v", n, !want, want)
		}
	}
}
