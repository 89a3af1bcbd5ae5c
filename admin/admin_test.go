package admin

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

func start(t *testing.T, opt Options) string {
	t.Helper()
	opt.Listen = "127.0.0.1:0"
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "records")
	}))
	servetest.Run(t, "admin", 10*time.Second, s.Serve)
	return "http://" + s.Addr().String()
}

func fetch(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestToken: with admin.token_file set, every path needs the bearer token;
// a wrong or missing one gets 401 with a message saying what to send.
func TestToken(t *testing.T) {
	base := start(t, Options{Token: "s3cret"})
	for name, c := range map[string]struct {
		auth string
		want int
	}{
		"none":         {"", 401},
		"wrong":        {"Bearer s3cre", 401},
		"basic":        {"Basic czNjcmV0", 401},
		"right":        {"Bearer s3cret", 200},
		"lower scheme": {"bearer s3cret", 200},
	} {
		status, body := fetch(t, base+"/api/fetches", c.auth)
		if status != c.want {
			t.Errorf("%s: HTTP %d, want %d: %s", name, status, c.want, body)
		}
		if status == 401 && !strings.Contains(body, "Authorization: Bearer") {
			t.Errorf("%s: 401 without advice: %s", name, body)
		}
	}
	if status, _ := fetch(t, base+"/healthz", ""); status != 401 {
		t.Errorf("/healthz without a token: %d, want 401", status)
	}
}

// TestTokenInQuery: a read may carry the token as access_token (the
// dashboard's EventSource cannot send a header); a write may not, since
// its URL ends up in logs: it gets 401 and the handler never runs.
func TestTokenInQuery(t *testing.T) {
	base := start(t, Options{Token: "s3cret"})
	c := &http.Client{Timeout: 10 * time.Second}
	for _, m := range []string{"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"} {
		req, _ := http.NewRequest(m, base+"/api/hosts/52:54:00:12:34:56?access_token=s3cret", strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := 401
		if m == "GET" || m == "HEAD" {
			want = 200
		}
		if resp.StatusCode != want {
			t.Errorf("%s with the token in the query: HTTP %d, want %d", m, resp.StatusCode, want)
		}
	}
}

// TestNoToken: without a token the listener answers everyone who reaches it
// (loopback by default).
func TestNoToken(t *testing.T) {
	base := start(t, Options{})
	if status, body := fetch(t, base+"/api/fetches", ""); status != 200 || body != "records" {
		t.Errorf("HTTP %d %q", status, body)
	}
	if status, body := fetch(t, base+"/healthz", ""); status != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz: HTTP %d %q", status, body)
	}
}

// TestBusyPort: New fails at once, naming the key and the flag.
func TestBusyPort(t *testing.T) {
	s, err := New(Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.srv.Close()
	defer s.ln.Close()
	_, err = New(Options{Listen: s.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "admin.listen") || !strings.Contains(err.Error(), "--admin-addr") {
		t.Errorf("second listener on the same port: %v", err)
	}
}

// TestHostWithoutToken: without a token only IP literals, localhost and
// the listener's names are answered; a rebound name gets 421 saying why
// and what to set, and with a token any Host is fine.
func TestHostWithoutToken(t *testing.T) {
	base := start(t, Options{Names: []string{"pxe1.lab"}})
	tok := start(t, Options{Token: "s3cret"})
	for name, c := range map[string]struct {
		base, host, auth string
		want             int
	}{
		"ip":             {base, "", "", 200},
		"localhost":      {base, "localhost:9069", "", 200},
		"ipv6":           {base, "[::1]:9069", "", 200},
		"own name":       {base, "PXE1.lab.", "", 200},
		"rebound":        {base, "evil.example:9069", "", 421},
		"empty":          {base, " ", "", 421},
		"token, any":     {tok, "evil.example", "Bearer s3cret", 200},
		"token, missing": {tok, "localhost", "", 401},
	} {
		req, _ := http.NewRequest("GET", c.base+"/api/fetches", nil)
		if c.host != "" {
			req.Host = c.host
		}
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: HTTP %d, want %d: %s", name, resp.StatusCode, c.want, b)
		}
		if c.want == 421 && !strings.Contains(string(b), "admin.allowed_hosts") {
			t.Errorf("%s: 421 without advice: %s", name, b)
		}
	}
}

// TestConnCap: connections past admin.max_conns_per_client are closed as
// soon as accepted (counted), while another address still gets in, and a
// slot comes back when its connection closes.
func TestConnCap(t *testing.T) {
	opt := Options{Listen: "127.0.0.1:0", MaxConns: 8, MaxConnsPerClient: 3}
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "admin", 10*time.Second, s.Serve)
	addr := s.Addr().String()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range 6 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	closed := 0
	deadline := time.Now().Add(time.Second)   // well within the 5 s header timeout
	for _, c := range slices.Backward(held) { // the closed ones first: the others wait out the deadline
		c.SetReadDeadline(deadline)
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			closed++
		}
	}
	if closed != 3 {
		t.Errorf("%d of 6 header-less connections from one address closed at once, want 3 (cap 3 per client)", closed)
	}
	if n := s.Refused().Count(refuseConns); n != 3 {
		t.Errorf("refusals counted: %d, want 3", n)
	}
	// Another loopback address is within its own budget.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	if !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		t.Errorf("another address while the first is at its cap: %q", b)
	}
	// Closing the held ones gives their slots back.
	for _, c := range held {
		c.Close()
	}
	held = nil
	ok := false
	for i := 0; i < 50 && !ok; i++ {
		time.Sleep(20 * time.Millisecond)
		ok = fetchOK(addr)
	}
	if !ok {
		t.Error("the first address stays refused after its connections closed")
	}
}

func fetchOK(addr string) bool {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// TestHealthDegraded: what SetHealth adds turns the status and names the
// problems; the answer stays 200.
func TestHealthDegraded(t *testing.T) {
	s, err := New(Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	s.SetHealth(func() ([]string, any) {
		return []string{"disk full"}, map[string]int{"dropped": 3}
	})
	servetest.Run(t, "admin", 10*time.Second, s.Serve)
	status, body := fetch(t, "http://"+s.Addr().String()+"/healthz", "")
	if status != 200 || !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, `"disk full"`) || !strings.Contains(body, `"dropped":3`) {
		t.Errorf("/healthz: HTTP %d %s", status, body)
	}
}

// TestConnCapTakesIdle: a client at its cap with idle keep-alive
// connections (a tool that opens a new one per call) is still served: an
// idle one gives way, a header-less one does not.
func TestConnCapTakesIdle(t *testing.T) {
	s, err := New(Options{Listen: "127.0.0.1:0", MaxConns: 8, MaxConnsPerClient: 3})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "admin", 10*time.Second, s.Serve)
	url := "http://" + s.Addr().String() + "/healthz"
	for i := range 6 {
		tr := &http.Transport{} // a fresh connection each time, left idle
		t.Cleanup(tr.CloseIdleConnections)
		resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Get(url)
		if err != nil {
			t.Fatalf("call %d with %d idle connections open: %v", i, min(i, 3), err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		time.Sleep(20 * time.Millisecond) // the server marks it idle
	}
	if n := s.Refused().Count(refuseConns); n != 0 {
		t.Errorf("%d refused, want 0: idle connections give way", n)
	}
}
