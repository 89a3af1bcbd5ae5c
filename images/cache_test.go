package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// testData is size bytes that compress somewhat, like a real image:
// generated noise with runs of text.
func testData(t testing.TB, size int, seed uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := Generate(&b, "testdata", int64(size), seed); err != nil {
		t.Fatal(err)
	}
	p := b.Bytes()
	text := []byte("pxeperf test image: kernel, initrd and a root filesystem. ")
	for off := 0; off < len(p); off += 8192 {
		for i := off; i < min(off+4096, len(p)); i++ {
			p[i] = text[i%len(text)]
		}
	}
	return p
}

func compress(t testing.TB, ext string, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	switch ext {
	case ".zst":
		w, err := zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case ".gz":
		w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		w.Write(p)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no codec %s", ext)
	}
	return b.Bytes()
}

func TestOpenCompressed(t *testing.T) {
	for _, ext := range []string{".zst", ".gz"} {
		t.Run(ext, func(t *testing.T) {
			s, root, data := newStore(t)
			want := testData(t, 3<<20+123, 1)
			writeFile(t, filepath.Join(root, "boot", "initrd"+ext), compress(t, ext, want))
			for i := range 3 {
				got, size, err := readOpen(t, s, "/boot/initrd")
				if err != nil {
					t.Fatalf("open %d: %v", i, err)
				}
				if size != int64(len(want)) || !bytes.Equal(got, want) {
					t.Fatalf("open %d: served %d bytes (announced %d), want the %d decompressed bytes", i, len(got), size, len(want))
				}
			}
			if n := s.unpacks.Load(); n != 1 {
				t.Errorf("unpacked %d times for 3 opens, want 1", n)
			}
			// A new Store on the same folders (a restart) reuses the cache.
			s2 := openStore(t, root, data, nil, WithFallbackDir(""))
			if got, _, err := readOpen(t, s2, "boot/initrd"); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("after restart: %v", err)
			}
			if n := s2.unpacks.Load(); n != 0 {
				t.Errorf("restarted store unpacked %d times, want 0 (cache on disk)", n)
			}
			assertCacheFlat(t, data)
		})
	}
}

