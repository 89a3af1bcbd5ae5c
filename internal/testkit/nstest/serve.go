//go:build linux

package nstest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Served is the built binary's `pxeperf serve` in a test's namespace, for
// tests that attack or load the real process and watch what it holds.
type Served struct {
	*Proc
	NS   string
	Dir  string // the test's folder: pxeperf.yaml, images/, data/
	Root string // Dir/images, served by TFTP and HTTP
	Data string // Dir/data: records and leases
	// Admin is the admin listener's address inside NS ("" when the config
	// or args turn it off).
	Admin string
	args  []string // serve's command line, for Restart
}

// Serve writes yaml as the config (root and data in a temp folder of the
// test's, admin on 127.0.0.1:9069 unless yaml or args say otherwise),
// starts `pxeperf serve --config CFG args...` in ns and waits (20 s at
// most) until it logs that it serves. before, when not nil, runs first
// with the root folder created, to put images in it.
func Serve(t testing.TB, ns, yaml string, before func(root string), args ...string) *Served {
	t.Helper()
	dir := t.TempDir()
	s := &Served{NS: ns, Dir: dir, Root: filepath.Join(dir, "images"), Data: filepath.Join(dir, "data"), Admin: "127.0.0.1:9069"}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(s.Root)
	}
	cfg := "root: " + s.Root + "\ndata: " + s.Data + "\n" + yaml
	if err := os.WriteFile(filepath.Join(dir, "pxeperf.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if a == "--admin-addr" && i+1 < len(args) {
			s.Admin = args[i+1]
		}
	}
	if s.Admin == "off" {
		s.Admin = ""
	}
	s.args = append([]string{"serve", "--config", filepath.Join(dir, "pxeperf.yaml")}, args...)
	s.start(t)
	return s
}

// start runs serve with s's command line and waits (20 s at most) until it
// logs that it serves.
func (s *Served) start(t testing.TB) {
	t.Helper()
	s.Proc = Start(t, s.NS, Binary(t), s.args...)
	s.Proc.Cmd.Dir = s.Dir
	if !WaitFor(20*time.Second, func() bool { return strings.Contains(s.Out.String(), "pxeperf serving") }) {
		t.Fatalf("serve did not start:\n%s", s.Out.String())
	}
}

// Restart kills serve with SIGKILL (no shutdown path runs) and starts it
// again on the same config and data folder: what a crash and a restart
// leave of the state serve keeps on disk.
func (s *Served) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.start(t)
}

// Serve starts `pxeperf serve` (Serve) in the pair's server namespace,
// bound to its interface and address (--iface, --addr) before args.
func (p *Pair) Serve(t testing.TB, yaml string, before func(root string), args ...string) *Served {
	t.Helper()
	return Serve(t, p.Server, yaml, before, append([]string{"--iface", p.ServerIf, "--addr", p.ServerIP.String()}, args...)...)
}

// PID is the serving process (`ip netns exec` execs it in place).
func (s *Served) PID() int { return s.Cmd.Process.Pid }

// Usage is what the process holds, read from /proc.
type Usage struct {
	RSS     int64 // bytes resident
	FDs     int   // open file descriptors
	Threads int
}

// Usage reads the process's resident memory, descriptors and threads.
func (s *Served) Usage() (Usage, error) { return ProcUsage(s.PID()) }

// ProcUsage reads what process pid holds from /proc/PID/status and
// /proc/PID/fd.
func ProcUsage(pid int) (Usage, error) {
	var u Usage
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			u.RSS = kb << 10
		case "Threads:":
			u.Threads, _ = strconv.Atoi(f[1])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.FDs = len(fds)
	return u, nil
}

// Max is the larger of u and v in each field: a peak over samples.
func (u Usage) Max(v Usage) Usage {
	return Usage{RSS: max(u.RSS, v.RSS), FDs: max(u.FDs, v.FDs), Threads: max(u.Threads, v.Threads)}
}

// over says whether u exceeds bound in a field bound sets (zero: unchecked).
func (u Usage) over(bound Usage) bool {
	return (bound.RSS > 0 && u.RSS > bound.RSS) || (bound.FDs > 0 && u.FDs > bound.FDs) || (bound.Threads > 0 && u.Threads > bound.Threads)
}

