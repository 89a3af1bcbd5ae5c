package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
)

func hostsServer(t *testing.T) (*httptest.Server, *hosts.Store) {
	t.Helper()
	cfg, err := configs.Parse("lab.yaml", []byte("hosts:\n  - mac: 52:54:00:00:00:01\n    name: yaml1\n    kernel: yk\n    address: 10.0.0.10\n"), configs.Default())
	if err != nil {
		t.Fatal(err)
	}
	cfg.File = "lab.yaml"
	st, err := hosts.Open(hosts.Options{Path: filepath.Join(t.TempDir(), hosts.FileName), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHosts(st, nil))
	t.Cleanup(srv.Close)
	return srv, st
}

type answer struct {
	status int
	etag   string
	body   map[string]any
	raw    string
}

func call(t *testing.T, srv *httptest.Server, method, path, ctype, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, etag: resp.Header.Get("ETag"), raw: string(b)}
	_ = json.Unmarshal(b, &a.body)
	return a
}

const js = "application/json"

// Every status the host API answers, with the error's message, field and
// fix where it is an error.
func TestHostsAPIStatuses(t *testing.T) {
	srv, _ := hostsServer(t)
	m := "/api/hosts/52-54-00-00-00-02"
	tests := []struct {
		name, method, path, ctype, body string
		hdr                             []string
		status                          int
		want                            string // in the raw body
	}{
		{"list", "GET", "/api/hosts", "", "", nil, 200, `"source": "config"`},
		{"get config host", "GET", "/api/hosts/525400000001", "", "", nil, 200, `"name": "yaml1"`},
		{"get unknown", "GET", m, "", "", nil, 404, `"fix": "PUT /api/hosts/52:54:00:00:00:02 to create it"`},
		{"bad mac", "GET", "/api/hosts/zz", "", "", nil, 400, `"field": "mac"`},
		{"create", "PUT", m, js, `{"name":"two","kernel":"k2"}`, nil, 201, `"source": "api"`},
		{"replace", "PUT", m, js, `{"mac":"52:54:00:00:00:02","name":"two","kernel":"k3"}`, nil, 200, `"kernel": "k3"`},
		{"create only", "PUT", m, js, `{"kernel":"k"}`, []string{"If-None-Match", "*"}, 412, "If-None-Match: *"},
		{"stale if-match", "PUT", m, js, `{"kernel":"k"}`, []string{"If-Match", `"0000"`}, 412, "GET it again and retry"},
		{"unknown key", "PUT", m, js, `{"kernl":"k"}`, nil, 400, `"field": "kernl"`},
		{"bad value", "PUT", m, js, `{"address":"ten"}`, nil, 400, `"error": "address: \"ten\" is not an IP address; write e.g. 192.168.50.1"`},
		{"dup address", "PUT", m, js, `{"address":"10.0.0.10"}`, nil, 400, "is also the address of hosts[0]"},
		{"other mac", "PUT", m, js, `{"mac":"52:54:00:00:00:03"}`, nil, 400, `"field": "mac"`},
		{"bad json", "PUT", m, js, `{"kernel":`, nil, 400, "not valid JSON"},
		{"not json", "PUT", m, "text/plain", `{}`, nil, 415, "Content-Type: application/json"},
		{"too big", "PUT", m, js, `{"cmdline":"` + strings.Repeat("x", MaxHostBody) + `"}`, nil, 413, "over 64 KiB"},
		{"patch", "PATCH", m, "application/merge-patch+json", `{"cmdline":"quiet"}`, nil, 200, `"cmdline": "quiet"`},
		{"patch unknown", "PATCH", "/api/hosts/52:54:00:00:00:09", js, `{}`, nil, 404, "PUT /api/hosts/52:54:00:00:00:09"},
		{"next boot", "PUT", m + "/next-boot", js, `{"action":"boot","kernel":"nk","once":true}`, nil, 200, `"once": true`},
		{"get next boot", "GET", m + "/next-boot", "", "", nil, 200, `"kernel": "nk"`},
		{"bad next boot", "PUT", m + "/next-boot", js, `{"action":"disk"}`, nil, 400, `"field": "action"`},
		{"next boot no host", "PUT", "/api/hosts/52:54:00:00:00:09/next-boot", js, `{"kernel":"k"}`, nil, 404, "`pxeperf hosts set 52:54:00:00:00:09`"},
		{"clear next boot", "DELETE", m + "/next-boot", "", "", nil, 204, ""},
		{"no next boot", "GET", m + "/next-boot", "", "", nil, 404, "no next boot"},
		{"delete config host", "DELETE", "/api/hosts/52:54:00:00:00:01", "", "", nil, 409, `the host comes from lab.yaml; edit it there`},
		{"delete", "DELETE", m, "", "", nil, 204, ""},
		{"delete again", "DELETE", m, "", "", nil, 404, "no run-time entry"},
		{"post", "POST", m, js, `{}`, nil, 405, "is not an API call"},
	}
	for _, tc := range tests {
		a := call(t, srv, tc.method, tc.path, tc.ctype, tc.body, tc.hdr...)
		if a.status != tc.status || !strings.Contains(a.raw, tc.want) {
			t.Errorf("%s: %s %s = %d %s, want %d with %q", tc.name, tc.method, tc.path, a.status, a.raw, tc.status, tc.want)
		}
		if a.status >= 400 && (a.body["error"] == nil || a.body["error"] == "") {
			t.Errorf("%s: error answer without an error: %s", tc.name, a.raw)
		}
	}
}

