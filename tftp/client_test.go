package tftp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/tftp"
)

// server is pxeperf's own TFTP server on loopback, serving a fresh root.
type server struct {
	addr netip.AddrPort
	root string
	rec  *event.Recorder
}

// startServer starts the server as the package's internal tests do
// (tftp.StartServer).
func startServer(t testing.TB, cfg tftp.Config) *server {
	t.Helper()
	addr, root, rec := tftp.StartServer(t, cfg)
	return &server{addr: addr, root: root, rec: rec}
}

// file generates an image of n bytes in the root and returns its content.
func (s *server) file(t testing.TB, name string, n int64) []byte {
	t.Helper()
	if _, err := images.GenerateFile(s.root, name, n, 7); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(s.root, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fetchEvent waits for the server's event of the n-th fetch (from 1).
func (s *server) fetchEvent(t *testing.T, n int) event.Fetch {
	t.Helper()
	fs, ok := s.rec.WaitFetches(n, 10*time.Second)
	if !ok {
		t.Fatalf("no server event for fetch %d", n)
	}
	return fs[n-1]
}

// udp is a UDP socket on 127.0.0.1, closed when the test ends.
func udp(t testing.TB) *net.UDPConn {
	t.Helper()
	return tftp.LoopbackConn(t)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// acksFor is how many ACKs a loss-free fetch of blocks blocks in windows of
// win sends (plus ACK 0 after an OACK).
func acksFor(blocks int64, win int, oack bool) int64 {
	n := (blocks + int64(win) - 1) / int64(win)
	if oack {
		n++
	}
	return n
}

func TestGet(t *testing.T) {
	srv := startServer(t, tftp.Config{})
	tests := map[string]struct {
		blk, win int
		size     int64
		wantBlk  int
		wantWin  int
	}{
		"rfc1350 without options":     {size: 100_000, wantBlk: 512, wantWin: 1},
		"blksize 512 window 1":        {blk: 512, win: 1, size: 300_000, wantBlk: 512, wantWin: 1},
		"blksize 512 window 16":       {blk: 512, win: 16, size: 1 << 20, wantBlk: 512, wantWin: 16},
		"blksize 512 window 64":       {blk: 512, win: 64, size: 1 << 20, wantBlk: 512, wantWin: 64},
		"blksize 1468 window 1":       {blk: 1468, win: 1, size: 1 << 20, wantBlk: 1468, wantWin: 1},
		"blksize 1468 window 16":      {blk: 1468, win: 16, size: 4 << 20, wantBlk: 1468, wantWin: 16},
		"blksize 1468 window 64":      {blk: 1468, win: 64, size: 4 << 20, wantBlk: 1468, wantWin: 64},
		"size a multiple of blksize":  {blk: 1468, win: 8, size: 1468 * 40, wantBlk: 1468, wantWin: 8},
		"empty file":                  {blk: 1468, win: 16, size: 0, wantBlk: 1468, wantWin: 16},
		"blksize capped by the MTU":   {blk: 8192, win: 4, size: 100_000, wantBlk: 1468, wantWin: 4},
		"windowsize capped by server": {blk: 512, win: 1000, size: 200_000, wantBlk: 512, wantWin: 64},
	}
	n := 0
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := "img-" + filepath.Base(t.Name())
			want := srv.file(t, file, tc.size)
			var got bytes.Buffer
			st, err := tftp.Get(ctxT(t), udp(t), srv.addr, file, &got, tftp.ClientOptions{BlkSize: tc.blk, WindowSize: tc.win})
			if err != nil {
				t.Fatalf("Get: %v (stats %+v)", err, st)
			}
			n++
			ev := srv.fetchEvent(t, n)
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("got %d bytes, want %d, content differs", got.Len(), len(want))
			}
			blocks := tc.size/int64(tc.wantBlk) + 1
			if ev.Outcome != event.OutcomeOK || ev.TFTP == nil {
				t.Fatalf("server event %+v", ev)
			}
			want1 := tftp.ClientStats{BlkSize: tc.wantBlk, WindowSize: tc.wantWin, TSize: tc.size, OACK: true, Bytes: tc.size,
				Blocks: blocks, Datagrams: blocks, ACKs: acksFor(blocks, tc.wantWin, true)}
			if tc.blk == 0 {
				want1.ACKs = acksFor(blocks, 1, true) // tsize is asked, so an OACK comes
			}
			got1 := st
			got1.Start, got1.Duration = time.Time{}, 0
			if ev.TFTP.Retransmits == 0 && ev.TFTP.Timeouts == 0 {
				// Nothing was lost: every count is exact.
				if diff := cmp.Diff(want1, got1); diff != "" {
					t.Errorf("stats (-want +got):\n%s", diff)
				}
			} else {
				t.Logf("loopback lost packets (server resent %d): counts not compared", ev.TFTP.Retransmits)
			}
			if ev.TFTP.BlockSize != tc.wantBlk || ev.TFTP.WindowSize != tc.wantWin || ev.TFTP.Datagrams < st.Blocks {
				t.Errorf("server saw blksize %d windowsize %d datagrams %d; client %+v", ev.TFTP.BlockSize, ev.TFTP.WindowSize, ev.TFTP.Datagrams, st)
			}
			if st.Duration <= 0 || (tc.size > 0 && st.Mbps() <= 0) {
				t.Errorf("duration %v, %v Mbit/s", st.Duration, st.Mbps())
			}
		})
	}
}

