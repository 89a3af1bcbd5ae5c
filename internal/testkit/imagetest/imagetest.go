// Package imagetest builds image stores in the states tests of the
// serving protocols need (httpboot, tftp).
package imagetest

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/pxeperf/pxeperf/images"
)

// FullCache is a store whose unpack cache is full: its root holds
// kernel.img.gz and initrd.img.gz (1 MiB each unpacked), the cache takes
// 1.5 MiB, and kernel.img is unpacked and held open until the test ends,
// so nothing can be evicted for initrd.img (images.ErrCacheFull).
func FullCache(tb testing.TB) *images.Store {
	tb.Helper()
	root := tb.TempDir()
	for _, name := range []string{"kernel.img", "initrd.img"} {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(bytes.Repeat([]byte("pxeperf "), 1<<17)); err != nil {
			tb.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name+".gz"), b.Bytes(), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	store, err := images.Open(root, tb.TempDir(), nil, images.WithCacheLimits(1<<20+1<<19, 0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	held, _, err := store.Open("kernel.img")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { held.Close() })
	return store
}
