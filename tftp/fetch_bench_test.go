package tftp

import (
	"io"
	"testing"
	"time"
)

// BenchmarkWindowedFetch fetches an 8 MiB file over loopback with the
// package's client (blksize 1468, windowsize 64), from a server with a port
// per transfer and from one in single-port mode (which proves the client
// reads before it opens whole windows):
//
//	go test -run '^$' -bench WindowedFetch -count 5 ./tftp/
func BenchmarkWindowedFetch(b *testing.B) {
	for _, mode := range []struct {
		name   string
		single bool
	}{{"ports", false}, {"single-port", true}} {
		b.Run(mode.name, func(b *testing.B) {
			ts := startServer(b, Config{SinglePort: mode.single})
			want := ts.file(b, "img", 8<<20)
			b.SetBytes(int64(len(want)))
			b.ResetTimer()
			for range b.N {
				conn := loopbackConn(b)
				st, err := Get(b.Context(), conn, ts.Addr(), "img", io.Discard,
					ClientOptions{BlkSize: 1468, WindowSize: 64, Timeout: 200 * time.Millisecond})
				conn.Close()
				if err != nil || st.Bytes != int64(len(want)) {
					b.Fatalf("fetch: %v (%d bytes)", err, st.Bytes)
				}
			}
		})
	}
}