// TestGetNoTSize: without tsize and other options, no OACK comes; the
// server answers with DATA 1 from its transfer port.
func TestGetNoTSize(t *testing.T) {
	srv := startServer(t, tftp.Config{})
	want := srv.file(t, "a.img", 5000)
	var got bytes.Buffer
	st, err := tftp.Get(ctxT(t), udp(t), srv.addr, "a.img", &got, tftp.ClientOptions{NoTSize: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) || st.OACK || st.TSize != -1 || st.Blocks != 10 || st.ACKs != 10 {
		t.Errorf("%d bytes, stats %+v", got.Len(), st)
	}
}

// TestWraparound fetches more than 65535 blocks of 512 bytes: the block
// number wraps to 0 and the bytes still come in order.
func TestWraparound(t *testing.T) {
	srv := startServer(t, tftp.Config{})
	const size = 65536*512 + 3000 // 65542 blocks
	want := sha256.Sum256(srv.file(t, "big.img", size))
	h := sha256.New()
	st, err := tftp.Get(ctxT(t), udp(t), srv.addr, "big.img", h, tftp.ClientOptions{BlkSize: 512, WindowSize: 64})
	if err != nil {
		t.Fatalf("Get: %v (stats %+v)", err, st)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want[:]) || st.Bytes != size || st.Blocks != size/512+1 {
		t.Errorf("content differs or short: %+v", st)
	}
}

// proxy sits between client and server on loopback and drops the packets
// drop picks (toClient says the direction).
type proxy struct {
	front, back *net.UDPConn
	server      netip.AddrPort
	drop        func(toClient bool, pkt []byte) bool

	mu        sync.Mutex
	client    netip.AddrPort
	serverTID netip.AddrPort
	dropped   int
}

func newProxy(t *testing.T, server netip.AddrPort, drop func(toClient bool, pkt []byte) bool) *proxy {
	p := &proxy{front: udp(t), back: udp(t), server: server, drop: drop}
	go p.pump(p.front, false)
	go p.pump(p.back, true)
	return p
}

func (p *proxy) addr() netip.AddrPort { return p.front.LocalAddr().(*net.UDPAddr).AddrPort() }

func (p *proxy) pump(from *net.UDPConn, toClient bool) {
	buf := make([]byte, 65536)
	for {
		n, src, err := from.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // closed at cleanup
		}
		p.mu.Lock()
		var dst netip.AddrPort
		out := p.back
		if toClient {
			p.serverTID, dst, out = src, p.client, p.front
		} else {
			p.client, dst = src, p.serverTID
			if !dst.IsValid() {
				dst = p.server
			}
		}
		drop := p.drop != nil && p.drop(toClient, buf[:n])
		if drop {
			p.dropped++
		}
		p.mu.Unlock()
		if !drop {
			_, _ = out.WriteToUDPAddrPort(buf[:n], dst)
		}
	}
}

// dropFirst drops the first DATA (toClient) or ACK with block number blk.
func dropFirst(toClient bool, op, blk uint16) func(bool, []byte) bool {
	done := false
	return func(tc bool, pkt []byte) bool {
		if done || tc != toClient || len(pkt) < 4 || binary.BigEndian.Uint16(pkt) != op || binary.BigEndian.Uint16(pkt[2:]) != blk {
			return false
		}
		done = true
		return true
	}
}

