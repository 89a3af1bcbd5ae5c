package httpboot

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// wantRefused checks a 503 for a connection over a cap: Retry-After,
// Connection: close, plain text of its length naming the cap and the
// setting to raise; then the server closes the connection.
func wantRefused(t *testing.T, c net.Conn, resp *http.Response, body, setting string, cap int) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close ||
		resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || resp.ContentLength != int64(len(body)) {
		t.Errorf("refusal: %s %v (Content-Length %d, body %d bytes)", resp.Status, resp.Header, resp.ContentLength, len(body))
	}
	if !strings.Contains(body, fmt.Sprintf("(%s %d)", setting, cap)) || !strings.Contains(body, "raise "+setting) {
		t.Errorf("refusal body %q does not name %s %d and its fix", body, setting, cap)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the 503: %v, want EOF", err)
	}
}

// wantSettled waits (bounded) until the limiter holds no connection over a
// cap.
func wantSettled(t *testing.T, l *connLimiter) {
	t.Helper()
	held := -1
	for range 500 {
		l.mu.Lock()
		held = l.held
		l.mu.Unlock()
		if held == 0 && l.unsettled.Load() == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("still held: %d, undecided %d", held, l.unsettled.Load())
}

// TestConnsRefused503: a connection over http.max_conns_per_client or
// http.max_conns is answered 503 naming the cap and the setting, whether
// it sends a request (answered then) or none (answered after refuseIdle);
// the refusal is counted and the admitted connections and other clients
// are still served.
func TestConnsRefused503(t *testing.T) {
	for _, tc := range []struct {
		name, req string
		global    bool
	}{
		{"per client, request", getHealthz, false},
		{"per client, no request", "", false},
		{"in all, request", getHealthz, true},
		{"in all, no request", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := defaultHTTP()
			setting, limit, reason := "http.max_conns_per_client", DefaultMaxConnsPerClient, refuseClientConns
			if tc.global {
				h.MaxConns, h.MaxConnsPerClient = 4, 4
				setting, limit, reason = "http.max_conns", 4, refuseConns
			}
			e := newTestEnv(t, envOpts{http: h})
			addr := strings.TrimPrefix(e.url, "http://")
			var admitted []net.Conn
			for i := range limit {
				src := byte(2)
				if tc.global {
					src += byte(i % 2) // two clients, two each
				}
				admitted = append(admitted, dialFrom(t, addr, src))
			}
			over := dialFrom(t, addr, 2)
			resp, body, err := answer(over, tc.req)
			if err != nil {
				t.Fatalf("over the cap: %v, want a 503", err)
			}
			wantRefused(t, over, resp, body, setting, limit)
			if !tc.global && !strings.Contains(body, "from 127.0.0.2 ") {
				t.Errorf("refusal body %q does not name the client", body)
			}
			if n := e.srv.Refused().Counts()[reason]; n != 1 {
				t.Errorf("refusals %q: %d, want 1", reason, n)
			}
			if resp, _, err := answer(admitted[0], getHealthz); err != nil || resp.StatusCode != 200 {
				t.Errorf("an admitted connection after the refusal: %v %v", resp, err)
			}
			if !tc.global {
				other := dialFrom(t, addr, 9)
				if resp, _, err := answer(other, getHealthz); err != nil || resp.StatusCode != 200 {
					t.Errorf("another client after the refusal: %v %v", resp, err)
				}
			}
			wantSettled(t, e.srv.conns)
		})
	}
}

