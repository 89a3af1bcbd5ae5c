package httpboot

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
)

func TestFetchEvent(t *testing.T) {
	const size = 8 << 20
	mac := mustMAC("52:54:00:00:00:01")
	e := newTestEnv(t, envOpts{
		files: map[string][]byte{"img/disk.img": pattern(size, 5)},
		// The entry's address agrees with ?mac= from 127.0.0.1.
		hosts: []configs.Host{{MAC: mac, Name: "board-1", Address: configs.Addr{Addr: netip.MustParseAddr("127.0.0.1")},
			Labels: map[string]string{"rack": "r2"}}},
	})
	resp, err := rawClient().Get(e.url + "/img/disk.img?mac=52:54:00:00:00:01&label.run=3")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n != size {
		t.Fatalf("read %d bytes, want %d", n, size)
	}
	f := e.waitFetches(t, 1)[0]
	want := event.Fetch{
		Proto: event.ProtoHTTP, MAC: mac.HardwareAddr, Host: "board-1", File: "img/disk.img",
		Bytes: size, Size: size, Outcome: event.OutcomeOK, Interface: "lo",
		Labels: map[string]string{"rack": "r2", "run": "3"},
	}
	if d := cmp.Diff(want, f, cmpopts.IgnoreFields(event.Fetch{}, "Start", "Client", "Local", "Duration", "TCP", "Intervals")); d != "" {
		t.Errorf("fetch (-want +got):\n%s", d)
	}
	if !f.Client.Addr().IsLoopback() || f.Duration <= 0 {
		t.Errorf("client %v duration %v", f.Client, f.Duration)
	}
	ti := f.TCP
	if ti == nil {
		t.Fatal("no TCP info on the fetch")
	}
	for name, v := range map[string]uint64{
		"RTT": uint64(ti.RTT), "MinRTT": uint64(ti.MinRTT), "MaxSndWnd": uint64(ti.MaxSndWnd),
		"SndWnd": uint64(ti.SndWnd), "SndCwnd": uint64(ti.SndCwnd), "MSS": uint64(ti.MSS),
		"PMTU": uint64(ti.PMTU), "DeliveryRate": uint64(ti.DeliveryRate),
	} {
		if v == 0 {
			t.Errorf("TCPInfo.%s is 0: %+v", name, *ti)
		}
	}
	if ti.MaxSndWnd < ti.SndWnd {
		t.Errorf("MaxSndWnd %d < SndWnd %d", ti.MaxSndWnd, ti.SndWnd)
	}
}

// dialGet opens a raw connection and sends a GET; the caller reads.
func dialGet(t *testing.T, addr, path string, rcvbuf int) *net.TCPConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: nil}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	if rcvbuf > 0 {
		_ = tc.SetReadBuffer(rcvbuf)
	}
	t.Cleanup(func() { tc.Close() })
	_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: pxeperf\r\n\r\n", path)
	return tc
}

// TestClientGoesAway: a reset before the end is aborted; a reset right
// after the last byte (OVMF does that) is ok.
func TestClientGoesAway(t *testing.T) {
	const size = 64 << 20
	tests := map[string]struct {
		read    int64 // body bytes the client reads before resetting
		outcome string
	}{
		"reset mid-download":   {read: 1 << 20, outcome: event.OutcomeAborted},
		"reset after download": {read: size, outcome: event.OutcomeOK},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, envOpts{files: map[string][]byte{"big.img": pattern(size, 6)}})
			c := dialGet(t, e.srv.Addr().String(), "/big.img", 0)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := io.CopyN(io.Discard, resp.Body, tc.read); n != tc.read {
				t.Fatalf("read %d of %d: %v", n, tc.read, err)
			}
			_ = c.SetLinger(0) // close with RST
			c.Close()
			f := e.waitFetches(t, 1)[0]
			if f.Outcome != tc.outcome {
				t.Errorf("outcome %q (%s), want %q; bytes %d of %d", f.Outcome, f.Err, tc.outcome, f.Bytes, f.Size)
			}
			if tc.outcome == event.OutcomeAborted && (f.Bytes >= size || f.Err == "") {
				t.Errorf("aborted fetch: bytes %d of %d, err %q", f.Bytes, size, f.Err)
			}
		})
	}
}