func TestRecovery(t *testing.T) {
	tests := map[string]struct {
		win  int
		drop func(bool, []byte) bool
		// what the client must have seen
		check func(t *testing.T, st tftp.ClientStats, ev event.Fetch)
	}{
		// A block lost mid-window: the blocks after it show the gap, the
		// client ACKs block 4 at once and the server restarts at 5, with
		// no timeout on either side. (After a loss the adaptive sender's
		// next round ends in a gap block, tftp/adapt.go, which may draw one
		// more early ACK by design.)
		"lost block mid-window: early ACK": {win: 16, drop: dropFirst(true, 3, 5),
			check: func(t *testing.T, st tftp.ClientStats, ev event.Fetch) {
				if st.EarlyACKs < 1 || st.EarlyACKs > 2 || st.OutOfOrder < 11 || st.Timeouts != 0 || ev.TFTP.Timeouts != 0 || ev.TFTP.Retransmits == 0 {
					t.Errorf("want an early ACK after 11 blocks past the gap and no timeout; client %+v server %+v", st, *ev.TFTP)
				}
			}},
		// The last block of a window lost: nothing shows the gap, so a
		// timeout (the server's, resending the window) recovers it.
		"lost last block of a window: timeout": {win: 16, drop: dropFirst(true, 3, 16),
			check: func(t *testing.T, st tftp.ClientStats, ev event.Fetch) {
				if st.Timeouts+ev.TFTP.Timeouts == 0 || ev.TFTP.Retransmits == 0 {
					t.Errorf("want a timeout; client %+v server %+v", st, *ev.TFTP)
				}
			}},
		// The window's ACK lost: the server resends the window, the client
		// sees duplicates and ACKs again once.
		"lost ACK: duplicates, ACK again": {win: 16, drop: dropFirst(false, 4, 16),
			check: func(t *testing.T, st tftp.ClientStats, ev event.Fetch) {
				if st.Duplicates == 0 || ev.TFTP.Retransmits == 0 {
					t.Errorf("want duplicates; client %+v server %+v", st, *ev.TFTP)
				}
			}},
		"lock-step lost block": {win: 1, drop: dropFirst(true, 3, 3),
			check: func(t *testing.T, st tftp.ClientStats, ev event.Fetch) {
				if st.Timeouts+ev.TFTP.Timeouts == 0 {
					t.Errorf("want a timeout; client %+v server %+v", st, *ev.TFTP)
				}
			}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := startServer(t, tftp.Config{Timeout: 200 * time.Millisecond})
			want := srv.file(t, "x.img", 100*512+100)
			px := newProxy(t, srv.addr, tc.drop)
			var got bytes.Buffer
			st, err := tftp.Get(ctxT(t), udp(t), px.addr(), "x.img", &got, tftp.ClientOptions{BlkSize: 512, WindowSize: tc.win, Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatalf("Get: %v (stats %+v)", err, st)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("content differs: %d bytes, want %d", got.Len(), len(want))
			}
			px.mu.Lock()
			dropped := px.dropped
			px.mu.Unlock()
			if dropped != 1 {
				t.Fatalf("proxy dropped %d packets, want 1", dropped)
			}
			ev := srv.fetchEvent(t, 1)
			if ev.Outcome != event.OutcomeOK {
				t.Fatalf("server outcome %s: %s", ev.Outcome, ev.Err)
			}
			tc.check(t, st, ev)
		})
	}
}

func TestServerError(t *testing.T) {
	srv := startServer(t, tftp.Config{})
	_, err := tftp.Get(ctxT(t), udp(t), srv.addr, "missing.img", &bytes.Buffer{}, tftp.ClientOptions{BlkSize: 1468})
	var se *tftp.ServerError
	if !errors.As(err, &se) || se.Code != 1 {
		t.Errorf("err %v, want a server error code 1", err)
	}
}

// TestNoAnswer: a socket that reads and never answers; the client gives up
// after Retries timeouts, having sent the request 1+Retries times.
func TestNoAnswer(t *testing.T) {
	sink := udp(t)
	var mu sync.Mutex
	got := 0
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := sink.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			mu.Lock()
			got++
			mu.Unlock()
		}
	}()
	st, err := tftp.Get(ctxT(t), udp(t), sink.LocalAddr().(*net.UDPAddr).AddrPort(), "x", &bytes.Buffer{},
		tftp.ClientOptions{Timeout: 20 * time.Millisecond, Retries: 3})
	if !errors.Is(err, tftp.ErrTimeout) || st.Timeouts != 4 {
		t.Errorf("err %v, timeouts %d; want tftp.ErrTimeout after 4", err, st.Timeouts)
	}
	time.Sleep(50 * time.Millisecond) // the last request is on its way
	mu.Lock()
	defer mu.Unlock()
	if got != 4 {
		t.Errorf("the server got %d requests, want 4", got)
	}
}