// ETag on answers, 304 for a GET that has it, If-Match guarding a write.
func TestHostsAPIETags(t *testing.T) {
	srv, _ := hostsServer(t)
	p := "/api/hosts/52:54:00:00:00:02"
	a := call(t, srv, "PUT", p, js, `{"kernel":"k"}`)
	if a.status != 201 || a.etag == "" || a.etag != a.body["etag"] {
		t.Fatalf("create: %d etag %q body %s", a.status, a.etag, a.raw)
	}
	if g := call(t, srv, "GET", p, "", "", "If-None-Match", a.etag); g.status != http.StatusNotModified {
		t.Errorf("GET with the current etag: %d, want 304", g.status)
	}
	b := call(t, srv, "PUT", p, js, `{"kernel":"k2"}`, "If-Match", a.etag)
	if b.status != 200 || b.etag == a.etag {
		t.Fatalf("replace with If-Match: %d etag %q", b.status, b.etag)
	}
	if g := call(t, srv, "GET", p, "", "", "If-None-Match", a.etag); g.status != 200 || g.etag != b.etag {
		t.Errorf("GET with an old etag: %d %q, want 200 with %q", g.status, g.etag, b.etag)
	}
	if d := call(t, srv, "DELETE", p, "", "", "If-Match", a.etag); d.status != 412 || d.etag != b.etag {
		t.Errorf("DELETE with a stale etag: %d, etag %q (want 412 with the current %q)", d.status, d.etag, b.etag)
	}
}

// Two writers that read the same etag and write at once: exactly one
// wins, the other gets 412; the store holds the winner's entry.
func TestHostsAPIConcurrentWriters(t *testing.T) {
	srv, st := hostsServer(t)
	p := "/api/hosts/52:54:00:00:00:02"
	call(t, srv, "PUT", p, js, `{"kernel":"k0"}`)
	for round := 0; round < 20; round++ {
		etag := call(t, srv, "GET", p, "", "").etag
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				req, _ := http.NewRequest("PUT", srv.URL+p, strings.NewReader(`{"kernel":"w`+string(rune('a'+i))+`"}`))
				req.Header.Set("Content-Type", js)
				req.Header.Set("If-Match", etag)
				if resp, err := srv.Client().Do(req); err == nil {
					statuses[i] = resp.StatusCode
					resp.Body.Close()
				}
			}()
		}
		close(start)
		wg.Wait()
		won := -1
		for i, s := range statuses {
			if s == 200 {
				won = i
			}
		}
		if !(statuses[0] == 200 && statuses[1] == 412 || statuses[0] == 412 && statuses[1] == 200) {
			t.Fatalf("round %d: statuses %v, want one 200 and one 412", round, statuses)
		}
		mac, _ := hosts.ParseMAC("52:54:00:00:00:02")
		if e, _ := st.Get(mac); e.Host.Kernel != "w"+string(rune('a'+won)) {
			t.Fatalf("round %d: the store holds %q, not the winner's", round, e.Host.Kernel)
		}
	}
}
