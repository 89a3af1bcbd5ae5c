package httpboot

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/measure"
)

// loopbackSink is a TCP connection on loopback whose peer reads and
// drops what it gets, closed at the test's end.
func loopbackSink(tb testing.TB) net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkMonitorTick is one monitor's sample of a live connection every
// 100 ms of fake time (a TCP_INFO reading, the window kept, an interval
// closed every 10th): the sampler's cost per fetch and tick.
func BenchmarkMonitorTick(b *testing.B) {
	c := loopbackSink(b)
	now := time.Now()
	m := &monitor{period: time.Second, wndStride: 1, w: &countingWriter{}, probe: measure.NewProbe(c), start: now}
	for b.Loop() {
		now = now.Add(100 * time.Millisecond)
		m.tick(now)
	}
}

// TestTickAllocates0: a monitor's sample (a TCP_INFO reading through
// measure.Probe, the window kept) allocates nothing.
func TestTickAllocates0(t *testing.T) {
	c := loopbackSink(t)
	p := measure.NewProbe(c)
	if _, ok := p.Read(); !ok {
		t.Skip("no TCP_INFO on this system")
	}
	now := time.Now()
	m := &monitor{period: time.Hour, wndStride: 1, w: &countingWriter{}, probe: p, start: now}
	m.tick(now) // the base, and the window slice
	if n := testing.AllocsPerRun(100, func() { now = now.Add(time.Millisecond); m.tick(now) }); n != 0 {
		t.Errorf("a tick allocates %.1f times", n)
	}
}
