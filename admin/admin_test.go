package admin

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/servetest"
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
