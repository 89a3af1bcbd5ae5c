package images

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClean(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    string
		wantErr error
	}{
		"plain":             {in: "pxelinux.0", want: "pxelinux.0"},
		"nested":            {in: "efi/boot/bootx64.efi", want: "efi/boot/bootx64.efi"},
		"leading slash":     {in: "/boot/vmlinuz", want: "boot/vmlinuz"},
		"many slashes":      {in: "//a//b/", want: "a/b"},
		"backslashes":       {in: `\EFI\BOOT\grubx64.efi`, want: "EFI/BOOT/grubx64.efi"},
		"dot segments":      {in: "./a/./b", want: "a/b"},
		"dots in a name":    {in: "..hidden/x..y", want: "..hidden/x..y"},
		"parent":            {in: "../etc/passwd", wantErr: ErrOutsideRoot},
		"inner parent":      {in: "a/../../etc/passwd", wantErr: ErrOutsideRoot},
		"parent that stays": {in: "a/../b", wantErr: ErrOutsideRoot},
		"backslash parent":  {in: `..\..\etc\passwd`, wantErr: ErrOutsideRoot},
		"absolute parent":   {in: "/../x", wantErr: ErrOutsideRoot},
		"nul":               {in: "a\x00b", wantErr: ErrOutsideRoot},
		"empty":             {in: "", wantErr: fs.ErrNotExist},
		"only slashes":      {in: `/\/`, wantErr: fs.ErrNotExist},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Clean(tc.in)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Clean(%q) = %q, %v; want error %v", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Clean(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Clean(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"a", "/a/b", `\a\b`, "../x", "a/../b", "..", ".", "", "a\x00", "//", "./..", "a/.", "...", `\..\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Clean(in)
		if err != nil {
			if !errors.Is(err, ErrOutsideRoot) && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Clean(%q): unexpected error class %v", in, err)
			}
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || strings.ContainsAny(got, "\\\x00") {
			t.Fatalf("Clean(%q) = %q: not a clean relative slash path", in, got)
		}
		if got == ".." || strings.HasPrefix(got, "../") {
			t.Fatalf("Clean(%q) = %q climbs out", in, got)
		}
		// fs.ValidPath also insists on UTF-8, which Linux names need not be.
		if path.Clean(got) != got || !fs.ValidPath(strings.ToValidUTF8(got, "x")) {
			t.Fatalf("Clean(%q) = %q is not canonical", in, got)
		}
		again, err := Clean(got)
		if err != nil || again != got {
			t.Fatalf("Clean is not idempotent: %q -> %q -> %q, %v", in, got, again, err)
		}
	})
}

// newStore opens a Store on a fresh root and cache folder, with the iPXE
// fallback off unless opts turn it on.
func newStore(t *testing.T, opts ...Option) (s *Store, root, data string) {
	t.Helper()
	base := t.TempDir()
	root, data = filepath.Join(base, "root"), filepath.Join(base, "data", "cache")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, root, data, nil, append([]Option{WithFallbackDir("")}, opts...)...)
	return s, root, data
}

// openStore opens a Store as Open does, closed when the test ends; an
// error ends the test.
func openStore(t testing.TB, root, data string, log *slog.Logger, opts ...Option) *Store {
	t.Helper()
	s, err := Open(root, data, log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readOpen opens name and returns its content and announced size.
func readOpen(t *testing.T, s *Store, name string) ([]byte, int64, error) {
	t.Helper()
	f, size, err := s.Open(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b, size, nil
}

// openCase is a name to open and the content it must give, or the error.
type openCase struct {
	name    string
	want    string
	wantErr error
}

// checkOpens opens each case's name in s and checks content and size, or
// the error (errors.Is).
func checkOpens(t *testing.T, s *Store, tests map[string]openCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, size, err := readOpen(t, s, tc.name)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Open(%q) = %q, %v; want %v", tc.name, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.name, err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("Open(%q) content (-want +got):\n%s", tc.name, diff)
			}
			if size != int64(len(tc.want)) {
				t.Errorf("Open(%q) size = %d, want %d", tc.name, size, len(tc.want))
			}
		})
	}
}

func TestOpenConfinement(t *testing.T) {
	s, root, _ := newStore(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), []byte("secret"))
	writeFile(t, filepath.Join(root, "boot", "kernel"), []byte("kernel"))
	writeFile(t, filepath.Join(root, "etc", "passwd"), []byte("root's own passwd"))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("boot/kernel", filepath.Join(root, "link-in")))
	must(os.Symlink("../boot/kernel", filepath.Join(root, "etc", "link-up-in")))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link-abs-out")))
	must(os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(root, "link-rel-out")))
	must(os.Symlink(outside, filepath.Join(root, "dir-out")))
	must(os.Symlink("/etc", filepath.Join(root, "sysetc")))

	checkOpens(t, s, map[string]openCase{
		"plain":                         {name: "boot/kernel", want: "kernel"},
		"tftp leading slash":            {name: "/boot/kernel", want: "kernel"},
		"absolute stays in root":        {name: "/etc/passwd", want: "root's own passwd"},
		"symlink inside root":           {name: "link-in", want: "kernel"},
		"symlink up but inside":         {name: "etc/link-up-in", want: "kernel"},
		"dotdot":                        {name: "../" + filepath.Base(outside) + "/secret", wantErr: ErrOutsideRoot},
		"symlink absolute out":          {name: "link-abs-out", wantErr: ErrOutsideRoot},
		"symlink relative out":          {name: "link-rel-out", wantErr: ErrOutsideRoot},
		"through a dir symlink out":     {name: "dir-out/secret", wantErr: ErrOutsideRoot},
		"through symlink to system dir": {name: "sysetc/hostname", wantErr: ErrOutsideRoot},
		"missing":                       {name: "nope", wantErr: fs.ErrNotExist},
		"directory":                     {name: "boot", wantErr: fs.ErrNotExist},
	})
}

func TestOpenPlainWinsOverCompressed(t *testing.T) {
	s, root, data := newStore(t)
	writeFile(t, filepath.Join(root, "img"), []byte("plain"))
	writeFile(t, filepath.Join(root, "img.zst"), compress(t, ".zst", []byte("compressed")))
	got, _, err := readOpen(t, s, "img")
	if err != nil || string(got) != "plain" {
		t.Fatalf("Open(img) = %q, %v; want the plain file", got, err)
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cache folder created without an unpack: %v", err)
	}
	raw, _, err := readOpen(t, s, "img.zst")
	if err != nil || !bytes.Equal(raw, compress(t, ".zst", []byte("compressed"))) {
		t.Fatalf("Open(img.zst) should serve the archive as it is: %v", err)
	}
}
