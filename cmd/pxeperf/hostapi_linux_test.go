//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"golang.org/x/sys/unix"
)

// hostAdmin talks to serve's admin listener inside a namespace, with
// the token in the Authorization header.
type hostAdmin struct {
	t     *testing.T
	base  string
	token string
	c     *http.Client
}

func newHostAdmin(t *testing.T, ns, addr, token string) *hostAdmin {
	tr := &http.Transport{DialContext: nstest.DialContext(ns), MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &hostAdmin{t: t, base: "http://" + addr, token: token, c: &http.Client{Timeout: 10 * time.Second, Transport: tr}}
}

// do sends one request; body "" sends none. It returns the status, the
// ETag header and the body; err only when no answer came.
func (a *hostAdmin) do(method, path, body string, hdr ...string) (int, string, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, r)
	if err != nil {
		return 0, "", nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("ETag"), b, err
}

// must is do that fails the test unless the status is want.
func (a *hostAdmin) must(want int, method, path, body string, hdr ...string) []byte {
	a.t.Helper()
	st, _, b, err := a.do(method, path, body, hdr...)
	if err != nil || st != want {
		a.t.Fatalf("%s %s: %d %v %s, want %d", method, path, st, err, b, want)
	}
	return b
}

// hostAPILab is serve in a namespace pair, with a token, DHCP off and
// the kernels the tests boot in the root.
type hostAPILab struct {
	p     *nstest.Pair
	srv   *nstest.Served
	admin *hostAdmin
	cfg   string
}

func newHostAPILab(t *testing.T) *hostAPILab {
	nstest.RequireTool(t, "curl")
	p := nstest.NewPair(t, nstest.Options{})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "dhcp:\n  mode: off\nadmin:\n  token_file: " + tokenFile + "\n"
	srv := p.Serve(t, yaml, func(root string) {
		for name, size := range map[string]int{"vmlinuz-base": 64 << 10, "vmlinuz-ci": 512 << 10, "initrd-ci": 128 << 10} {
			nstest.RandomFile(t, filepath.Join(root, name), size, uint64(size))
		}
	})
	return &hostAPILab{p: p, srv: srv, admin: newHostAdmin(t, p.Server, srv.Admin, "s3cret-token"),
		cfg: filepath.Join(srv.Dir, "pxeperf.yaml")}
}

// curl fetches url from the board's namespace and returns the body.
func (l *hostAPILab) curl(t *testing.T, url string) string {
	t.Helper()
	return nstest.Run(t, l.p.Client, "curl", "-sSf", "--max-time", "20", url)
}

// A CI job's round over the real binary: PUT a host (its fixed address is
// the board's, so serve knows its MAC by address), see its kernel in the
// generated pxelinux config (TFTP) and iPXE script (HTTP); set a once next
// boot, kill -9 serve, start it again: the next boot is exactly as set;
// the board fetches the kernel: the next boot is consumed and the configs
// fall back to the host's kernel.
func TestHostAPINextBootOnceSurvivesKill(t *testing.T) {
	l := newHostAPILab(t)
	srvIP, board := l.p.ServerIP.String(), l.p.ClientIP.String()
	mac, dash := "52:54:00:31:00:01", "52-54-00-31-00-01"
	if st, _, _, _ := (&hostAdmin{t: t, base: l.admin.base, c: l.admin.c}).do("PUT", "/api/hosts/"+mac, `{"kernel":"x"}`); st != http.StatusUnauthorized {
		t.Fatalf("a write without the token: %d, want 401", st)
	}
	// A script that does not parse does not apply: 400, nothing stored.
	if got := string(l.admin.must(http.StatusBadRequest, "PUT", "/api/hosts/"+mac, `{"name":"board31","script":"#!ipxe\n{{.Kernel"}`)); !strings.Contains(got, "iPXE script template hosts[board31].script") {
		t.Errorf("a broken script's answer: %s", got)
	}
	l.admin.must(http.StatusNotFound, "GET", "/api/hosts/"+mac, "")
	l.admin.must(http.StatusCreated, "PUT", "/api/hosts/"+dash, `{"name":"board31","address":"`+board+`","kernel":"vmlinuz-base"}`)
	pxe := "tftp://" + srvIP + "/pxelinux.cfg/01-" + dash
	if got := l.curl(t, pxe); !strings.Contains(got, "kernel vmlinuz-base") {
		t.Fatalf("pxelinux config over TFTP after PUT:\n%s", got)
	}
	if got := l.curl(t, "http://"+srvIP+"/boot.ipxe"); !strings.Contains(got, "vmlinuz-base") {
		t.Fatalf("iPXE script over HTTP after PUT:\n%s", got)
	}
	set := l.admin.must(http.StatusOK, "PUT", "/api/hosts/"+mac+"/next-boot",
		`{"action":"boot","kernel":"vmlinuz-ci","initrd":"initrd-ci","cmdline":"console=ttyS0 ci=31","once":true}`)
	var entry struct {
		NextBoot json.RawMessage `json:"next_boot"`
	}
	if err := json.Unmarshal(set, &entry); err != nil {
		t.Fatal(err)
	}
	if got := l.curl(t, pxe); !strings.Contains(got, "kernel vmlinuz-ci") || !strings.Contains(got, "ci=31") {
		t.Fatalf("pxelinux config with the next boot:\n%s", got)
	}

	l.srv.Kill() // SIGKILL: no shutdown path runs
	l.srv.Restart(t)
	proc := l.srv.Proc
	after := l.admin.must(http.StatusOK, "GET", "/api/hosts/"+mac+"/next-boot", "")
	if want, got := compactJSON(t, entry.NextBoot), compactJSON(t, after); got != want {
		t.Fatalf("next boot after kill -9 and restart:\n got %s\nwant %s", got, want)
	}
	// The script fetch does not consume it: the kernel's does.
	if got := l.curl(t, "http://"+srvIP+"/boot.ipxe"); !strings.Contains(got, "vmlinuz-ci") {
		t.Fatalf("iPXE script after the restart:\n%s", got)
	}
	out := filepath.Join(t.TempDir(), "k")
	nstest.Run(t, l.p.Client, "curl", "-sSf", "--max-time", "20", "-o", out, "tftp://"+srvIP+"/vmlinuz-ci")
	if !nstest.WaitFor(10*time.Second, func() bool {
		st, _, _, _ := l.admin.do("GET", "/api/hosts/"+mac+"/next-boot", "")
		return st == http.StatusNotFound
	}) {
		t.Fatalf("the once next boot was not consumed by the kernel's fetch:\n%s", proc.Out.String())
	}
	if got := l.curl(t, pxe); !strings.Contains(got, "kernel vmlinuz-base") {
		t.Errorf("pxelinux config after consumption, want the host's kernel:\n%s", got)
	}
	for _, want := range []string{"what=kernel-fetched host=board31 client_mac=" + mac, "what=next-boot-consumed host=board31"} {
		if !strings.Contains(proc.Out.String(), want) {
			t.Errorf("serve's log lacks %q", want)
		}
	}

	// SIGHUP with the same MAC in the file: the run-time entry stays over
	// it; DELETE puts the file's in force, through the same apply path.
	f, err := os.OpenFile(l.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("hosts:\n  - mac: " + mac + "\n    name: fromyaml\n    kernel: vmlinuz-yaml\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Signal(unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !nstest.WaitFor(10*time.Second, func() bool { return strings.Contains(proc.Out.String(), "SIGHUP: reloaded") }) {
		t.Fatalf("no reload after SIGHUP:\n%s", proc.Out.String())
	}
	if got := string(l.admin.must(http.StatusOK, "GET", "/api/hosts/"+mac, "")); !strings.Contains(got, `"source": "api-over-config"`) {
		t.Errorf("after SIGHUP: %s", got)
	}
	if got := l.curl(t, pxe); !strings.Contains(got, "kernel vmlinuz-base") {
		t.Errorf("pxelinux config after SIGHUP, want the run-time entry's kernel:\n%s", got)
	}
	l.admin.must(http.StatusNoContent, "DELETE", "/api/hosts/"+mac, "")
	if got := l.curl(t, pxe); !strings.Contains(got, "kernel vmlinuz-yaml") {
		t.Errorf("pxelinux config after DELETE, want the file's kernel:\n%s", got)
	}
	l.admin.must(http.StatusConflict, "DELETE", "/api/hosts/"+mac, "")
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// twoWriters: two jobs read the same etag and write at once with it as
// If-Match: one gets 200, the other 412 (api/hosts_test.go checks that the
// store then holds the winner's entry).
func twoWriters(t *testing.T, a *hostAdmin, path string) {
	t.Helper()
	_, etag, _, err := a.do("GET", path, "")
	if err != nil || etag == "" {
		t.Fatalf("GET %s: etag %q, %v", path, etag, err)
	}
	statuses := make(chan int, 2)
	for _, k := range []string{"vmlinuz-base", "vmlinuz-ci"} {
		go func() {
			st, _, _, _ := a.do("PUT", path, `{"name":"boards","kernel":"`+k+`"}`, "If-Match", etag)
			statuses <- st
		}()
	}
	got := []int{<-statuses, <-statuses}
	if !(got[0] == 200 && got[1] == 412 || got[0] == 412 && got[1] == 200) {
		t.Fatalf("two writers with one etag: %v, want one 200 and one 412", got)
	}
	// The boards fetch this host's config: put the base kernel back.
	a.must(http.StatusOK, "PUT", path, `{"name":"boards","kernel":"vmlinuz-base"}`)
}

// fetchOnce runs one curl fetch of url in ns, 30 s at most. Its output is
// read to the end (no WaitDelay: on a loaded machine the copy of a
// finished curl's output can lag its exit by more than a second).
func fetchOnce(ctx context.Context, ns, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return nstest.Command(ctx, ns, "curl", "-sSf", "--max-time", "20", "-o", "/dev/null", url).CombinedOutput()
}

// hostStateOf reads GET /api/hosts as MAC -> kernel (effective) of the
// run-time entries.
func hostStateOf(t *testing.T, a *hostAdmin) map[string]string {
	var list struct {
		Hosts []struct {
			MAC    string         `json:"mac"`
			Source string         `json:"source"`
			Host   map[string]any `json:"host"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(a.must(http.StatusOK, "GET", "/api/hosts", ""), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, h := range list.Hosts {
		got[h.MAC] = fmt.Sprint(h.Host["kernel"])
	}
	return got
}

// 200 API writes while 20 boards fetch over HTTP and TFTP (curl): no
// fetch fails, every acknowledged write is in the store (over the API, and
// in hosts.json after a kill -9), and serve's RSS stays bounded.
func TestHostAPIWritesUnderLoad(t *testing.T) {
	l := newHostAPILab(t)
	srvIP := l.p.ServerIP.String()
	l.admin.must(http.StatusCreated, "PUT", "/api/hosts/52:54:00:31:01:00", `{"name":"boards","kernel":"vmlinuz-base"}`)
	twoWriters(t, l.admin, "/api/hosts/52:54:00:31:01:00")
	start, err := l.srv.Usage()
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop()
	type result struct{ ok, failed int }
	results := make(chan result, 20)
	for i := range 20 {
		url := "http://" + srvIP + "/vmlinuz-ci"
		if i%2 == 1 {
			url = "tftp://" + srvIP + "/pxelinux.cfg/01-52-54-00-31-01-00"
		}
		go func() {
			var r result
			for n := 0; n < 500 && ctx.Err() == nil; n++ {
				if out, err := fetchOnce(ctx, l.p.Client, url); err != nil {
					err = fmt.Errorf("%w: %s", err, out)
					if ctx.Err() == nil {
						r.failed++
						t.Logf("fetch %s: %v", url, err)
					}
					continue
				}
				r.ok++
			}
			results <- r
		}()
	}
	acked := map[string]string{"52:54:00:31:01:00": "vmlinuz-base"}
	peak := start
	began := time.Now()
	for i := range 200 {
		mac := fmt.Sprintf("52:54:00:31:02:%02x", i%40)
		kernel := fmt.Sprintf("vmlinuz-%d", i)
		st, _, body, err := l.admin.do("PUT", "/api/hosts/"+mac, `{"name":"w`+fmt.Sprint(i%40)+`","kernel":"`+kernel+`"}`)
		if err != nil || (st != http.StatusOK && st != http.StatusCreated) {
			t.Fatalf("write %d: %d %v %s", i, st, err, body)
		}
		acked[mac] = kernel
		if i%20 == 0 {
			if u, err := l.srv.Usage(); err == nil {
				peak = peak.Max(u)
			}
		}
	}
	writes := time.Since(began)
	// Every board goes on fetching while the last writes apply, then stops.
	time.Sleep(500 * time.Millisecond)
	stop()
	var total result
	for range 20 {
		r := <-results
		total.ok += r.ok
		total.failed += r.failed
	}
	if u, err := l.srv.Usage(); err == nil {
		peak = peak.Max(u)
	}
	t.Logf("200 writes in %v (%.1f/s) while 20 boards fetched %d files over HTTP and TFTP (%d failed); RSS %d MiB at start, peak %d MiB; fds %d -> %d",
		writes.Round(time.Millisecond), 200/writes.Seconds(), total.ok, total.failed, start.RSS>>20, peak.RSS>>20, start.FDs, peak.FDs)
	if total.failed > 0 || total.ok < 20 {
		t.Errorf("fetches: %d ok, %d failed; want none failed", total.ok, total.failed)
	}
	if got := hostStateOf(t, l.admin); fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Errorf("the store after the writes differs from what was acknowledged:\n got %v\nwant %v", got, acked)
	}
	if peak.RSS > start.RSS+96<<20 {
		t.Errorf("RSS grew from %d MiB to %d MiB under 200 writes", start.RSS>>20, peak.RSS>>20)
	}
	l.srv.Kill()
	l.srv.Restart(t)
	if got := hostStateOf(t, l.admin); fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Errorf("after kill -9 and a restart the store differs from what was acknowledged:\n got %v\nwant %v", got, acked)
	}
}