// TestStallTimeout: a client that stops reading is cut after
// http.stall_timeout, also inside one sendfile call.
func TestStallTimeout(t *testing.T) {
	h := defaultHTTP()
	h.StallTimeout = 300 * time.Millisecond
	e := newTestEnv(t, envOpts{http: h, files: map[string][]byte{"big.img": pattern(64<<20, 7)}})
	c := dialGet(t, e.srv.Addr().String(), "/big.img", 4096)
	f := e.waitFetches(t, 1)[0]
	if f.Outcome != event.OutcomeError || !strings.Contains(f.Err, "stalled") || f.Bytes >= f.Size {
		t.Errorf("outcome %q err %q bytes %d of %d, want a stalled error", f.Outcome, f.Err, f.Bytes, f.Size)
	}
	_ = c
}

// slowReader reads the body in small steps with pauses, like a slow board.
func slowRead(r io.Reader, step int, pause time.Duration, started func()) ([]byte, error) {
	var out []byte
	buf := make([]byte, step)
	once := sync.Once{}
	for i := 0; i < 100_000; i++ {
		n, err := io.ReadFull(r, buf)
		out = append(out, buf[:n]...)
		if n > 0 {
			once.Do(started)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		time.Sleep(pause)
	}
	return out, fmt.Errorf("too many reads")
}

// TestGracefulShutdown: when ctx ends, a running download finishes (new
// connections are refused) and Serve returns nil after it.
func TestGracefulShutdown(t *testing.T) {
	const size = 4 << 20
	body := pattern(size, 8)
	e := newTestEnv(t, envOpts{files: map[string][]byte{"slow.img": body}})
	c := dialGet(t, e.srv.Addr().String(), "/slow.img", 16<<10)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := slowRead(resp.Body, 64<<10, 10*time.Millisecond, func() {
		e.serving.Stop()
		// Once Serve has closed the listener, no new client gets in.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			c2, err := net.DialTimeout("tcp", e.srv.Addr().String(), time.Second)
			if err != nil {
				return
			}
			c2.Close()
			time.Sleep(10 * time.Millisecond)
		}
		t.Error("listener still accepting 5 s after shutdown began")
	})
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(body) {
		t.Fatalf("download during shutdown: %d bytes, sha256 differs", len(got))
	}
	if err := e.serving.Wait(); err != nil {
		t.Fatalf("after the download finished: %v", err)
	}
	f := e.waitFetches(t, 1)[0]
	if f.Outcome != event.OutcomeOK || f.Bytes != size {
		t.Errorf("fetch %q %d bytes, want ok %d", f.Outcome, f.Bytes, size)
	}
}

// TestShutdownGraceExpires: a download still running after the grace is cut
// and Serve returns.
func TestShutdownGraceExpires(t *testing.T) {
	h := defaultHTTP()
	h.ShutdownGrace = 200 * time.Millisecond
	e := newTestEnv(t, envOpts{http: h, files: map[string][]byte{"big.img": pattern(64<<20, 9)}})
	c := dialGet(t, e.srv.Addr().String(), "/big.img", 4096)
	br := bufio.NewReader(c)
	if _, err := br.Peek(1); err != nil {
		t.Fatal(err)
	}
	e.serving.Stop()
	if err := e.serving.Wait(); err != nil {
		t.Fatalf("after the shutdown grace: %v", err)
	}
	f := e.waitFetches(t, 1)[0]
	if f.Outcome == event.OutcomeOK {
		t.Errorf("cut download recorded ok: %+v", f)
	}
}

// spyConn records what the connection's ReadFrom is asked to copy: an
// *os.File there means the kernel's sendfile does the copy.
type spyConn struct {
	net.Conn  // the server's connection (sendfileConn on Linux)
	mu        sync.Mutex
	fileBytes int64
}

func (c *spyConn) ReadFrom(r io.Reader) (int64, error) {
	src := r
	if lr, ok := r.(*io.LimitedReader); ok {
		src = lr.R
	}
	n, err := c.Conn.(io.ReaderFrom).ReadFrom(r)
	if _, ok := src.(*os.File); ok {
		c.mu.Lock()
		c.fileBytes += n
		c.mu.Unlock()
	}
	return n, err
}

type spyListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*spyConn
}

func (l *spyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &spyConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, sc)
	l.mu.Unlock()
	return sc, nil
}

func (l *spyListener) fileBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, c := range l.conns {
		c.mu.Lock()
		n += c.fileBytes
		c.mu.Unlock()
	}
	return n
}

