package stream

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// startServer runs a Server on addr for the test's lifetime.
func startServer(t testing.TB, addr string) *Server {
	t.Helper()
	s, err := NewServer(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "stream", 20*time.Second, s.Serve)
	return s
}

// checkAccounting asserts what holds for any finished test: the receiver
// got no more than the sender sent, and each side's intervals sum to its
// summary.
func checkAccounting(t *testing.T, r Result) {
	t.Helper()
	if r.Receiver.Bytes > r.Sender.Bytes {
		t.Errorf("receiver %d bytes > sender %d", r.Receiver.Bytes, r.Sender.Bytes)
	}
	if r.Sender.Bytes == 0 {
		t.Errorf("nothing sent: %+v", r)
	}
	local, peer := r.Sender, r.Receiver
	if r.Direction == Rx {
		local, peer = r.Receiver, r.Sender
	}
	for _, c := range []struct {
		name string
		iv   []Stats
		sum  Stats
	}{{"client", r.Intervals, local}, {"server", r.PeerIntervals, peer}} {
		var b, p int64
		for i, s := range c.iv {
			b += s.Bytes
			p += s.Packets
			if s.End < s.Start || (i > 0 && s.Start != c.iv[i-1].End) {
				t.Errorf("%s interval %d: %v..%v not contiguous", c.name, i, s.Start, s.End)
			}
		}
		if b != c.sum.Bytes || p != c.sum.Packets {
			t.Errorf("%s intervals sum to %d bytes %d packets, summary says %d and %d", c.name, b, p, c.sum.Bytes, c.sum.Packets)
		}
	}
}

func TestLoopback(t *testing.T) {
	s := startServer(t, "127.0.0.1:0")
	addr := s.Addr().String()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		udp  bool
		cfg  Config
	}{
		{"tcp tx", false, Config{Direction: Tx, Duration: 500 * time.Millisecond, Interval: 100 * time.Millisecond}},
		{"tcp rx", false, Config{Direction: Rx, Duration: 500 * time.Millisecond, Interval: 100 * time.Millisecond, RcvBuf: 64 << 10}},
		{"tcp tx bytes", false, Config{Direction: Tx, Bytes: 10 << 20}},
		{"tcp rx bytes", false, Config{Direction: Rx, Bytes: 10 << 20, ServerBuf: 64 << 10}},
		{"udp tx", true, Config{Direction: Tx, Duration: 500 * time.Millisecond, Interval: 100 * time.Millisecond, Rate: 20e6}},
		{"udp rx", true, Config{Direction: Rx, Duration: 500 * time.Millisecond, Interval: 100 * time.Millisecond, Rate: 20e6, PacketSize: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Addr = addr
			run := TCP
			if tc.udp {
				run = UDP
			}
			r, err := run(ctx, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkAccounting(t, r)
			if tc.cfg.Bytes > 0 && (r.Sender.Bytes != tc.cfg.Bytes || r.Receiver.Bytes != tc.cfg.Bytes) {
				t.Errorf("byte-count test moved %d/%d bytes, want %d", r.Sender.Bytes, r.Receiver.Bytes, tc.cfg.Bytes)
			}
			if tc.udp {
				// 20 Mbit/s for 0.5 s is about 1250000 bytes: a pacer far
				// off (or not pacing at all) moves several times that.
				if want := tc.cfg.Rate / 8 / 2; r.Sender.Bytes < want/2 || r.Sender.Bytes > want*2 {
					t.Errorf("sent %d bytes at %d bit/s for 0.5 s, want about %d", r.Sender.Bytes, tc.cfg.Rate, want)
				}
				if r.Receiver.Packets+r.Receiver.Lost != r.Sender.Packets {
					t.Errorf("received %d + lost %d != sent %d", r.Receiver.Packets, r.Receiver.Lost, r.Sender.Packets)
				}
				if r.Receiver.JitterMs < 0 {
					t.Errorf("jitter %v < 0", r.Receiver.JitterMs)
				}
			}
			t.Logf("sender %.1f Mbit/s %d B, receiver %.1f Mbit/s %d B, lost %d, jitter %.3f ms, retrans %d",
				r.Sender.BitsPerSecond/1e6, r.Sender.Bytes, r.Receiver.BitsPerSecond/1e6, r.Receiver.Bytes,
				r.Receiver.Lost, r.Receiver.JitterMs, r.Sender.Retransmits)
		})
	}
}