// TestCancel: a cancelled context ends a blocked read at once.
func TestCancel(t *testing.T) {
	sink := udp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tftp.Get(ctx, udp(t), sink.LocalAddr().(*net.UDPAddr).AddrPort(), "x", &bytes.Buffer{}, tftp.ClientOptions{Timeout: 10 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

// cancelWriter cancels its context after n writes.
type cancelWriter struct {
	n      int
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	if w.n--; w.n == 0 {
		w.cancel()
	}
	return len(p), nil
}

// TestCancelMidTransfer: a context ended while blocks keep coming stops
// the fetch at the next packet, not at the end of the file.
func TestCancelMidTransfer(t *testing.T) {
	srv := startServer(t, tftp.Config{})
	srv.file(t, "big.img", 8<<20)
	ctx, cancel := context.WithCancel(ctxT(t))
	st, err := tftp.Get(ctx, udp(t), srv.addr, "big.img", &cancelWriter{n: 10, cancel: cancel}, tftp.ClientOptions{BlkSize: 1468, WindowSize: 16})
	if !errors.Is(err, context.Canceled) || st.Blocks != 10 {
		t.Errorf("err %v after %d blocks; want context.Canceled after 10", err, st.Blocks)
	}
	// The client said so: the server ends the transfer as aborted.
	if ev := srv.fetchEvent(t, 1); ev.Outcome != event.OutcomeAborted {
		t.Errorf("server outcome %q (%s), want aborted", ev.Outcome, ev.Err)
	}
}

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

// TestClientFaults: the client's fault hooks lose, reorder and duplicate
// DATA and duplicate or reorder ACKs, and pxeperf's server still delivers
// every byte in order (RFC 7440 recovery; no Sorcerer's Apprentice).
func TestClientFaults(t *testing.T) {
	srv := startServer(t, tftp.Config{})
	const size = 700_000
	want := sha256.Sum256(srv.file(t, "f.img", size))
	every := func(k int, f tftp.Fault) func(int, int64) tftp.Fault {
		seen := map[int64]bool{}
		return func(n int, seq int64) tftp.Fault {
			if seq%int64(k) == 0 && !seen[seq] { // once per block, or it never arrives
				seen[seq] = true
				return f
			}
			return tftp.Deliver
		}
	}
	tests := map[string]struct {
		opt      tftp.ClientOptions
		wantDups bool
		wantOOO  bool
	}{
		"every 7th lost, window 16":   {opt: tftp.ClientOptions{WindowSize: 16, Fault: every(7, tftp.Drop)}, wantOOO: true},
		"every 5th held back":         {opt: tftp.ClientOptions{WindowSize: 16, Fault: every(5, tftp.Hold)}, wantOOO: true},
		"every 3rd twice":             {opt: tftp.ClientOptions{WindowSize: 8, Fault: every(3, tftp.Twice)}, wantDups: true},
		"lock-step, every 150th lost": {opt: tftp.ClientOptions{WindowSize: 1, Fault: every(150, tftp.Drop)}},
		"duplicate ACKs":              {opt: tftp.ClientOptions{WindowSize: 16, DupACK: true}},
		"stale ACKs after each ACK":   {opt: tftp.ClientOptions{WindowSize: 16, StaleACK: true}},
		"no faults, for the baseline": {opt: tftp.ClientOptions{WindowSize: 16}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.opt.BlkSize, tc.opt.Timeout, tc.opt.Retries = 1468, 100*time.Millisecond, 50 // the server resends on its own timeout
			h := sha256.New()
			st, err := tftp.Get(ctxT(t), udp(t), srv.addr, "f.img", h, tc.opt)
			if err != nil {
				t.Fatalf("Get: %v (stats %+v)", err, st)
			}
			if got := h.Sum(nil); !bytes.Equal(got, want[:]) || st.Bytes != size {
				t.Fatalf("content differs or short: %+v", st)
			}
			if tc.wantDups && st.Duplicates == 0 {
				t.Errorf("no duplicates counted: %+v", st)
			}
			if tc.wantOOO && st.OutOfOrder == 0 {
				t.Errorf("no out-of-order blocks counted: %+v", st)
			}
		})
	}
}
