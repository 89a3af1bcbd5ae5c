//go:build linux

package httpboot

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/sockopt"
	"github.com/pxeperf/pxeperf/measure"
)

// sendfilePair is a loopback TCP connection: the server end as the
// listener wrapper hands it out, and the client end.
func sendfilePair(t *testing.T) (*sendfileConn, net.Conn) {
	t.Helper()
	return sendfilePairBuf(t, 0, 0)
}

// sendfilePairBuf is sendfilePair with a listener that gives big bodies a
// send buffer of sndbuf bytes, and a client whose receive buffer is
// rcvbuf (SO_RCVBUF before connecting; 0: the kernel's).
func sendfilePairBuf(t *testing.T, sndbuf, rcvbuf int) (*sendfileConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wl := wrapListener(ln, sndbuf, 0)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		if rcvbuf == 0 {
			return nil
		}
		return sockopt.Control(rc, func(fd uintptr) error {
			return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
		})
	}}
	cli, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := wl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	sc, ok := srv.(*sendfileConn)
	if !ok {
		t.Fatalf("accepted %T, want *sendfileConn", srv)
	}
	return sc, cli
}

// TestSendfileConn: ReadFrom copies what http.ServeContent asks for (a
// range of the file from its position, through an io.LimitedReader, or a
// whole file) byte for byte, and leaves the limit and the file position
// as io.Copy would; any other reader is copied too.
func TestSendfileConn(t *testing.T) {
	body := pattern(9<<20+13, 3)
	path := filepath.Join(t.TempDir(), "f.img")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		offset, n int64 // n < 0: the whole file from offset, no limit
		reader    bool  // a plain reader, not the file
	}{
		"range through LimitedReader": {offset: 1000, n: 5<<20 + 7},
		"one byte":                    {offset: int64(len(body)) - 1, n: 1},
		"limit past the end":          {offset: 4 << 20, n: 8 << 20},
		"whole file":                  {offset: 0, n: -1},
		"other reader":                {offset: 0, n: 1 << 20, reader: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sc, cli := sendfilePair(t)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Seek(tc.offset, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			want := body[tc.offset:]
			var src io.Reader = f
			var lr *io.LimitedReader
			if tc.n >= 0 {
				want = want[:min(tc.n, int64(len(want)))]
				lr = &io.LimitedReader{R: f, N: tc.n}
				src = lr
			}
			if tc.reader {
				src = bytes.NewReader(want)
			}
			got := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(cli); got <- b }()
			n, err := sc.ReadFrom(src)
			if err != nil || n != int64(len(want)) {
				t.Fatalf("ReadFrom = %d, %v; want %d, nil", n, err, len(want))
			}
			sc.Close()
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("client got %d bytes, want %d (equal: %v)", len(b), len(want), bytes.Equal(b, want))
			}
			if tc.reader {
				if sc.count.bytes != 0 {
					t.Errorf("the sendfile loop copied %d bytes of a plain reader", sc.count.bytes)
				}
				return
			}
			if sc.count.bytes != n {
				t.Errorf("the sendfile loop copied %d of %d bytes", sc.count.bytes, n)
			}
			if lr != nil && lr.N != tc.n-n {
				t.Errorf("limit left %d, want %d", lr.N, tc.n-n)
			}
			if pos, _ := f.Seek(0, io.SeekCurrent); pos != tc.offset+n {
				t.Errorf("file position %d, want %d", pos, tc.offset+n)
			}
		})
	}
}

// TestSendfileConnDeadline: a client that does not read makes ReadFrom
// return at the write deadline (what http.stall_timeout relies on) with
// the bytes the kernel took.
func TestSendfileConnDeadline(t *testing.T) {
	body := pattern(64<<20, 4)
	path := filepath.Join(t.TempDir(), "f.img")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, _ := sendfilePair(t)
	if err := sc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := sc.ReadFrom(&io.LimitedReader{R: f, N: int64(len(body))})
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "sendfile") {
		t.Fatalf("ReadFrom = %d, %v; want a sendfile deadline error", n, err)
	}
	if n <= 0 || n >= int64(len(body)) {
		t.Errorf("copied %d of %d bytes before the deadline, want some", n, len(body))
	}
	if pos, _ := f.Seek(0, io.SeekCurrent); pos != n {
		t.Errorf("file position %d, want %d", pos, n)
	}
}