// assertCacheFlat checks the cache holds only KEY.img / KEY.json files: no
// temp files left, no folders, nothing named after the request.
func assertCacheFlat(t *testing.T, data string) {
	t.Helper()
	ents, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^[0-9a-f]{40}\.(img|json)$`)
	for _, e := range ents {
		if !re.MatchString(e.Name()) || !e.Type().IsRegular() {
			t.Errorf("unexpected cache entry %q (%v)", e.Name(), e.Type())
		}
	}
}

func TestCacheRemovesLeftoverTemps(t *testing.T) {
	s, root, data := newStore(t)
	leftover := filepath.Join(data, s.cacheKey("img")+".img.tmp123")
	writeFile(t, leftover, []byte("half an image"))
	writeFile(t, filepath.Join(root, "img.gz"), compress(t, ".gz", []byte("whole")))
	if got, _, err := readOpen(t, s, "img"); err != nil || string(got) != "whole" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftover temp file still there: %v", err)
	}
	assertCacheFlat(t, data)
}

func TestPrepare(t *testing.T) {
	s, root, data := newStore(t)
	writeFile(t, filepath.Join(root, "a.zst"), compress(t, ".zst", []byte("aaa")))
	writeFile(t, filepath.Join(root, "sub", "b.gz"), compress(t, ".gz", []byte("bbb")))
	writeFile(t, filepath.Join(root, "sub", "b.zst"), compress(t, ".zst", []byte("bbb")))
	writeFile(t, filepath.Join(root, "c.gz"), []byte("corrupt"))
	writeFile(t, filepath.Join(root, "d"), []byte("plain"))
	writeFile(t, filepath.Join(root, "d.zst"), compress(t, ".zst", []byte("shadowed")))
	if n := s.Prepare(t.Context()); n != 2 {
		t.Errorf("Prepare readied %d images, want 2 (a, sub/b)", n)
	}
	if n := s.unpacks.Load(); n != 2 {
		t.Errorf("Prepare unpacked %d times, want 2", n)
	}
	if got, _, err := readOpen(t, s, "sub/b"); err != nil || string(got) != "bbb" || s.unpacks.Load() != 2 {
		t.Fatalf("Open after Prepare = %q, %v, unpacks %d", got, err, s.unpacks.Load())
	}
	assertCacheFlat(t, data)
}

func TestCacheRefresh(t *testing.T) {
	s, root, data := newStore(t)
	src := filepath.Join(root, "img.zst")
	v1, v2 := testData(t, 1<<20, 1), testData(t, 1<<20, 2)
	writeFile(t, src, compress(t, ".zst", v1))
	if got, _, err := readOpen(t, s, "img"); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("first open: %v", err)
	}

	// Touched only: same bytes, new mtime. Hashing the source shows it is
	// unchanged, so no unpack.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(src, later, later); err != nil {
		t.Fatal(err)
	}
	if got, _, err := readOpen(t, s, "img"); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("after touch: %v", err)
	}
	if n := s.unpacks.Load(); n != 1 {
		t.Fatalf("touching the source caused an unpack (%d unpacks)", n)
	}

	// Replaced with new content of the same compressed size class.
	writeFile(t, src, compress(t, ".zst", v2))
	evenLater := later.Add(time.Hour)
	if err := os.Chtimes(src, evenLater, evenLater); err != nil {
		t.Fatal(err)
	}
	got, size, err := readOpen(t, s, "img")
	if err != nil || !bytes.Equal(got, v2) || size != int64(len(v2)) {
		t.Fatalf("after replace: served stale or wrong data (err %v)", err)
	}
	if n := s.unpacks.Load(); n != 2 {
		t.Errorf("unpacks = %d after a replace, want 2", n)
	}

	// Switched format: .zst removed, .gz appears.
	os.Remove(src)
	v3 := testData(t, 1<<19, 3)
	writeFile(t, filepath.Join(root, "img.gz"), compress(t, ".gz", v3))
	if got, _, err := readOpen(t, s, "img"); err != nil || !bytes.Equal(got, v3) {
		t.Fatalf("after switching to .gz: %v", err)
	}

	// The cached image was deleted behind our back: unpack again.
	os.Remove(filepath.Join(data, s.cacheKey("img")+".img"))
	if got, _, err := readOpen(t, s, "img"); err != nil || !bytes.Equal(got, v3) {
		t.Fatalf("after cache removal: %v", err)
	}
	if n := s.unpacks.Load(); n != 4 {
		t.Errorf("unpacks = %d, want 4", n)
	}
	m, ok := s.loadMeta(s.cache, s.cacheKey("img"))
	sum := sha256.Sum256(compress(t, ".gz", v3))
	if !ok || m.SourceSHA256 != hex.EncodeToString(sum[:]) || m.Source != "img.gz" || m.Size != int64(len(v3)) {
		t.Errorf("cache metadata = %+v, want source img.gz with its sha256, size %d", m, len(v3))
	}
	assertCacheFlat(t, data)
}

func TestCorruptArchive(t *testing.T) {
	good := testData(t, 1<<20, 1)
	zst, gz := compress(t, ".zst", good), compress(t, ".gz", good)
	flip := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		return c
	}
	tests := map[string]struct {
		ext  string
		data []byte
	}{
		"zst garbage":   {".zst", []byte("this is not zstd at all, just text")},
		"zst truncated": {".zst", zst[:len(zst)/2]},
		"zst flipped":   {".zst", flip(zst, len(zst)/2)},
		"gz garbage":    {".gz", []byte("\x1f\x8bnot really gzip")},
		"gz truncated":  {".gz", gz[:len(gz)/2]},
		"gz bad crc":    {".gz", flip(gz, len(gz)-6)},
		"gz empty":      {".gz", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, root, data := newStore(t)
			writeFile(t, filepath.Join(root, "img"+tc.ext), tc.data)
			for i := range 2 { // never cached as a success; the failure is remembered
				_, _, err := readOpen(t, s, "img")
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("open %d: err = %v, want ErrCorrupt", i, err)
				}
			}
			if n := s.unpacks.Load(); n != 0 {
				t.Errorf("a corrupt archive counted as %d unpacks", n)
			}
			ents, _ := os.ReadDir(data)
			for _, e := range ents {
				t.Errorf("cache holds %s after a failed unpack", e.Name())
			}
			// Fixing the file fixes the name.
			writeFile(t, filepath.Join(root, "img"+tc.ext), compress(t, tc.ext, good))
			if got, _, err := readOpen(t, s, "img"); err != nil || !bytes.Equal(got, good) {
				t.Fatalf("after fixing: %v", err)
			}
		})
	}
}

func TestConcurrentOpensUnpackOnce(t *testing.T) {
	s, root, _ := newStore(t)
	want := testData(t, 8<<20, 5)
	writeFile(t, filepath.Join(root, "big.zst"), compress(t, ".zst", want))
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			f, size, err := s.Open("big")
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			if size != int64(len(want)) {
				errs <- errors.New("wrong size")
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := s.unpacks.Load(); got != 1 {
		t.Errorf("%d concurrent opens unpacked %d times, want 1", n, got)
	}
	if got, _, err := readOpen(t, s, "big"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after concurrent opens: %v", err)
	}
}

func TestUnpackLimit(t *testing.T) {
	s, root, data := newStore(t, WithMaxUnpacked(64<<10))
	writeFile(t, filepath.Join(root, "bomb.zst"), compress(t, ".zst", make([]byte, 1<<20)))
	writeFile(t, filepath.Join(root, "ok.gz"), compress(t, ".gz", make([]byte, 64<<10)))
	if _, _, err := s.Open("bomb"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Open(bomb) = %v, want ErrTooLarge", err)
	}
	if _, size, err := s.Open("ok"); err != nil || size != 64<<10 {
		t.Fatalf("Open(ok) at exactly the limit = %d, %v", size, err)
	}
	if _, err := os.Stat(filepath.Join(data, s.cacheKey("bomb")+".img")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("oversized output was cached: %v", err)
	}
	assertCacheFlat(t, data)
}

func TestCompressedNeedsCacheFolder(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "img.zst"), compress(t, ".zst", []byte("x")))
	s := openStore(t, root, "", nil, WithFallbackDir(""))
	if _, _, err := s.Open("img"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open without a cache folder = %v, want a not-exist error naming --data", err)
	}
}

func TestCacheKeysStayInside(t *testing.T) {
	s, root, data := newStore(t)
	names := []string{"a/b/c", "deep/../x", "..x", "weird name; rm -rf", "ünïcode"}
	for _, n := range names {
		c, err := Clean(n)
		if err != nil {
			continue
		}
		writeFile(t, filepath.Join(root, filepath.FromSlash(c)+".zst"), compress(t, ".zst", []byte(n)))
		if got, _, err := readOpen(t, s, n); err != nil || string(got) != n {
			t.Fatalf("Open(%q) = %q, %v", n, got, err)
		}
	}
	assertCacheFlat(t, data)
}

func TestCacheSharedByTwoRoots(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cache")
	when := time.Now().Add(-time.Hour)
	var stores []*Store
	for _, content := range []string{"root one", "root two"} {
		root := t.TempDir()
		p := filepath.Join(root, "img.zst")
		writeFile(t, p, compress(t, ".zst", []byte(content)))
		if err := os.Chtimes(p, when, when); err != nil { // same size, same mtime
			t.Fatal(err)
		}
		s := openStore(t, root, data, nil, WithFallbackDir(""))
		stores = append(stores, s)
	}
	for range 2 {
		for i, want := range []string{"root one", "root two"} {
			if got, _, err := readOpen(t, stores[i], "img"); err != nil || string(got) != want {
				t.Fatalf("store %d served %q, %v; want %q", i, got, err, want)
			}
		}
	}
	if a, b := stores[0].unpacks.Load(), stores[1].unpacks.Load(); a != 1 || b != 1 {
		t.Errorf("unpacks %d and %d, want one each (separate entries, no thrash)", a, b)
	}
}

// TestCorruptRemembered: a corrupt or oversized archive is unpacked once,
// not on every request (each try wrote up to the whole image to the cache
// folder), until the source changes.
func TestCorruptRemembered(t *testing.T) {
	good := testData(t, 4<<20, 7)
	zst := compress(t, ".zst", good)
	bad := bytes.Clone(zst)
	bad[len(bad)*3/4] ^= 0x40 // most of the image unpacks before the error
	small := good[:512<<10]
	tests := map[string]struct {
		opts         []Option
		data         []byte
		wantErr      error
		fixed, fixer []byte // the fixed source and what it unpacks to
	}{
		// Fixed in place with the same size: the contents are compared.
		"corrupt":   {data: bad, wantErr: ErrCorrupt, fixed: zst, fixer: good},
		"too large": {opts: []Option{WithMaxUnpacked(1 << 20)}, data: zst, wantErr: ErrTooLarge, fixed: compress(t, ".zst", small), fixer: small},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, root, _ := newStore(t, tc.opts...)
			src := filepath.Join(root, "img.zst")
			writeFile(t, src, tc.data)
			old := time.Now().Add(-time.Hour) // not racily recent
			if err := os.Chtimes(src, old, old); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if _, _, err := s.OpenFor("img", "192.0.2.9"); !errors.Is(err, tc.wantErr) {
					t.Fatalf("open %d: err = %v, want %v", i, err, tc.wantErr)
				}
			}
			if n := s.attempts.Load(); n != 1 {
				t.Errorf("5 requests tried %d unpacks, want 1 (the failure remembered)", n)
			}
			if got := s.Refusals(); got[refusalReason(tc.wantErr)] != 5 {
				t.Errorf("refusals = %v, want 5 of %q", got, refusalReason(tc.wantErr))
			}

			// Touched, same bytes: still the same broken file, no unpack.
			later := old.Add(time.Minute)
			if err := os.Chtimes(src, later, later); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Open("img"); !errors.Is(err, tc.wantErr) || s.attempts.Load() != 1 {
				t.Fatalf("after touch: %v, %d attempts; want %v from memory", err, s.attempts.Load(), tc.wantErr)
			}

			writeFile(t, src, tc.fixed)
			if got, _, err := readOpen(t, s, "img"); err != nil || !bytes.Equal(got, tc.fixer) {
				t.Fatalf("after fixing: %v", err)
			}
			if n := s.attempts.Load(); n != 2 {
				t.Errorf("attempts = %d after the fix, want 2", n)
			}
		})
	}
}

// TestCorruptRememberedRacy: a source rewritten with the same size right
// after its failure was recorded may keep its mtime (coarse file system
// clocks), so a recent failure is checked against the contents.
func TestCorruptRememberedRacy(t *testing.T) {
	good := testData(t, 1<<20, 8)
	zst := compress(t, ".zst", good)
	bad := bytes.Clone(zst)
	bad[len(bad)/2] ^= 0x40
	s, root, _ := newStore(t)
	src := filepath.Join(root, "img.zst")
	writeFile(t, src, bad)
	st, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open("img"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
	writeFile(t, src, zst)
	if err := os.Chtimes(src, st.ModTime(), st.ModTime()); err != nil { // the same tick
		t.Fatal(err)
	}
	if got, _, err := readOpen(t, s, "img"); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("after a same-size rewrite in the same tick: %v", err)
	}
}
