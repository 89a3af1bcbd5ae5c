//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/record"
)

// TestPrometheusScrapesServe runs the real binary in a namespace (full
// DHCP, TFTP, HTTP, the admin listener with a token and JSON logs), a real
// Prometheus (Debian's prometheus) scraping /metrics with the token, and
// real clients (udhcpc, tftp-hpa, curl) in the other namespace. The counters
// Prometheus stored must equal what the clients did; promtool must accept
// /metrics; every admin path must refuse a request without the token; and
// every log line must be JSON, fetch lines keyed by record.Record's names.
func TestPrometheusScrapesServe(t *testing.T) {
	nstest.RequireTool(t, "prometheus", "promtool", "curl", "tftp", "busybox")
	bin := nstest.Binary(t)
	p := nstest.NewPair(t, nstest.Options{})
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + 17
	nstest.RandomFile(t, filepath.Join(img, "kernel.img"), size, 11)
	token := "s3cret-token-for-the-test"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	net3 := strings.TrimSuffix(p.ServerIP.String(), ".1")
	cfg := fmt.Sprintf(`interface: %s
address: %s
root: %s
data: %s
log_format: json
dhcp:
  mode: full
  pool: %s.100-%s.120
admin:
  listen: 127.0.0.1:9069
  token_file: %s
`, p.ServerIf, p.ServerIP, img, filepath.Join(dir, "data"), net3, net3, tokenFile)
	cfgFile := filepath.Join(dir, "pxeperf.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := nstest.Start(t, p.Server, bin, "serve", "--config", cfgFile)
	if !nstest.WaitFor(20*time.Second, func() bool { return strings.Contains(srv.Out.String(), "admin listener serving") }) {
		t.Fatalf("serve did not start:\n%s", srv.Out.String())
	}

	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: pxeperf
    authorization:
      credentials_file: %s
    static_configs:
      - targets: ["127.0.0.1:9069"]
`, tokenFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := nstest.Start(t, p.Server, "prometheus", "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prom"),
		"--web.listen-address=127.0.0.1:9090", "--log.level=warn")
	_ = prom

	// What the clients do.
	nstest.Run(t, p.Client, "busybox", "udhcpc", "-n", "-q", "-f", "-t", "5", "-T", "1", "-i", p.ClientIf, "-s", "/bin/true")
	url := "http://" + p.ServerIP.String() + "/kernel.img"
	for range 3 {
		nstest.Run(t, p.Client, "curl", "-sSf", "-o", "/dev/null", url)
	}
	if out, err := nstest.Output(p.Client, 30*time.Second, "curl", "-sf", "-o", "/dev/null", "http://"+p.ServerIP.String()+"/missing.img"); err == nil {
		t.Fatalf("a missing file was served:\n%s", out)
	}
	for i := range 2 {
		nstest.Run(t, p.Client, "tftp", "-m", "binary", p.ServerIP.String(), "-c", "get", "kernel.img", filepath.Join(dir, fmt.Sprintf("tftp%d.out", i)))
	}

	want := map[string]float64{
		`pxeperf_fetches_total{proto="http",outcome="ok"}`:            3,
		`pxeperf_fetch_bytes_total{proto="http",outcome="ok"}`:        3 * size,
		`pxeperf_fetches_total{proto="http",outcome="not-found"}`:     1,
		`pxeperf_fetches_total{proto="tftp",outcome="ok"}`:            2,
		`pxeperf_fetch_bytes_total{proto="tftp",outcome="ok"}`:        2 * size,
		`pxeperf_fetch_duration_seconds_count{proto="tftp"}`:          2,
		`pxeperf_dhcp_packets_total{type="discover",outcome="offer"}`: 1,
		`pxeperf_dhcp_packets_total{type="request",outcome="ack"}`:    1,
		`pxeperf_dhcp_leases_total{mode="full"}`:                      1,
		`pxeperf_dhcp_leases_in_use`:                                  1,
		`pxeperf_dhcp_pool_size`:                                      21,
		`pxeperf_active_transfers{proto="http"}`:                      0,
	}
	got := map[string]float64{}
	ok := nstest.WaitFor(60*time.Second, func() bool {
		for q, w := range want {
			v, err := promQuery(p.Server, q)
			got[q] = v
			if err != nil || v != w {
				return false
			}
		}
		return true
	})
	if !ok {
		for q, w := range want {
			if got[q] != w {
				t.Errorf("Prometheus: %s = %v, want %v", q, got[q], w)
			}
		}
		t.Logf("prometheus:\n%s", prom.Out.String())
	}
	for _, q := range []string{`go_goroutines`, `process_cpu_seconds_total`, `pxeperf_record_queue_depth`, `pxeperf_malformed_packets_total{proto="dhcp"}`} {
		if _, err := promQuery(p.Server, q); err != nil {
			t.Errorf("Prometheus has no %s: %v", q, err)
		}
	}

	// promtool accepts the exposition.
	if out, err := nstest.Output(p.Server, 30*time.Second, "sh", "-c",
		"curl -sSf -H 'Authorization: Bearer "+token+"' http://127.0.0.1:9069/metrics | promtool check metrics"); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	// The token guards every admin path; with it, each answers.
	for _, path := range []string{"/", "/metrics", "/healthz", "/api/leases", "/api/active", "/api/recent", "/api/fetches",
		"/api/report?table=tftp", "/api/chart/window-offload.svg", "/ui/app.js", "/api/active/stream", "/nope"} {
		code, _ := nstest.Output(p.Server, 10*time.Second, "curl", "-s", "-o", "/dev/null", "-m", "2", "-w", "%{http_code}",
			"http://127.0.0.1:9069"+path)
		if code != "401" {
			t.Errorf("GET %s without the token: HTTP %s, want 401", path, code)
		}
		if path == "/api/active/stream" || path == "/nope" {
			continue
		}
		code, _ = nstest.Output(p.Server, 10*time.Second, "curl", "-s", "-o", "/dev/null", "-m", "5", "-w", "%{http_code}",
			"-H", "Authorization: Bearer "+token, "http://127.0.0.1:9069"+path)
		if code != "200" {
			t.Errorf("GET %s with the token: HTTP %s, want 200", path, code)
		}
	}

	// pxeperf leases and status read the same through the admin API.
	out := nstest.Run(t, p.Server, bin, "leases", "--config", cfgFile, "--format", "json")
	var lv struct {
		Source string `json:"source"`
		Leases []struct {
			Addr string `json:"addr"`
		} `json:"leases"`
	}
	if err := json.Unmarshal([]byte(out), &lv); err != nil || lv.Source != "serve" || len(lv.Leases) != 1 ||
		!strings.HasPrefix(lv.Leases[0].Addr, net3+".") {
		t.Errorf("pxeperf leases --format json = %s (err %v); want one lease from serve", out, err)
	}
	out = nstest.Run(t, p.Server, bin, "status", "--config", cfgFile)
	if !strings.Contains(out, "kernel.img") || !strings.Contains(out, "Leases (1)") {
		t.Errorf("pxeperf status:\n%s", out)
	}

	// JSON logs: every line parses; fetch lines use the record's names.
	tags := map[string]bool{"time": true, "level": true, "msg": true, "svc": true}
	rt := reflect.TypeFor[record.Record]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		tags[name] = true
	}
	fetches, leases := 0, 0
	sc := bufio.NewScanner(strings.NewReader(srv.Out.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Errorf("log line is not JSON: %q: %v", sc.Text(), err)
			continue
		}
		switch m["msg"] {
		case "fetch":
			fetches++
			for k := range m {
				if !tags[k] {
					t.Errorf("fetch log key %q is not a record field: %s", k, sc.Text())
				}
			}
		case "lease":
			leases++
			if m["client_mac"] == nil || m["addr"] == nil {
				t.Errorf("lease line without client_mac/addr: %s", sc.Text())
			}
		}
	}
	if fetches != 6 || leases != 1 {
		t.Errorf("log has %d fetch and %d lease lines, want 6 and 1", fetches, leases)
	}
	if t.Failed() {
		t.Logf("serve:\n%s", srv.Out.String())
	}
}

// promQuery asks the Prometheus in ns for an instant vector's single value.
func promQuery(ns, q string) (float64, error) {
	out, err := nstest.Output(ns, 10*time.Second, "curl", "-sSf", "-G", "http://127.0.0.1:9090/api/v1/query",
		"--data-urlencode", "query="+q)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%d series for %s", len(r.Data.Result), q)
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}