// TestConnsPerClient: one client cannot hold more than its share of
// connections: the idle ones over it are answered 503 and closed, the
// others stay open.
func TestConnsPerClient(t *testing.T) {
	e := newTestEnv(t, envOpts{})
	addr := strings.TrimPrefix(e.url, "http://")
	var conns []net.Conn
	for range DefaultMaxConnsPerClient + 8 {
		conns = append(conns, dialFrom(t, addr, 1))
	}
	for _, c := range conns[DefaultMaxConnsPerClient:] {
		resp, body, err := answer(c, "")
		if err != nil {
			t.Fatalf("over the cap: %v, want a 503", err)
		}
		wantRefused(t, c, resp, body, "http.max_conns_per_client", DefaultMaxConnsPerClient)
	}
	if n := e.srv.Refused().Counts()[refuseClientConns]; n != 8 {
		t.Errorf("refusals: %d, want 8", n)
	}
	for _, c := range conns[:DefaultMaxConnsPerClient] {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
			t.Errorf("connection under the cap: %v, want it open and silent", err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// capEnv is a server with http.max_conns and max_conns_per_client both
// max, and its host:port.
func capEnv(t *testing.T, max int) (*testEnv, string) {
	t.Helper()
	h := defaultHTTP()
	h.MaxConns, h.MaxConnsPerClient = max, max
	e := newTestEnv(t, envOpts{http: h})
	return e, strings.TrimPrefix(e.url, "http://")
}

// TestConnsGlobal: http.max_conns caps connections from all clients; the
// closed ones are released and the refusals are counted in /healthz.
func TestConnsGlobal(t *testing.T) {
	e, addr := capEnv(t, 4)
	var conns []net.Conn
	for i := range 6 {
		conns = append(conns, dialFrom(t, addr, byte(2+i%2)))
	}
	for _, c := range conns[4:] {
		resp, body, err := answer(c, getHealthz)
		if err != nil {
			t.Fatalf("over the cap: %v, want a 503", err)
		}
		wantRefused(t, c, resp, body, "http.max_conns", 4)
	}
	for _, c := range conns {
		c.Close()
	}
	// The closed ones are released: /healthz gets through, and counts.
	var status int
	var body string
	for range 100 {
		resp, err := rawClient().Get(e.url + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status, body = resp.StatusCode, string(b)
			if status == 200 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != 200 || !strings.Contains(body, `"http: too many connections":2`) {
		t.Errorf("/healthz: %d %s", status, body)
	}
}

// TestConnsRefusedNoLeak: clients over the cap that never read (some
// with a request, some without) are answered and closed, and no
// goroutine stays behind: the write is bounded by refuseWriteTimeout.
func TestConnsRefusedNoLeak(t *testing.T) {
	e := newTestEnv(t, envOpts{})
	addr := strings.TrimPrefix(e.url, "http://")
	for range DefaultMaxConnsPerClient {
		dialFrom(t, addr, 2)
	}
	// The admitted ones' goroutines have started once /healthz answers
	// on another connection (accept runs in order).
	if resp, _, err := answer(dialFrom(t, addr, 3), getHealthz); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	base := runtime.NumGoroutine()
	const over = 8
	for i := range over {
		c := dialFrom(t, addr, 2)
		if i%2 == 0 {
			if _, err := io.WriteString(c, getHealthz); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Until the accept loop has seen them, nothing is held yet: wait for
	// the refusals (the ones without a request come after refuseIdle).
	var refused uint64
	for range 500 {
		if refused = e.srv.Refused().Counts()[refuseClientConns]; refused >= over {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantSettled(t, e.srv.conns)
	if refused != over {
		t.Errorf("refusals: %d, want %d", refused, over)
	}
	n := 0
	for range 500 {
		if n = runtime.NumGoroutine(); n <= base {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Errorf("%d goroutines, %d before the refused clients:\n%s", n, base, buf[:runtime.Stack(buf, true)])
}

// TestConnLimiterClosedPeers: a held connection is let in when the
// client has closed its side of an idle connection (it no longer counts),
// never for one with a response still running (a client cannot slip past
// its cap by half-closing its downloads).
func TestConnLimiterClosedPeers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		perClient  int
		active     []int // connections with a request running
		peerClosed []int // connections whose client has closed its side
		wantIn     bool
	}{
		{"no room", 2, nil, nil, false},
		{"idle one closed by the client", 2, nil, []int{0}, true},
		{"busy one closed by the client", 1, []int{0}, []int{0}, false},
		{"busy one open, idle one closed", 2, []int{0}, []int{1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refusals []string
			l := newConnLimiter(0, tc.perClient, func(reason, _ string, _ ...any) { refusals = append(refusals, reason) })
			l.idle = time.Hour // expire stays out of it
			var conns []net.Conn
			closedPeer := map[net.Conn]bool{}
			l.peerClosed = func(c net.Conn) bool { return closedPeer[c] }
			for range tc.perClient + 1 {
				c, peer := net.Pipe()
				t.Cleanup(func() { c.Close(); peer.Close() })
				conns = append(conns, c)
				l.connState(c, http.StateNew)
			}
			t.Cleanup(func() {
				for _, c := range conns {
					l.connState(c, http.StateClosed)
				}
			})
			for _, i := range tc.active {
				l.connState(conns[i], http.StateActive)
			}
			for _, i := range tc.peerClosed {
				closedPeer[conns[i]] = true
			}
			last := conns[tc.perClient]
			e, st, mine := l.claim(last)
			if !mine || st != connHeld {
				t.Fatalf("connection over the cap: state %d, claimed %v; want held", st, mine)
			}
			refused, body := l.decide(last, e)
			close(e.done)
			if refused == tc.wantIn {
				t.Errorf("refused %v (%q), want let in %v", refused, body, tc.wantIn)
			}
			if refused != (len(refusals) == 1) || len(refusals) > 1 {
				t.Errorf("refusals logged: %v", refusals)
			}
			if n := l.count(); n > tc.perClient {
				t.Errorf("%d counted, over the cap %d", n, tc.perClient)
			}
		})
	}
}

// TestConnsRefusedCurl: curl over the cap shows the 503 and its reason,
// not "Empty reply from server".
func TestConnsRefusedCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed (apt-get install curl)")
	}
	e := newTestEnv(t, envOpts{})
	addr := strings.TrimPrefix(e.url, "http://")
	for range DefaultMaxConnsPerClient {
		dialFrom(t, addr, 2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", "-sS", "-i", "--max-time", "20", "--interface", "127.0.0.2", e.url+"/healthz").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 503 Service Unavailable") ||
		!strings.Contains(string(out), "raise http.max_conns_per_client") {
		t.Errorf("curl over the cap: %v\n%s", err, out)
	}
}
