package images

import (
	"os"
	"path/filepath"
	"testing"
)

// benchZst writes a 256 MiB compressible image as root/big.zst once per
// benchmark.
func benchZst(b *testing.B) (root string) {
	b.Helper()
	root = b.TempDir()
	data := testData(b, 256<<20, 1)
	writeFile(b, filepath.Join(root, "big.zst"), compress(b, ".zst", data))
	return root
}

// BenchmarkOpenUnpack is the first Open of a 256 MiB .zst: decompress into
// the cache, hashing source and output.
func BenchmarkOpenUnpack(b *testing.B) {
	root := benchZst(b)
	b.SetBytes(256 << 20)
	for b.Loop() {
		b.StopTimer()
		data := filepath.Join(b.TempDir(), "cache")
		s, err := Open(root, data, nil, WithFallbackDir(""))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		f, _, err := s.Open("big")
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
		b.StopTimer()
		s.Close()
		os.RemoveAll(data)
		b.StartTimer()
	}
}

// BenchmarkOpenCached is every later Open of the same name: stat the
// source, stat the cache, open.
func BenchmarkOpenCached(b *testing.B) {
	root := benchZst(b)
	s := openStore(b, root, filepath.Join(b.TempDir(), "cache"), nil, WithFallbackDir(""))
	f, _, err := s.Open("big")
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	for b.Loop() {
		f, _, err := s.Open("big")
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	if n := s.unpacks.Load(); n != 1 {
		b.Fatalf("cached opens unpacked %d times", n)
	}
}

// BenchmarkOpenPlain is the baseline: an uncompressed file in the root.
func BenchmarkOpenPlain(b *testing.B) {
	s, root, _ := newStoreB(b)
	writeFile(b, filepath.Join(root, "kernel"), []byte("k"))
	for b.Loop() {
		f, _, err := s.Open("kernel")
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func newStoreB(b *testing.B) (*Store, string, string) {
	root, data := b.TempDir(), b.TempDir()
	s := openStore(b, root, data, nil, WithFallbackDir(""))
	return s, root, data
}
