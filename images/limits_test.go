package images

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// cached reports whether name has an unpacked image in the cache.
func cached(t *testing.T, s *Store, data, name string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(data, s.cacheKey(name)+".img"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestCacheCap: the unpacked images together stay under the cap; the least
// recently used entries no client has open are evicted to make room, and
// when every entry is in use the unpack is refused (ErrCacheFull).
func TestCacheCap(t *testing.T) {
	const mb = 1 << 20
	s, root, data := newStore(t, WithCacheLimits(3*mb+mb/2, 0))
	for _, n := range []string{"a", "b", "c", "d"} {
		writeFile(t, filepath.Join(root, n+".zst"), compress(t, ".zst", testData(t, mb, uint64(n[0]))))
	}
	open := func(n string) {
		t.Helper()
		if _, _, err := readOpen(t, s, n); err != nil {
			t.Fatalf("Open(%s): %v", n, err)
		}
	}
	want := func(names map[string]bool) {
		t.Helper()
		for n, w := range names {
			if got := cached(t, s, data, n); got != w {
				t.Errorf("%s cached = %v, want %v", n, got, w)
			}
		}
	}
	open("a")
	open("b")
	open("c")
	open("a") // a is now more recent than b
	open("d") // 4 MiB > 3.5 MiB: b, the least recently used, goes
	want(map[string]bool{"a": true, "b": false, "c": true, "d": true})

	// c is the least recently used but a client has it open: a goes.
	f, _, err := s.Open("c")
	if err != nil {
		t.Fatal(err)
	}
	open("d")
	open("b")
	want(map[string]bool{"a": false, "b": true, "c": true, "d": true})
	// Served from the open file while and after it is evicted: whole.
	f.Close()

	// Everything in use: refused, nothing evicted, counted.
	var held []*os.File
	for _, n := range []string{"b", "c", "d"} {
		f, _, err := s.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	if _, _, err := s.OpenFor("a", "192.0.2.7"); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("Open(a) with every entry in use = %v, want ErrCacheFull", err)
	}
	want(map[string]bool{"a": false, "b": true, "c": true, "d": true})
	if got := s.Refusals()[ReasonCacheFull]; got != 1 {
		t.Errorf("cache-full refusals = %d, want 1", got)
	}
	for _, f := range held {
		f.Close()
	}
	// A cache full is not remembered: once entries are free, a works.
	open("a")
	assertCacheFlat(t, data)
	if total := cacheBytes(t, data); total > 3*mb+mb/2 {
		t.Errorf("cache holds %d bytes, over the %d cap", total, 3*mb+mb/2)
	}
}

func cacheBytes(t *testing.T, data string) int64 {
	t.Helper()
	var total int64
	ents, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() { // images, temp files and notes
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			total += fi.Size()
		}
	}
	return total
}

// TestCacheMinFree: no unpack starts when the data filesystem has less
// than the minimum free, and one stops when the space runs out under it;
// least recently used entries not in use are evicted first to make room.
func TestCacheMinFree(t *testing.T) {
	const mb = 1 << 20
	s, root, data := newStore(t, WithCacheLimits(1<<40, 64*mb))
	var free atomic.Int64 // what statfs says, minus what the cache writes
	s.freeSpace = func(dir string) (int64, error) { return free.Load() - cacheBytes(t, data), nil }
	for _, n := range []string{"a", "b"} {
		writeFile(t, filepath.Join(root, n+".zst"), compress(t, ".zst", testData(t, 40*mb, uint64(n[0]))))
	}

	free.Store(32 * mb) // below the minimum already
	if _, _, err := s.OpenFor("a", "192.0.2.8"); !errors.Is(err, ErrLowSpace) {
		t.Fatalf("Open with 32 MiB free = %v, want ErrLowSpace", err)
	}
	if cached(t, s, data, "a") {
		t.Error("unpacked below the minimum free space")
	}

	free.Store(120 * mb) // room for one 40 MiB image above 64 MiB
	if _, _, err := readOpen(t, s, "a"); err != nil {
		t.Fatalf("Open(a) with room: %v", err)
	}
	// b would leave 40 MiB: a (not in use) is evicted to make room.
	if _, _, err := readOpen(t, s, "b"); err != nil {
		t.Fatalf("Open(b): %v", err)
	}
	if cached(t, s, data, "a") || !cached(t, s, data, "b") {
		t.Errorf("after b: a cached %v, b cached %v; want a evicted for b", cached(t, s, data, "a"), cached(t, s, data, "b"))
	}
	// b in use, a needs room: refused mid-unpack, no temp file left.
	f, _, err := s.Open("b")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := s.OpenFor("a", "192.0.2.8"); !errors.Is(err, ErrLowSpace) {
		t.Fatalf("Open(a) with b in use = %v, want ErrLowSpace", err)
	}
	if got := s.Refusals()[ReasonLowSpace]; got != 2 {
		t.Errorf("low-space refusals = %d, want 2", got)
	}
	assertCacheFlat(t, data)
}

// TestNoRoomRemembered: an image that did not fit, with nothing else in
// the cache to evict, is refused at once (no unpack) until the room grows
// by a chunk or the source changes; an image 16 GiB of zeros used to be
// unpacked up to the free space on every request.
func TestNoRoomRemembered(t *testing.T) {
	const mb = 1 << 20
	s, root, data := newStore(t, WithCacheLimits(1<<40, 64*mb))
	var free atomic.Int64
	s.freeSpace = func(dir string) (int64, error) { return free.Load() - cacheBytes(t, data), nil }
	src := filepath.Join(root, "big.zst")
	writeFile(t, src, compress(t, ".zst", make([]byte, 40*mb)))

	free.Store(100 * mb) // 36 MiB of room: not enough
	for i := range 5 {
		if _, _, err := s.OpenFor("big", "192.0.2.9"); !errors.Is(err, ErrLowSpace) {
			t.Fatalf("Open %d with 100 MiB free = %v, want ErrLowSpace", i, err)
		}
	}
	if n := s.attempts.Load(); n != 1 {
		t.Errorf("%d unpacks for 5 requests with no more room, want 1", n)
	}
	if got := s.Refusals()[ReasonLowSpace]; got != 5 {
		t.Errorf("low-space refusals = %d, want 5 (remembered ones count too)", got)
	}
	free.Store(110 * mb) // grown less than a chunk: still refused at once
	if _, _, err := s.Open("big"); !errors.Is(err, ErrLowSpace) || s.attempts.Load() != 1 {
		t.Fatalf("Open with 10 MiB more room = %v after %d unpacks; want ErrLowSpace from memory", err, s.attempts.Load())
	}
	// The source changes: tried again (and fails again).
	now := time.Now().Add(-time.Minute)
	if err := os.Chtimes(src, now, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open("big"); !errors.Is(err, ErrLowSpace) || s.attempts.Load() != 2 {
		t.Fatalf("Open after the source changed = %v after %d unpacks; want a second unpack", err, s.attempts.Load())
	}
	free.Store(200 * mb) // room now: unpacked
	if _, _, err := readOpen(t, s, "big"); err != nil || s.attempts.Load() != 3 {
		t.Fatalf("Open with room = %v after %d unpacks; want served by a third", err, s.attempts.Load())
	}
	assertCacheFlat(t, data)
}

// TestDeclaredSizeRefused: a zstd image whose frame declares its size (as
// zstd writes it for a file) is refused before any unpack when that is past
// images.max_unpacked_bytes or the room there is; one that fits is served.
func TestDeclaredSizeRefused(t *testing.T) {
	const mb = 1 << 20
	s, root, data := newStore(t, WithCacheLimits(1<<40, 64*mb), WithMaxUnpacked(32*mb))
	var free atomic.Int64
	s.freeSpace = func(dir string) (int64, error) { return free.Load() - cacheBytes(t, data), nil }
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"huge": 40 * mb, "big": 24 * mb, "small": mb} {
		writeFile(t, filepath.Join(root, name+".zst"), enc.EncodeAll(make([]byte, n), nil))
	}
	free.Store(80 * mb) // 16 MiB of room
	if _, _, err := s.Open("huge"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Open(huge: 40 MiB declared, 32 MiB limit) = %v, want ErrTooLarge", err)
	}
	if _, _, err := s.Open("big"); !errors.Is(err, ErrLowSpace) || !strings.Contains(err.Error(), "declares") {
		t.Errorf("Open(big: 24 MiB declared, 16 MiB of room) = %v, want ErrLowSpace naming the declared size", err)
	}
	if n := s.attempts.Load(); n != 0 {
		t.Errorf("%d unpacks for images that declare they cannot fit, want 0", n)
	}
	if _, size, err := readOpen(t, s, "small"); err != nil || size != mb {
		t.Errorf("Open(small) = %d, %v", size, err)
	}
}
