//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/notify"
)

// TestEventsServe runs the built binary with full DHCP in a namespace and
// a webhook receiver listening beside it; a real DHCP client (busybox
// udhcpc) takes a lease from the other namespace. Its dhcp-ack milestone
// must reach all three ways: a POST to the webhook (with its token), an
// `event: milestone` on the admin event stream read by a real HTTP client,
// and a record of kind event that /api/fetches lists with kind=event and
// mac=, and leaves out without.
func TestEventsServe(t *testing.T) {
	nstest.RequireTool(t, "busybox")
	p, srv, hook := eventsServe(t)
	net3 := strings.TrimSuffix(p.ServerIP.String(), ".1")
	stream := openStream(t, p.Server, srv.Admin)
	mac := leaseOnce(t, p)

	var got notify.Message
	if !nstest.WaitFor(20*time.Second, func() bool { got = hook.first(); return got.What != "" }) {
		t.Fatalf("the webhook got no milestone; serve:\n%s", nstest.Tail(srv.Out.String(), 20))
	}
	if got.What != "dhcp-ack" || got.MAC != mac || !strings.HasPrefix(got.Detail["addr"], net3+".") || hook.auth() != "Bearer hook-token" {
		t.Errorf("webhook took %+v (auth %q), want dhcp-ack of %s", got, hook.auth(), mac)
	}
	select {
	case m := <-stream:
		if m.What != "dhcp-ack" || m.MAC != mac {
			t.Errorf("stream milestone %+v", m)
		}
	case <-time.After(20 * time.Second):
		t.Error("no milestone on /api/active/stream")
	}
	var events []nstest.Record
	if !nstest.WaitFor(20*time.Second, func() bool {
		events, _ = srv.Fetches(url.Values{"kind": {"event"}, "mac": {strings.ToUpper(strings.ReplaceAll(mac, ":", "-"))}})
		return len(events) > 0
	}) {
		t.Fatal("GET /api/fetches?kind=event&mac= lists no milestone")
	}
	if e := events[len(events)-1]; e.File != "dhcp-ack" || e.Labels["addr"] != got.Detail["addr"] {
		t.Errorf("event record %+v", e)
	}
	if all, err := srv.Fetches(url.Values{}); err != nil || len(all) != 0 {
		t.Errorf("GET /api/fetches lists %d records (%v), want the milestones left out", len(all), err)
	}
	if n, err := srv.Metric("pxeperf_events_webhook_sent_total"); err != nil || n < 1 {
		t.Errorf("pxeperf_events_webhook_sent_total %v %v", n, err)
	}
}

// eventsServe starts the built binary with full DHCP in a new pair's
// server namespace and the events webhook pointing at a receiver beside it.
func eventsServe(t *testing.T) (*nstest.Pair, *nstest.Served, *receiver) {
	t.Helper()
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	hook := startReceiver(t, p.Server)
	net3 := strings.TrimSuffix(p.ServerIP.String(), ".1")
	srv := p.Serve(t, fmt.Sprintf(`dhcp:
  mode: full
  pool: %s.100-%s.120
events:
  webhook_url: http://%s/hook
  webhook_token_file: %s
`, net3, net3, hook.addr, hook.tokenFile), nil)
	return p, srv, hook
}

// leaseOnce takes a lease with busybox udhcpc in the client namespace and
// returns the client's MAC.
func leaseOnce(t *testing.T, p *nstest.Pair) string {
	t.Helper()
	mac := strings.TrimSpace(nstest.Run(t, p.Client, "cat", "/sys/class/net/"+p.ClientIf+"/address"))
	nstest.Run(t, p.Client, "busybox", "udhcpc", "-n", "-q", "-f", "-t", "5", "-T", "1", "-i", p.ClientIf, "-s", "/bin/true")
	return mac
}

// TestEventsDashboardInChromium: the dashboard's Milestones list, in a real
// headless Chromium, shows the milestones stored before the page opened
// (read from the records of kind event) and each new one as the stream
// brings it: a board's first lease, then its second.
func TestEventsDashboardInChromium(t *testing.T) {
	nstest.RequireTool(t, "busybox")
	chrome := findChromium(t)
	p, srv, hook := eventsServe(t)
	leaseOnce(t, p)
	if !nstest.WaitFor(20*time.Second, func() bool { return hook.first().What != "" }) {
		t.Fatal("no milestone from the first lease")
	}
	if !nstest.WaitFor(20*time.Second, func() bool {
		recs, _ := srv.Fetches(url.Values{"kind": {"event"}})
		return len(recs) > 0
	}) {
		t.Fatal("the first lease's milestone is not stored")
	}
	ctx := openDashboard(t, chrome, t.TempDir(), "http://"+forward(t, p.Server, srv.Admin)+"/")
	eval := evaluator(t, ctx)
	const acks = `document.querySelectorAll('#milestones tr[data-what="dhcp-ack"]').length`
	if !waitEval(eval, acks, 20*time.Second) {
		t.Fatal("the stored dhcp-ack is not in the dashboard's Milestones")
	}
	// A second board (the client's MAC changed): DHCP records a lease of
	// the same client and offer at most once a minute, so a second lease
	// of the first would make no event.
	nstest.Run(t, p.Client, "ip", "link", "set", "dev", p.ClientIf, "address", "52:54:00:e7:00:02")
	leaseOnce(t, p)
	const second = `document.querySelectorAll('#milestones tr[data-what="dhcp-ack"] a[data-client="52:54:00:e7:00:02"]').length`
	if !waitEval(eval, second, 20*time.Second) {
		t.Errorf("the second board's dhcp-ack did not reach the page (%d dhcp-ack rows)", eval(acks))
	}
	if eval(`document.getElementById('milestones-empty').hidden ? 1 : 0`) != 1 {
		t.Error("the Milestones list still says it is empty")
	}
}

// forward listens on the host's loopback and carries each connection to
// addr inside ns, for a browser in the host's namespace.
func forward(t *testing.T, ns, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dial := nstest.DialContext(ns)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := dial(context.Background(), "tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// receiver is a webhook receiver listening inside a namespace.
type receiver struct {
	addr, tokenFile string
	mu              sync.Mutex
	got             []notify.Message
	authz           string
}

func (r *receiver) first() notify.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return notify.Message{}
	}
	return r.got[0]
}

func (r *receiver) auth() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.authz
}

// startReceiver listens on loopback in ns (where serve runs) and keeps
// each milestone POSTed to /hook.
func startReceiver(t *testing.T, ns string) *receiver {
	t.Helper()
	r := &receiver{tokenFile: writeFile(t, "hook.token", "hook-token\n")}
	var ln net.Listener
	if err := nstest.Do(ns, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var m notify.Message
		if req.URL.Path != "/hook" || json.Unmarshal(b, &m) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got, r.authz = append(r.got, m), req.Header.Get("Authorization")
		r.mu.Unlock()
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return r
}

// openStream reads the admin event stream from inside ns and hands over
// its milestones.
func openStream(t *testing.T, ns, admin string) <-chan notify.Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &http.Client{Transport: &http.Transport{DialContext: nstest.DialContext(ns)}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/api/active/stream", nil)
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	out := make(chan notify.Message, 16)
	go func() {
		br := bufio.NewReader(resp.Body)
		var name string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			switch line = strings.TrimSpace(line); {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "milestone":
				var m notify.Message
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) == nil {
					select {
					case out <- m:
					default:
					}
				}
			}
		}
	}()
	// The answer's headers come with the first event, written after the
	// handler subscribed: every milestone from now on is streamed.
	return out
}

// writeFile writes a file into a temp folder of the test's.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
