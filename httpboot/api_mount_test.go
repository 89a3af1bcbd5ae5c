package httpboot

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAPIMount: with Options.API set, every /api/ path (any method) goes to
// it and is not recorded as a fetch; other paths are still files.
func TestAPIMount(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"method":"`+r.Method+`","path":"`+r.URL.Path+`"}`)
	})
	e := newTestEnv(t, envOpts{
		files:  map[string][]byte{"kernel": []byte("k"), "api/shadowed": []byte("file")},
		before: func(s *Server) { s.opt.API = api },
	})
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/api/fetches", `{"method":"GET","path":"/api/fetches"}`},
		{"POST", "/api/report", `{"method":"POST","path":"/api/report"}`},
		{"GET", "/api/shadowed", `{"method":"GET","path":"/api/shadowed"}`},
		{"GET", "/kernel", "k"},
	} {
		req, _ := http.NewRequest(c.method, e.url+c.path, strings.NewReader(""))
		resp, err := rawClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != c.want {
			t.Errorf("%s %s = %q, want %q", c.method, c.path, body, c.want)
		}
	}
	f := e.waitFetches(t, 1)
	if len(f) != 1 || f[0].File != "kernel" && f[0].File != "/kernel" {
		t.Errorf("fetch events %+v: want only the kernel", f)
	}
}