// TestSendfileColdPages: pages not in the page cache (dropped with
// POSIX_FADV_DONTNEED) go out through scheduler-visible sendfile calls,
// so a disk read never holds a P; once cached, every call is raw.
func TestSendfileColdPages(t *testing.T) {
	body := pattern(8<<20, 5)
	path := filepath.Join(t.TempDir(), "cold.img")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	send := func() *sendfileConn {
		t.Helper()
		sc, cli := sendfilePair(t)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(cli); got <- b }()
		if n, err := sc.ReadFrom(f); err != nil || n != int64(len(body)) {
			t.Fatalf("ReadFrom = %d, %v", n, err)
		}
		sc.Close()
		if b := <-got; !bytes.Equal(b, body) {
			t.Fatalf("client got %d bytes, want %d", len(b), len(body))
		}
		return sc
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	probe := &sendfileConn{}
	if probe.cached(f.Fd(), int64(len(body))-1) {
		t.Skip("the page cache kept the file after POSIX_FADV_DONTNEED (tmpfs?): cold pages cannot be made here")
	}
	if sc := send(); sc.count.coldCalls == 0 || sc.count.bytes != int64(len(body)) {
		t.Errorf("cold file: %d scheduler-visible calls, %d bytes by the loop; want some, %d", sc.count.coldCalls, sc.count.bytes, len(body))
	}
	if !probe.cached(f.Fd(), int64(len(body))-1) {
		t.Fatal("the file's last page is not cached after sending it")
	}
	if sc := send(); sc.count.coldCalls != 0 {
		t.Errorf("cached file: %d scheduler-visible calls, want 0", sc.count.coldCalls)
	}
}

// TestSendfileProbeCovers: one page-cache probe covers a whole chunk, so a
// copy that the socket buffer splits into many sendfile calls probes about
// once per chunk (maxSendfileChunk), not once per call; and a full buffer
// is waited for, not tried with a sendfile that fails.
func TestSendfileProbeCovers(t *testing.T) {
	body := pattern(8<<20, 7)
	path := filepath.Join(t.TempDir(), "warm.img")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sc, cli := sendfilePair(t)
	// A small send buffer and a slow reader: many calls per chunk.
	if err := sc.SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 32<<10)
		for {
			n, err := cli.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				got <- b.Bytes()
				return
			}
		}
	}()
	// As http.ServeContent passes it: limited to the length.
	if n, err := sc.ReadFrom(io.LimitReader(f, int64(len(body)))); err != nil || n != int64(len(body)) {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	sc.Close()
	if b := <-got; !bytes.Equal(b, body) {
		t.Fatalf("client got %d bytes, want %d", len(b), len(body))
	}
	chunks := int64((len(body) + maxSendfileChunk - 1) / maxSendfileChunk)
	if sc.count.calls < 2*chunks {
		t.Skipf("only %d sendfile calls for %d chunks: the socket buffer took whole chunks, nothing to show", sc.count.calls, chunks)
	}
	if sc.count.probes > chunks {
		t.Errorf("%d probes in %d sendfile calls; want at most one per chunk (%d)", sc.count.probes, sc.count.calls, chunks)
	}
	t.Logf("%d sendfile calls, %d probes (%d cold), %d chunks", sc.count.calls, sc.count.probes, sc.count.coldCalls, chunks)
	// A copy cut short by a full socket buffer waits for room (a poll
	// tells), instead of trying again into a sendfile that reads pages
	// only to fail with EAGAIN.
	if sc.count.pollWaits == 0 {
		t.Errorf("%d sendfile calls and no wait for room: the slow reader should have filled the buffer", sc.count.calls)
	}
	if sc.count.eagainWaits > sc.count.pollWaits/10 {
		t.Errorf("%d sendfile calls failed with EAGAIN against %d waits decided by a poll", sc.count.eagainWaits, sc.count.pollWaits)
	}
	t.Logf("%d waits for room, %d EAGAIN", sc.count.pollWaits, sc.count.eagainWaits)
}