func TestRefused(t *testing.T) {
	s := startServer(t, "127.0.0.1:0")
	addr := s.Addr().String()
	ctx := context.Background()
	// The client checks first; a raw request checks the server.
	if _, err := UDP(ctx, Config{Addr: addr, Rate: 2 * MaxRate, Duration: time.Second}); err == nil {
		t.Errorf("client accepted a rate above MaxRate")
	}
	for name, req := range map[string]request{
		"long":       {Version: 1, Proto: "tcp", Dir: "tx", DurationMs: 3600_000, IntervalMs: 1000},
		"fast":       {Version: 1, Proto: "udp", Dir: "rx", DurationMs: 1000, IntervalMs: 1000, Rate: 1e12, PacketSize: 1000},
		"tiny":       {Version: 1, Proto: "udp", Dir: "rx", DurationMs: 1000, IntervalMs: 1000, Rate: 1e6, PacketSize: 4},
		"version":    {Version: 9, Proto: "tcp", Dir: "tx", DurationMs: 1000, IntervalMs: 1000},
		"huge buf":   {Version: 1, Proto: "tcp", Dir: "rx", DurationMs: 1000, IntervalMs: 1000, Buf: 1 << 30},
		"interval 0": {Version: 1, Proto: "tcp", Dir: "rx", DurationMs: 1000},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte(magic + string(rune(kindControl))))
			if err := writeFrame(c, req); err != nil {
				t.Fatal(err)
			}
			var m message
			if err := readFrame(c, maxResult, &m); err != nil {
				t.Fatal(err)
			}
			if m.Type != "error" || m.Error == "" {
				t.Errorf("server answered %+v, want an error", m)
			}
		})
	}
}

// TestOnePerClient: a second test from the same address is refused while
// the first runs.
func TestOnePerClient(t *testing.T) {
	s := startServer(t, "127.0.0.1:0")
	cfg := Config{Addr: s.Addr().String(), Direction: Rx, Duration: time.Second}
	first := make(chan error, 1)
	go func() { _, err := TCP(context.Background(), cfg); first <- err }()
	testenv.WaitFor(5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.byCookie) == 1
	})
	_, err := TCP(context.Background(), cfg)
	if !errors.Is(err, ErrRefused) {
		t.Errorf("second test: %v, want ErrRefused", err)
	}
	if err := <-first; err != nil {
		t.Errorf("first test: %v", err)
	}
}

func TestCancel(t *testing.T) {
	s := startServer(t, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := TCP(ctx, Config{Addr: s.Addr().String(), Direction: Rx, Duration: 30 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled test: %v, want context.DeadlineExceeded", err)
	}
}

// TestBadInput: garbage on the TCP port, a data connection with an
// unknown cookie and stray datagrams are dropped and counted, and the
// server still runs tests.
func TestBadInput(t *testing.T) {
	s := startServer(t, "127.0.0.1:0")
	addr := s.Addr().String()
	for _, b := range [][]byte{
		[]byte("GET / HTTP/1.0\r\n\r\n"),
		[]byte(magic + "D0123456789abcdef"),
		[]byte(magic + "C\xff\xff\xff\xff"),
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("server answered %q", b)
		}
		c.Close()
	}
	u, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	dg := make([]byte, headerLen)
	datagram{session: 12345, seq: 1}.put(dg)
	u.Write(dg)
	u.Write([]byte("junk"))
	if !testenv.WaitFor(5*time.Second, func() bool { return s.Dropped.Load() >= 5 }) {
		t.Errorf("dropped %d, want 5 (3 connections, 2 datagrams)", s.Dropped.Load())
	}
	if _, err := TCP(context.Background(), Config{Addr: addr, Duration: 200 * time.Millisecond, Interval: 100 * time.Millisecond}); err != nil {
		t.Errorf("test after bad input: %v", err)
	}
}

// TestShutdown: cancelling Serve mid-test ends the client's test with an
// error and Serve returns nil.
func TestShutdown(t *testing.T) {
	s, err := NewServer("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	serving := servetest.Run(t, "stream", 10*time.Second, s.Serve)
	res := make(chan error, 1)
	go func() {
		_, err := TCP(context.Background(), Config{Addr: s.Addr().String(), Direction: Rx, Duration: 30 * time.Second})
		res <- err
	}()
	testenv.WaitFor(5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.byCookie) == 1
	})
	serving.Stop()
	if err := serving.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err == nil {
		t.Errorf("test cut by a shutdown returned no error")
	}
}
