package tftp

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// gzipFile writes NAME.gz holding n bytes into root.
func gzipFile(t *testing.T, root, name string, n int) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(bytes.Repeat([]byte("pxeperf "), n/8)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, name+".gz"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCacheFullIsDiskFull: an image that exists but does not fit in the
// unpack cache is refused with RFC 1350's error 3 ("Disk full or
// allocation exceeded"), not 0, so the board knows to retry.
func TestCacheFullIsDiskFull(t *testing.T) {
	root := t.TempDir()
	gzipFile(t, root, "kernel.img", 1<<20)
	gzipFile(t, root, "initrd.img", 1<<20)
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
	s, err := New(Config{Listen: "127.0.0.1:0", MTU: 1500, Files: bootcfg.RootOnly(store), Sink: rec, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "tftp", 15*time.Second, s.Serve)

	c := newRawClient(t, s.Addr())
	c.send(s.Addr(), rq(opRRQ, "initrd.img", "octet"))
	b, _ := c.recv()
	if code := errCode(t, b); code != errDiskFull {
		t.Errorf("error code %d (%q), want %d", code, b[4:], errDiskFull)
	}
}
