package measure

import (
	"io"
	"net"
	"testing"
	"time"
)

// loopbackPair is a connected TCP pair on loopback; the server side's
// reads go to sink.
func loopbackPair(t testing.TB) (client net.Conn, read func(n int64)) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	srv := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(srv)
			return
		}
		srv <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, ok := <-srv
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { s.Close() })
	return c, func(n int64) {
		if _, err := io.CopyN(io.Discard, s, n); err != nil {
			t.Errorf("reading %d B: %v", n, err)
		}
	}
}

// TestProbeBytesAcked: after the peer read 3 MiB, tcpi_bytes_acked counts
// them (plus the SYN's one), Outq drains to 0, and ReadTCPInfo agrees.
func TestProbeBytesAcked(t *testing.T) {
	c, read := loopbackPair(t)
	p := NewProbe(c)
	i0, ok := p.Read()
	if !ok {
		t.Fatal("no TCP_INFO from a loopback socket")
	}
	const n = 3 << 20
	go func() { _, _ = c.Write(make([]byte, n)) }()
	read(n)
	var i TCPInfo
	for range 1000 { // the last ACK may be a moment behind the read
		if i, _ = p.Read(); i.BytesAcked-i0.BytesAcked == n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if got := i.BytesAcked - i0.BytesAcked; got != n {
		t.Errorf("bytes acked %d, want %d", got, n)
	}
	if i.MSS == 0 || i.SndCwnd == 0 || i.Cwnd() != i.SndCwnd*i.MSS || i.RTT <= 0 {
		t.Errorf("TCP_INFO without a window or RTT: %+v", i)
	}
	if q := p.Outq(); q != 0 {
		t.Errorf("outq %d after everything was acknowledged", q)
	}
	j, err := ReadTCPInfo(c)
	if err != nil || j.BytesAcked != i.BytesAcked {
		t.Errorf("ReadTCPInfo: %d acked, %v; the probe read %d", j.BytesAcked, err, i.BytesAcked)
	}
	if s := i.Sample(time.Second); s.Bytes != int64(i.BytesAcked) || s.Cwnd != int64(i.Cwnd()) || s.At != time.Second {
		t.Errorf("Sample %+v of %+v", s, i)
	}
	c.Close()
	if _, ok := p.Read(); ok {
		t.Errorf("read TCP_INFO of a closed connection")
	}
	if q := p.Outq(); q != -1 {
		t.Errorf("outq %d of a closed connection", q)
	}
}

// TestProbeAllocates0: a periodic reading allocates nothing.
func TestProbeAllocates0(t *testing.T) {
	c, _ := loopbackPair(t)
	p := NewProbe(c)
	if _, ok := p.Read(); !ok {
		t.Fatal("no TCP_INFO from a loopback socket")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = p.Read() }); n != 0 {
		t.Errorf("a reading allocates %.1f times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.Outq() }); n != 0 {
		t.Errorf("outq allocates %.1f times", n)
	}
}

func TestProbeNil(t *testing.T) {
	var p *Probe
	if _, ok := p.Read(); ok || p.Outq() != -1 {
		t.Errorf("a nil probe read something")
	}
	if NewProbe(nil) != nil {
		t.Errorf("a probe of no connection")
	}
}

func BenchmarkProbeRead(b *testing.B) {
	c, _ := loopbackPair(b)
	p := NewProbe(c)
	for b.Loop() {
		_, _ = p.Read()
	}
}
