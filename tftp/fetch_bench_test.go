package tftp

import (
	"testing"
	"time"
)

// BenchmarkWindowedFetch fetches an 8 MiB file over loopback with the test
// RFC 7440 client (blksize 1468, windowsize 64), from a server with a port
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
				c := &winClient{conn: loopbackConn(b), timeout: 200 * time.Millisecond}
				got, _, err := c.get(ts.Addr(), "img", 1468, 64)
				c.conn.Close()
				if err != nil || len(got) != len(want) {
					b.Fatalf("fetch: %v (%d bytes)", err, len(got))
				}
			}
		})
	}
}
