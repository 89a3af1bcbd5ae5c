package stream

import (
	"context"
	"testing"
	"time"
)

// BenchmarkTCPLoopback is one TCP test of b.N blocks over loopback, each
// way: the client's and the server's data paths (go test -bench TCP
// -benchtime 2000x).
func BenchmarkTCPLoopback(b *testing.B) {
	for _, dir := range []Direction{Tx, Rx} {
		b.Run(dir.String(), func(b *testing.B) {
			s := startServer(b, "127.0.0.1:0")
			b.SetBytes(tcpBlock)
			b.ResetTimer()
			r, err := TCP(context.Background(), Config{Addr: s.Addr().String(), Direction: dir,
				Duration: 30 * time.Second, Bytes: int64(b.N) * tcpBlock})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if got, want := r.Receiver.Bytes, int64(b.N)*tcpBlock; got != want {
				b.Fatalf("received %d bytes, want %d", got, want)
			}
		})
	}
}

// BenchmarkUDPLoopback runs b.N UDP tests of 300 ms at 2 Gbit/s over
// loopback, each way, and reports what arrived (Mbit/s received and lost
// %): the client's and the server's pacing and receive paths.
func BenchmarkUDPLoopback(b *testing.B) {
	for _, dir := range []Direction{Tx, Rx} {
		b.Run(dir.String(), func(b *testing.B) {
			s := startServer(b, "127.0.0.1:0")
			var mbps, lost float64
			for range b.N {
				r, err := UDP(context.Background(), Config{Addr: s.Addr().String(), Direction: dir,
					Duration: 300 * time.Millisecond, Rate: 2e9, PacketSize: 1448})
				if err != nil {
					b.Fatal(err)
				}
				mbps += r.Receiver.BitsPerSecond / 1e6
				lost += r.Receiver.LostPercent
			}
			b.ReportMetric(mbps/float64(b.N), "recv-Mbit/s")
			b.ReportMetric(lost/float64(b.N), "lost-%")
		})
	}
}
