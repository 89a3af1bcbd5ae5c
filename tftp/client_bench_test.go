package tftp_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/pxeperf/pxeperf/tftp"
)

// BenchmarkGet fetches a 16 MiB image from pxeperf's server on loopback:
// the client's and server's CPU cost per byte together (MB/s), by blksize
// and windowsize.
//
//	go test -run '^$' -bench BenchmarkGet ./tftp
func BenchmarkGet(b *testing.B) {
	srv := startServer(b, tftp.Config{})
	const size = 16 << 20
	srv.file(b, "bench.img", size)
	for _, c := range []struct{ blk, win int }{{512, 1}, {512, 16}, {1468, 1}, {1468, 16}, {1468, 64}} {
		b.Run(fmt.Sprintf("blksize=%d/windowsize=%d", c.blk, c.win), func(b *testing.B) {
			conn := udp(b)
			b.SetBytes(size)
			for b.Loop() {
				st, err := tftp.Get(b.Context(), conn, srv.addr, "bench.img", io.Discard, tftp.ClientOptions{BlkSize: c.blk, WindowSize: c.win})
				if err != nil || st.Bytes != size {
					b.Fatalf("%v (%d bytes)", err, st.Bytes)
				}
			}
		})
	}
}
