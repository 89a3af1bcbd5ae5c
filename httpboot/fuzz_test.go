package httpboot

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRequestPath feeds arbitrary request targets to the handler: it must
// never panic and never serve bytes from outside the root.
func FuzzRequestPath(f *testing.F) {
	for _, s := range []string{"/a.efi", "/../secret", "/%2e%2e/secret", "/sub/../../secret", "/link",
		"/boot.ipxe?mac=52:54:00:00:00:01", "/boot.ipxe?mac=%zz", "//a.efi", "/a.efi\x00", "/\\..\\secret", "/healthz"} {
		f.Add(s)
	}
	root, outside := f.TempDir(), f.TempDir()
	secret := []byte("pxeperf-fuzz-secret")
	if err := os.WriteFile(filepath.Join(outside, "secret"), secret, 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")); err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.efi"), []byte("efi"), 0o644); err != nil {
		f.Fatal(err)
	}
	e := newTestEnv(f, envOpts{})
	store, err := imagesOpen(root, f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	e.srv.opt.Images = store
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		r := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, RemoteAddr: "192.0.2.7:1234",
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "pxeperf"}
		r = r.WithContext(t.Context())
		w := httptest.NewRecorder()
		e.srv.ServeHTTP(w, r)
		if bytes.Contains(w.Body.Bytes(), secret) {
			t.Fatalf("%q served the file outside the root", target)
		}
	})
}