// TestResponseLeavesCorked: a file body over one splice batch leaves in
// full packets, the header with the body, and the cork is off before the
// held-back last byte. Over loopback TCP hands the device packets of up
// to 64 KiB (GSO), so a 200 KiB file arrives in the packets that its
// header and body up to the last byte fill (4), plus one for the last
// byte; uncorked (Go sets TCP_NODELAY), the header was a packet of its
// own (6).
func TestResponseLeavesCorked(t *testing.T) {
	body := pattern(200<<10, 3)
	e := newTestEnv(t, envOpts{files: map[string][]byte{"mid.img": body}})
	// A loaded machine can add a packet (a client slow to read shrinks the
	// window, and TCP sends what fits); uncorked, every fetch has the extra
	// packet. So a few fetches, and the best counts.
	var counts []int64
	var want int64
	for range 3 {
		var got int64
		got, want = corkedFetch(t, e, body)
		counts = append(counts, got)
		if got <= want {
			t.Logf("%d data packets, want at most %d (fetches: %v)", got, want, counts)
			return
		}
	}
	t.Errorf("a 200 KiB file came in %v packets in 3 fetches, want at most %d: partial packets went out uncorked", counts, want)
}

// corkedFetch fetches mid.img (body) once and returns the data packets it
// came in and the most a corked response takes.
func corkedFetch(t *testing.T, e *testEnv, body []byte) (got, want int64) {
	t.Helper()
	c := dialGet(t, e.srv.Addr().String(), "/mid.img", 0)
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, resp.ContentLength))
	if err != nil || !bytes.Equal(b, body) {
		t.Fatalf("got %d bytes (%v), want %d", len(b), err, len(body))
	}
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var ierr error
	_ = rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if ierr != nil {
		t.Fatal(ierr)
	}
	if info.Snd_mss < 16<<10 {
		t.Skipf("loopback MSS %d: not the 64 KiB packets this test counts with", info.Snd_mss)
	}
	const gso = 64 << 10
	headerLen := int64(info.Bytes_received) - int64(len(body))
	return int64(info.Data_segs_in), (headerLen+int64(len(body))-1+gso-1)/gso + 1
}

// sendBufferOf is sc's send buffer as the kernel accounts it (SO_SNDBUF).
func sendBufferOf(sc *sendfileConn) (v int) {
	_ = sc.rc.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
	return v
}

