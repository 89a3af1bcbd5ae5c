//go:build linux

package hostile

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// adminOpen is the admin listener on every address of the server's
// namespace without a token (a lab that reaches it from its own network).
const adminOpen = "dhcp:\n  mode: off\ntftp:\n  enabled: false\nadmin:\n  listen: 0.0.0.0:9069\n"

// headerless opens n TCP connections from the client side to the admin
// listener (it must listen on the server's address: adminOpen), from the
// client's address and one more, sends nothing on them
// and holds them until ctx ends (issue 27 row 4: 5000 such connections
// were all accepted, each an fd and a goroutine).
func headerless(n int) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		second := l.P.ClientIP.Next().Next().Next()
		if out, err := nstest.Output(l.P.Client, 10*time.Second, "ip", "addr", "add", second.String()+"/24", "dev", l.P.ClientIf); err != nil &&
			!strings.Contains(out, "File exists") { // a second run in the soak
			t.Errorf("adding a second client address: %v: %s", err, out)
			return
		}
		addr := netip.AddrPortFrom(l.P.ServerIP, 9069).String()
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for i := 0; i < n && ctx.Err() == nil; i++ {
			src := l.P.ClientIP
			if i%2 == 1 {
				src = second
			}
			c, err := l.dialFrom(ctx, net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}, addr)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("header-less flood: connection %d: %v", i, err)
				}
				break
			}
			held = append(held, c)
		}
		t.Logf("header-less flood: %d connections opened", len(held))
		<-ctx.Done()
	}
}

// TestAdminHeaderlessConns: 4000 connections that never send a request,
// from two addresses, while the lab's own status call (loopback) is still
// answered within 1 s and the process holds a bounded number of fds and
// goroutines (admin.max_conns 256, admin.max_conns_per_client 16: each
// connection past them is closed at once).
func TestAdminHeaderlessConns(t *testing.T) {
	l := newLab(t, nstest.Options{}, adminOpen, nil)
	siege(t, l, siegeOpts{Flood: headerless(4000), For: 6 * time.Second, Warm: time.Second, Every: time.Second,
		Boards: []board{{"status (/healthz on the admin listener)", func(context.Context) error {
			_, err := l.S.Get("/healthz")
			return err
		}}},
		Bound: nstest.Usage{FDs: 400}, MaxGoroutines: 600})
	if n, _ := l.S.Metric("pxeperf_refusals_total", `proto="admin"`, `reason="too many connections"`); n < 3000 {
		t.Errorf("refusals counted: %v, want the connections past the caps (at least 3000 of 4000)", n)
	}
}

// TestAdminHostCheck: without a token the admin listener answers only its
// addresses, localhost and its names; a page's name pointed at it (DNS
// rebinding) gets 421 with advice, and nothing else of the API.
func TestAdminHostCheck(t *testing.T) {
	l := newLab(t, nstest.Options{}, adminOpen+"  allowed_hosts: [pxeperf.lab.example]\n", nil)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: nstest.DialContext(l.P.Client)}}
	url := "http://" + netip.AddrPortFrom(l.P.ServerIP, 9069).String() + "/api/active"
	for host, want := range map[string]int{
		"":                          200,
		"localhost:9069":            200,
		"pxeperf.lab.example:9069":  200,
		"attacker.example:9069":     421,
		"127.0.0.1.nip.io:9069":     421,
		"pxeperf.lab.example.evil.": 421,
	} {
		req, _ := http.NewRequest("GET", url, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("Host %q: %v", host, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: HTTP %d, want %d: %.200s", host, resp.StatusCode, want, b)
		}
		if want == 421 && (strings.Contains(string(b), "transfers") || !strings.Contains(string(b), "admin.allowed_hosts")) {
			t.Errorf("Host %q: the refusal leaks the API or lacks advice: %.300s", host, b)
		}
	}
}

// TestHTTPAPIToken: with http.api the record API on the boot port takes
// the admin token as the admin listener does, and the start-up warning
// says whether the API there is open.
func TestHTTPAPIToken(t *testing.T) {
	tokDir := t.TempDir()
	tokFile := filepath.Join(tokDir, "token")
	if err := os.WriteFile(tokFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, withToken := range []bool{false, true} {
		yaml := "dhcp:\n  mode: off\ntftp:\n  enabled: false\nhttp:\n  api: true\n"
		if withToken {
			yaml += "admin:\n  token_file: " + tokFile + "\n"
		}
		l := newLab(t, nstest.Options{}, yaml, nil)
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: nstest.DialContext(l.P.Client)}}
		get := func(auth string) int {
			req, _ := http.NewRequest("GET", "http://"+l.P.ServerIP.String()+"/api/fetches", nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		out := l.S.Out.String()
		if !withToken {
			if st := get(""); st == http.StatusUnauthorized {
				t.Errorf("no token configured: /api/ on the boot port answered 401")
			}
			if !strings.Contains(out, "WITHOUT A TOKEN") {
				t.Errorf("no token: the start-up warning does not say the API on the boot port is open:\n%s", nstest.Tail(out, 2000))
			}
			continue
		}
		if st := get(""); st != http.StatusUnauthorized {
			t.Errorf("token configured: /api/ on the boot port without it: HTTP %d, want 401", st)
		}
		if st := get("Bearer s3cret"); st == http.StatusUnauthorized {
			t.Errorf("token configured: /api/ on the boot port with it: HTTP %d", st)
		}
		if strings.Contains(out, "WITHOUT A TOKEN") {
			t.Errorf("token configured, yet the warning says the API is open")
		}
	}
}
