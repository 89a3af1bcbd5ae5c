package hosts

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkStorePut: one run-time write among 40 entries (parse, validate,
// merge, write the file with its fsyncs, publish the view with every etag).
func BenchmarkStorePut(b *testing.B) {
	cfg := yamlConfig(b, labYAML)
	s, err := Open(Options{Path: filepath.Join(b.TempDir(), FileName), Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	macs := make([][]byte, 40)
	for i := range macs {
		macs[i] = mustMAC(fmt.Sprintf("52:54:00:00:01:%02x", i))
		if _, _, err := s.Put(macs[i], []byte(`{"kernel":"k"}`), Cond{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := s.Put(macs[i%40], []byte(fmt.Sprintf(`{"kernel":"k%d"}`, i)), Cond{}); err != nil {
			b.Fatal(err)
		}
	}
}