// TestAwaitAcked: with the send buffer the connection sized itself,
// awaitAcked returns once the client has acknowledged all but at most a
// small segment, woken by Go's poller a few times, not by a timer step by
// step, while a slow client takes a 12 MiB body in over ~200 ms; the send
// buffer is back to its size after it, also when the write deadline ends
// the wait (a client that stopped reading). A connection that kept the
// kernel's autotuned buffer does not wait so (locking its buffer would end
// the autotuning).
func TestAwaitAcked(t *testing.T) {
	// Above what loopback's autotuning starts a connection with (4 MiB,
	// tcp_wmem's cap), so the connection sizes its buffer.
	const sndbuf = 8 << 20
	body := pattern(12<<20, 5)
	path := filepath.Join(t.TempDir(), "f.img")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	send := func(t *testing.T, sc *sendfileConn) {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if n, err := sc.ReadFrom(&io.LimitedReader{R: f, N: int64(len(body))}); err != nil || n != int64(len(body)) {
			t.Fatalf("ReadFrom = %d, %v", n, err)
		}
	}

	t.Run("slow client", func(t *testing.T) {
		sc, cli := sendfilePairBuf(t, sndbuf, 64<<10)
		probe := measure.NewProbe(sc)
		done := make(chan int64, 1)
		go func() {
			// 128 KiB every 2 ms: about 200 ms for the body.
			var got int64
			buf := make([]byte, 128<<10)
			for got < int64(len(body)) {
				n, err := io.ReadFull(cli, buf[:min(int64(len(buf)), int64(len(body))-got)])
				got += int64(n)
				if err != nil {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			done <- got
		}()
		send(t, sc)
		if q := probe.Outq(); q < 1<<20 {
			t.Fatalf("after the copy %d bytes wait for the client; want a full buffer's worth", q)
		}
		t0 := time.Now()
		waited, err := sc.awaitAcked(probe.Outq)
		took := time.Since(t0)
		t.Logf("awaitAcked: %v, %d checks", took, sc.count.ackChecks)
		if !waited || err != nil {
			t.Fatalf("awaitAcked = %v, %v; want true, nil", waited, err)
		}
		if q := probe.Outq(); q > 4096 {
			t.Errorf("awaitAcked returned with %d bytes unacknowledged, want at most a small segment", q)
		}
		// A timer step of 1 ms would have checked took/1ms times.
		if sc.count.ackChecks > 8 || time.Duration(sc.count.ackChecks)*time.Millisecond > took/4 {
			t.Errorf("awaitAcked checked %d times in %v: woken by something else than the queue draining", sc.count.ackChecks, took)
		}
		if v := sendBufferOf(sc); sc.cur < sndbuf || v != sc.cur {
			t.Errorf("send buffer %d after the wait, want the %d it had (at least %d) back", v, sc.cur, sndbuf)
		}
		if got := <-done; got != int64(len(body)) {
			t.Errorf("client read %d of %d bytes", got, len(body))
		}
	})

	t.Run("deadline", func(t *testing.T) {
		sc, _ := sendfilePairBuf(t, sndbuf, 64<<10)
		probe := measure.NewProbe(sc)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// The client reads nothing: the copy stops at the deadline
		// unless it all fit; either way, queue what fits.
		if err := sc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		_, _ = sc.ReadFrom(&io.LimitedReader{R: f, N: int64(len(body))})
		if err := sc.SetWriteDeadline(time.Now().Add(150 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		waited, err := sc.awaitAcked(probe.Outq)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("awaitAcked = %v, %v; want the deadline's error", waited, err)
		}
		if q := probe.Outq(); q <= 0 {
			t.Errorf("queue %d with a client that reads nothing", q)
		}
		if v := sendBufferOf(sc); sc.cur < sndbuf || v != sc.cur {
			t.Errorf("send buffer %d after the wait, want the %d it had (at least %d) back", v, sc.cur, sndbuf)
		}
	})

	t.Run("autotuned", func(t *testing.T) {
		sc, cli := sendfilePairBuf(t, 0, 0)
		go func() { _, _ = io.Copy(io.Discard, cli) }()
		send(t, sc)
		waited, err := sc.awaitAcked(measure.NewProbe(sc).Outq)
		if waited || err != nil {
			t.Errorf("awaitAcked = %v, %v on an autotuned buffer; want false, nil", waited, err)
		}
	})
}

// TestSendBufferBoost: a big body copied slower than boostBelow gets four
// times the listener's send buffer alone, twice while at most boostBodies
// are copied, from its first wait for room past boostAfter on; one with
// more in flight then keeps the buffer itself; and a boosted body goes
// back to it at a later wait once more have started.
func TestSendBufferBoost(t *testing.T) {
	const sndbuf = 8 << 20 // above loopback's 4 MiB start, so it is set
	// ~0.8 s at the slow client's ~60 MB/s: well past boostAfter, with
	// waits for room after it.
	body := pattern(48<<20, 6)
	path := filepath.Join(t.TempDir(), "f.img")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	// copy sends the body to a client that reads it all slowly (so the
	// copy waits for room: the send buffer holds less than the body) and
	// runs during, when set, once it has read 2 MiB and when says so.
	copyBody := func(t *testing.T, sc *sendfileConn, cli net.Conn, when func() bool, during func()) {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		done := make(chan error, 1)
		go func() {
			buf := make([]byte, 256<<10)
			var got int
			for got < len(body) {
				n, err := cli.Read(buf)
				if during != nil && got+n >= 2<<20 && when() {
					during()
					during = nil
				}
				got += n
				if err != nil {
					done <- err
					return
				}
				time.Sleep(time.Millisecond)
			}
			done <- nil
		}()
		if n, err := sc.ReadFrom(&io.LimitedReader{R: f, N: int64(len(body))}); err != nil || n != int64(len(body)) {
			t.Fatalf("ReadFrom = %d, %v", n, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	t.Run("alone", func(t *testing.T) {
		sc, cli := sendfilePairBuf(t, sndbuf, 64<<10)
		copyBody(t, sc, cli, nil, nil)
		if v := sendBufferOf(sc); v != 4*sndbuf {
			t.Errorf("send buffer %d for a body copied alone, want %d", v, 4*sndbuf)
		}
	})
	t.Run("few", func(t *testing.T) {
		sc, cli := sendfilePairBuf(t, sndbuf, 64<<10)
		sc.big.Add(boostBodies - 1) // as many others are being copied
		copyBody(t, sc, cli, nil, nil)
		if v := sendBufferOf(sc); v != 2*sndbuf {
			t.Errorf("send buffer %d for a body copied beside %d others, want %d", v, boostBodies-1, 2*sndbuf)
		}
	})
	t.Run("many", func(t *testing.T) {
		sc, cli := sendfilePairBuf(t, sndbuf, 64<<10)
		sc.big.Add(boostBodies) // as many others are being copied
		copyBody(t, sc, cli, nil, nil)
		if v := sendBufferOf(sc); v != sndbuf {
			t.Errorf("send buffer %d for a body copied beside %d others, want %d", v, boostBodies, sndbuf)
		}
	})
	t.Run("more start", func(t *testing.T) {
		sc, cli := sendfilePairBuf(t, sndbuf, 64<<10)
		// Once the copy was boosted, as many others start.
		copyBody(t, sc, cli, func() bool { return sendBufferOf(sc) > sndbuf },
			func() { sc.big.Add(boostBodies) })
		if v := sendBufferOf(sc); v != sndbuf {
			t.Errorf("send buffer %d after %d more bodies started, want %d back", v, boostBodies, sndbuf)
		}
		if sc.big.Load() != boostBodies {
			t.Errorf("big bodies %d after the copy, want the %d others", sc.big.Load(), boostBodies)
		}
	})
}

// TestSendBudget: the buffers connections set themselves together stay
// within the listener's budget (http.send_buffer_total_mib): a connection
// gets what is left, none when that is no more than the kernel gave it
// (it keeps autotuning), and a closed connection gives its buffer back.
func TestSendBudget(t *testing.T) {
	const sndbuf = 8 << 20
	b := &sendBudget{total: 14 << 20}
	fit := func(sc *sendfileConn) {
		t.Helper()
		sc.budget = b
		if err := sc.rc.Control(func(fd uintptr) { sc.fitSendBuffer(fd, boostBodies+1) }); err != nil {
			t.Fatal(err)
		}
	}
	used := func() int { b.mu.Lock(); defer b.mu.Unlock(); return b.used }
	a, _ := sendfilePairBuf(t, sndbuf, 64<<10)
	fit(a)
	if a.cur != sndbuf || sendBufferOf(a) != sndbuf || used() != sndbuf {
		t.Fatalf("first: cur %d, buffer %d, budget used %d; want all %d", a.cur, sendBufferOf(a), used(), sndbuf)
	}
	c, _ := sendfilePairBuf(t, sndbuf, 64<<10)
	fit(c)
	if want := 6 << 20; c.cur != want || sendBufferOf(c) != want || used() != 14<<20 {
		t.Fatalf("second: cur %d, buffer %d, budget used %d; want %d, %d, %d", c.cur, sendBufferOf(c), used(), want, want, 14<<20)
	}
	d, _ := sendfilePairBuf(t, sndbuf, 64<<10)
	kern := sendBufferOf(d)
	fit(d)
	if d.cur != 0 || sendBufferOf(d) != kern || used() != 14<<20 {
		t.Fatalf("third, budget spent: cur %d, buffer %d (kernel's %d), budget used %d; want the kernel's, used %d", d.cur, sendBufferOf(d), kern, used(), 14<<20)
	}
	a.Close()
	if used() != 6<<20 {
		t.Fatalf("budget used %d after the first closed, want %d", used(), 6<<20)
	}
	fit(d)
	if d.cur != sndbuf || used() != 14<<20 {
		t.Fatalf("third after a close: cur %d, budget used %d; want %d, %d", d.cur, used(), sndbuf, 14<<20)
	}
	a.Close() // twice: given back once
	if used() != 14<<20 {
		t.Fatalf("budget used %d after a second Close, want %d", used(), 14<<20)
	}
}