// hideReaderFrom is the mistake pxeperf avoids: a wrapper with only the
// ResponseWriter methods, which hides io.ReaderFrom and so sendfile.
type hideReaderFrom struct{ http.ResponseWriter }

func hiding(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(hideReaderFrom{w}, r)
	})
}

// TestSendfilePath proves file bodies reach (*net.TCPConn).ReadFrom with the
// *os.File (the sendfile path), and that the check fails for a wrapper that
// hides io.ReaderFrom.
func TestSendfilePath(t *testing.T) {
	const size = 4 << 20
	tests := map[string]struct {
		wrap     func(http.Handler) http.Handler
		sendfile bool
	}{
		"pxeperf handler":           {nil, true},
		"ReaderFrom-hiding wrapper": {hiding, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var spy *spyListener
			e := newTestEnv(t, envOpts{files: map[string][]byte{"k.img": pattern(size, 10)}, before: func(s *Server) {
				spy = &spyListener{Listener: s.ln}
				s.ln = spy
				if tc.wrap != nil {
					s.srv.Handler = tc.wrap(s)
				}
			}})
			resp, err := rawClient().Get(e.url + "/k.img")
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			f := e.waitFetches(t, 1)[0]
			if n != size || f.Bytes != size || f.Outcome != event.OutcomeOK {
				t.Fatalf("read %d, fetch %d bytes %q; want %d ok", n, f.Bytes, f.Outcome, size)
			}
			// The first 512 bytes go through Write (content sniffing
			// window); the held-back last byte's ReadFrom may return
			// (and be counted) after the client has it.
			got := spy.fileBytes()
			if tc.sendfile && got < size-512-1 {
				t.Errorf("sendfile copied %d of %d bytes: ReadFrom is hidden somewhere", got, size)
			}
			if !tc.sendfile && got != 0 {
				t.Errorf("hiding wrapper still reached sendfile (%d bytes): the check cannot fail", got)
			}
		})
	}
}

func TestServeReturnsNilOnCancel(t *testing.T) {
	e := newTestEnv(t, envOpts{})
	e.serving.Stop()
	if err := e.serving.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", e.srv.Addr().String(), time.Second); err == nil {
		t.Error("still accepting after Serve returned")
	}
}

// TestRecordEndsAtClientAck: a record's end is when the client had the
// body, not when the server's last copy went into its send buffer. The
// client reads slowly through a small receive buffer, so the server's
// 4 MiB send buffer (http.send_buffer_kib) is still full when the last
// byte is queued. By causality the record may only end once the client's
// kernel acknowledged everything but the held-back last byte, so by then
// the client had read all but what its receive buffer holds (SO_RCVBUF
// 64 KiB: at most 128 KiB plus overhead; 1 MiB allowed). A record emitted
// at the last copy ends ~4 MiB of reading earlier.
func TestRecordEndsAtClientAck(t *testing.T) {
	const size, margin, step = 16 << 20, 1 << 20, 64 << 10
	h := defaultHTTP()
	h.SendBufferKiB = 4096
	e := newTestEnv(t, envOpts{http: h, files: map[string][]byte{"big.img": pattern(size, 11)}})
	c := dialGet(t, e.srv.Addr().String(), "/big.img", step)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, step), nil)
	if err != nil {
		t.Fatal(err)
	}
	var read int64
	var nearEnd time.Time // when the client had read all but margin+1 bytes
	buf := make([]byte, step)
	for i := 0; i < size/step+2; i++ {
		n, err := io.ReadFull(resp.Body, buf)
		read += int64(n)
		if nearEnd.IsZero() && read >= size-1-margin {
			nearEnd = time.Now()
		}
		if err != nil {
			break
		}
		time.Sleep(4 * time.Millisecond)
	}
	if read != size {
		t.Fatalf("read %d of %d bytes", read, size)
	}
	f := e.waitFetches(t, 1)[0]
	end := f.Start.Add(f.Duration)
	if end.Before(nearEnd) {
		t.Errorf("record ends %s before the client had read all but %d bytes: it timed the server's copy into "+
			"its send buffer, not the client's download (duration %s)", nearEnd.Sub(end), margin+1, f.Duration)
	}
	if f.Outcome != event.OutcomeOK || f.Bytes != size {
		t.Errorf("outcome %q bytes %d, want ok and %d", f.Outcome, f.Bytes, size)
	}
}
