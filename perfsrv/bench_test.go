package perfsrv

import (
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// BenchmarkIperf2ReverseTCP is one iperf 2 -R test of b.N blocks of 128
// KiB over loopback from a hand-made client (its header, then reading to
// the end): the server's sending leg (go test -bench Iperf2 -benchtime
// 2000x).
func BenchmarkIperf2ReverseTCP(b *testing.B) {
	const block = 128 << 10
	n := int64(b.N) * block
	if n > math.MaxInt32 {
		b.Skip("over -n's 2 GiB: use -benchtime with fewer blocks")
	}
	s, err := NewIperf2(Config{Addr: "127.0.0.1:0", Limits: Limits{MaxDuration: time.Minute}})
	if err != nil {
		b.Fatal(err)
	}
	servetest.Run(b, "perfsrv", 15*time.Second, s.Serve)
	b.SetBytes(block)
	b.ResetTimer()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(buildIperf2Header(iperf2HeaderVersion2, 0, int32(n), iperf2UpperReverse)); err != nil {
		b.Fatal(err)
	}
	got, err := io.Copy(io.Discard, c)
	b.StopTimer()
	if err != nil || got != n {
		b.Fatalf("read %d bytes (%v), want %d", got, err, n)
	}
}
