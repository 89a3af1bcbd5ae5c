package httpboot

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// TestCacheFullIs503: an image that exists but does not fit in the unpack
// cache gets 503 with Retry-After, not a 500 and a warning per request.
func TestCacheFullIs503(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"kernel.img", "initrd.img"} {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(bytes.Repeat([]byte("pxeperf "), 1<<17)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name+".gz"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := images.Open(root, t.TempDir(), nil, images.WithCacheLimits(1<<20+1<<19, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// kernel.img fills most of the cache and a client has it open: nothing
	// can be evicted for initrd.img.
	held, _, err := store.Open("kernel.img")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	rec := &event.Recorder{}
	s, err := New(Options{HTTP: defaultHTTP(), Images: store, Sink: rec})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "http", 15*time.Second, s.Serve)

	resp, err := rawClient().Get("http://" + s.Addr().String() + "/initrd.img")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	fs, _ := rec.WaitFetches(1, 5*time.Second)
	if len(fs) != 1 || fs[0].Outcome != event.OutcomeError {
		t.Errorf("fetch events %+v, want one with outcome error", fs)
	}
}
