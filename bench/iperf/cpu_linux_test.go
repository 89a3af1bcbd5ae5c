//go:build linux

package iperf

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/stream"
	"golang.org/x/sys/unix"
)

const serverEnv = "PXEPERF_STREAM_SERVER"

// TestHelperStreamServer is not a test: BenchmarkClientCPU re-runs the test
// binary with PXEPERF_STREAM_SERVER=addr to get a stream server in its own
// process, so the benchmark's own rusage is the client's alone. It serves
// until stdin closes.
func TestHelperStreamServer(t *testing.T) {
	addr := os.Getenv(serverEnv)
	if addr == "" {
		t.Skip("helper process for BenchmarkClientCPU")
	}
	s, err := stream.NewServer(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Printf("ready %s\n", s.Addr())
	if err := s.Serve(ctx); err != nil {
		t.Fatal(err)
	}
}

// childServer starts a stream server process on the server side.
func childServer(b *testing.B, tb *netlab.Testbed) string {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := tb.Command(ctx, netlab.Server, os.Args[0], "-test.run=^TestHelperStreamServer$")
	cmd.Env = append(os.Environ(), serverEnv+"="+net.JoinHostPort(tb.IP(netlab.Server).String(), "0"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		b.Fatalf("stream server process: %q, %v", line, err)
	}
	return addr
}

func selfCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClientCPU measures the CPU time a client spends per GiB moved
// across the unshaped veth, pxeperf's (this process's rusage; the server
// is another process) against iperf3's (the iperf3 client's rusage), for
// each direction. One op moves 1 GiB:
//
//	go test -run '^$' -bench ClientCPU -benchtime 3x ./bench/iperf
func BenchmarkClientCPU(b *testing.B) {
	tb, addr := cpuBed(b)
	const gib = 1 << 30
	for _, dir := range []stream.Direction{stream.Tx, stream.Rx} {
		b.Run("pxeperf/"+dir.String(), func(b *testing.B) {
			var cpu, wall time.Duration
			for b.Loop() {
				c0, t0 := selfCPU(b), time.Now()
				if err := tb.Run(netlab.Client, func() error {
					_, err := stream.TCP(context.Background(), stream.Config{Addr: addr, Direction: dir, Bytes: gib})
					return err
				}); err != nil {
					b.Fatal(err)
				}
				cpu += selfCPU(b) - c0
				wall += time.Since(t0)
			}
			reportCPU(b, cpu, wall)
		})
		b.Run("iperf3/"+dir.String(), func(b *testing.B) {
			var cpu, wall time.Duration
			for b.Loop() {
				t0 := time.Now()
				r, err := RunOn(context.Background(), tb, Config{Direction: dir, Bytes: gib, Port: 5202})
				if err != nil {
					b.Fatal(err)
				}
				cpu += r.ClientCPU
				wall += time.Since(t0)
			}
			reportCPU(b, cpu, wall)
		})
	}
}

// cpuBed is the client-CPU benchmarks' testbed, closed when b ends, with
// pxeperf's stream server in another process on its server side (addr).
func cpuBed(b *testing.B) (*netlab.Testbed, string) {
	nstest.RequireTool(b, "iperf3")
	tb := nstest.NewPair(b, nstest.Options{}).Testbed
	return tb, childServer(b, tb)
}

func reportCPU(b *testing.B, cpu, wall time.Duration) {
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/GiB")
	b.ReportMetric(float64(b.N)*8*(1<<30)/wall.Seconds()/1e9, "Gbit/s")
}

// BenchmarkClientCPUUDP is BenchmarkClientCPU for UDP at 1 Gbit/s of
// 1448-byte datagrams, 2 s per op, CPU scaled to a GiB of payload:
//
//	go test -run '^$' -bench ClientCPUUDP -benchtime 3x ./bench/iperf
func BenchmarkClientCPUUDP(b *testing.B) {
	tb, addr := cpuBed(b)
	const rate, d = 1e9, 2 * time.Second
	perGiB := func(b *testing.B, cpu time.Duration, bytes int64) {
		b.ReportMetric(cpu.Seconds()*1000/(float64(bytes)/(1<<30)), "cpu-ms/GiB")
		b.ReportMetric(float64(bytes)*8/(d.Seconds()*float64(b.N))/1e6, "Mbit/s")
	}
	for _, dir := range []stream.Direction{stream.Tx, stream.Rx} {
		b.Run("pxeperf/"+dir.String(), func(b *testing.B) {
			var cpu time.Duration
			var bytes int64
			for b.Loop() {
				c0 := selfCPU(b)
				if err := tb.Run(netlab.Client, func() error {
					r, err := stream.UDP(context.Background(), stream.Config{Addr: addr, Direction: dir, Duration: d, Rate: rate})
					bytes += r.Sender.Bytes
					return err
				}); err != nil {
					b.Fatal(err)
				}
				cpu += selfCPU(b) - c0
			}
			perGiB(b, cpu, bytes)
		})
		b.Run("iperf3/"+dir.String(), func(b *testing.B) {
			var cpu time.Duration
			var bytes int64
			for b.Loop() {
				r, err := RunOn(context.Background(), tb, Config{UDP: true, Direction: dir, Duration: d, Rate: rate, Port: 5202})
				if err != nil {
					b.Fatal(err)
				}
				cpu += r.ClientCPU
				bytes += r.Sender.Bytes
			}
			perGiB(b, cpu, bytes)
		})
	}
}