// Get fetches path from the admin listener (inside NS) and returns the body.
func (s *Served) Get(path string) (string, error) {
	if s.Admin == "" {
		return "", fmt.Errorf("nstest: serve runs without an admin listener")
	}
	// A fresh connection each call, closed after: a poll every 100 ms
	// must not pile idle keep-alives up against the admin listener's cap.
	tr := &http.Transport{DialContext: DialContext(s.NS), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	resp, err := c.Get("http://" + s.Admin + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("nstest: GET %s: %s", path, resp.Status)
	}
	return string(b), nil
}

// Metric sums every sample of the Prometheus metric name on /metrics whose
// labels contain each of match (`proto="tftp"`); -1 when none.
func (s *Served) Metric(name string, match ...string) (float64, error) {
	body, err := s.Get("/metrics")
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if !ok || err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	if !found {
		return -1, nil
	}
	return sum, nil
}

// Record is a fetch record as the admin API and `pxeperf report --format
// json` give it (record.Record's JSON, which nstest cannot import: record's
// dependencies' tests import nstest): the fields the tests read.
type Record struct {
	ID        int64             `json:"id"`
	Time      time.Time         `json:"time"`
	Proto     string            `json:"proto"`
	ClientMAC string            `json:"client_mac"`
	ClientIP  string            `json:"client_ip"`
	Host      string            `json:"host"`
	File      string            `json:"file"`
	Bytes     int64             `json:"bytes"`
	Duration  time.Duration     `json:"duration_ns"`
	Mbps      float64           `json:"mbps"`
	Outcome   string            `json:"outcome"`
	Labels    map[string]string `json:"labels"`
}

// Fetches pages /api/fetches?q (1000 records a page) to its end and
// returns every record, in the API's order.
func (s *Served) Fetches(q url.Values) ([]Record, error) {
	var all []Record
	q = maps.Clone(q)
	q.Set("limit", "1000")
	for range 1000 {
		body, err := s.Get("/api/fetches?" + q.Encode())
		if err != nil {
			return nil, err
		}
		var page []Record
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			return nil, fmt.Errorf("/api/fetches: %v: %.200s", err, body)
		}
		all = append(all, page...)
		if len(page) < 1000 {
			return all, nil
		}
		last := page[len(page)-1]
		q.Set("before", strconv.FormatInt(last.Time.UnixNano(), 10)+"."+strconv.FormatInt(last.ID, 10))
	}
	return nil, fmt.Errorf("/api/fetches?%s: more than 1000 pages", q.Encode())
}

// Goroutines is go_goroutines from /metrics.
func (s *Served) Goroutines() (int, error) {
	v, err := s.Metric("go_goroutines")
	return int(v), err
}

// Within polls Usage every 100 ms until ctx ends, then fails t unless the
// highest values seen stay within max (zero fields unchecked), and returns
// them. Run it beside a flood.
func (s *Served) Within(ctx context.Context, t testing.TB, max Usage) Usage {
	t.Helper()
	var peak Usage
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if u, err := s.Usage(); err == nil {
			peak = peak.Max(u)
		}
		select {
		case <-ctx.Done():
			if peak.over(max) {
				t.Errorf("serve held more than its bound: peak RSS %d MiB, %d fds, %d threads; bound %d MiB, %d fds, %d threads",
					peak.RSS>>20, peak.FDs, peak.Threads, max.RSS>>20, max.FDs, max.Threads)
			}
			return peak
		case <-tick.C:
		}
	}
}

// Healthy is a condition for WaitFor: base's /healthz answers 200 to c
// (serve is up and ready).
func Healthy(c *http.Client, base string) func() bool {
	return func() bool {
		resp, err := c.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// Health is the admin listener's /healthz (and the boot port's), decoded:
// the fields the tests read.
type Health struct {
	Status   string   `json:"status"`
	Problems []string `json:"problems"`
	Active   int64    `json:"active"` // HTTP fetches in flight
	Records  struct {
		Store           string            `json:"store"`
		Pending         int               `json:"pending"`
		Backlog         int64             `json:"journal_backlog"`
		JournalBytes    int64             `json:"journal_bytes"`
		JournalMaxBytes int64             `json:"journal_max_bytes"`
		Dropped         int64             `json:"dropped"`
		DroppedBy       map[string]uint64 `json:"dropped_by"`
		DiskFull        bool              `json:"disk_full"`
		DataFreeBytes   int64             `json:"data_free_bytes"`
	} `json:"records"`
}

// Health reads /healthz from the admin listener.
func (s *Served) Health() (Health, error) {
	var h Health
	body, err := s.Get("/healthz")
	if err != nil {
		return h, fmt.Errorf("/healthz: %w", err)
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		return h, fmt.Errorf("/healthz: %w: %s", err, body)
	}
	return h, nil
}
