//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/record"
)

// TestReportOfServedFetches runs the real binary: serve (HTTP only) in a
// namespace, curl fetches an image twice from the other one with the
// board's offload as a URL label, then the records come back through the
// /api/ endpoints of the running server's admin listener (loopback in the
// server's namespace; the boards' side cannot reach it, and the boot port
// has no /api/) and through `pxeperf report` read while serve still holds
// the store.
func TestReportOfServedFetches(t *testing.T) {
	nstest.RequireTool(t, "curl")
	bin := nstest.Binary(t)
	p := nstest.NewPair(t, nstest.Options{})
	dir := t.TempDir()
	root, data := filepath.Join(dir, "images"), filepath.Join(dir, "data")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	nstest.RandomFile(t, filepath.Join(root, "big.img"), 64<<20, 7)

	srv := nstest.Start(t, p.Server, bin, "serve", "--iface", p.ServerIf, "--dhcp", "off", "--tftp-addr", "off",
		"--http-addr", ":80", "--root", root, "--data", data, "--log-level", "debug")
	if !nstest.WaitFor(15*time.Second, func() bool { return strings.Contains(srv.Out.String(), "pxeperf serving") }) {
		t.Fatalf("serve did not start:\n%s", srv.Out.String())
	}
	base := "http://" + p.ServerIP.String()
	admin := "http://127.0.0.1:9069" // the default admin.listen
	for _, off := range []string{"off", "on"} {
		// Paced so the fetch lasts over one sampling interval.
		nstest.Run(t, p.Client, "curl", "-sSf", "--limit-rate", "40M", "-o", "/dev/null", base+"/big.img?label.rx_offload="+off)
	}

	// Records are written behind the fetch; wait for both.
	var recs []record.Record
	if !nstest.WaitFor(15*time.Second, func() bool {
		out, err := nstest.Output(p.Server, 10*time.Second, "curl", "-sSf", admin+"/api/fetches")
		recs = nil
		return err == nil && json.Unmarshal([]byte(out), &recs) == nil && len(recs) == 2
	}) {
		t.Fatalf("/api/fetches never listed the 2 fetches: %+v", recs)
	}
	for _, r := range recs {
		if r.Outcome != "ok" || r.Bytes != 64<<20 || r.Mbps <= 0 || r.Labels["rx_offload"] == "" || r.ClientIP != p.ClientIP.String() {
			t.Errorf("record %+v", r)
		}
	}
	out := nstest.Run(t, p.Server, "curl", "-sSf", admin+"/api/report?table=window-offload&label=rx_offload=off")
	var tb struct {
		Table string `json:"table"`
		Rows  []struct {
			Window uint32                    `json:"window"`
			Cells  map[string]map[string]any `json:"cells"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &tb); err != nil || len(tb.Rows) != 1 || tb.Rows[0].Window == 0 ||
		tb.Rows[0].Cells["off"] == nil || tb.Rows[0].Cells["on"] != nil {
		t.Errorf("/api/report window-offload with rx_offload=off (%v):\n%s", err, out)
	}

	// A board cannot read the records: not on the boot port, not on the
	// admin listener (loopback).
	if code, _ := nstest.Output(p.Client, 10*time.Second, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", base+"/api/fetches"); code != "404" {
		t.Errorf("/api/fetches on the boot port: HTTP %s, want 404", code)
	}
	if _, err := nstest.Output(p.Client, 10*time.Second, "curl", "-sSf", "--max-time", "3", "http://"+p.ServerIP.String()+":9069/api/fetches"); err == nil {
		t.Errorf("the admin listener answered a board")
	}

	// The CLI reads the store while serve holds it.
	rep, err := exec.Command(bin, "report", "--data", data, "--table", "window-offload").CombinedOutput()
	if err != nil || !strings.Contains(string(rep), "RX csum off") || strings.Count(string(rep), "\n") < 6 {
		t.Errorf("report --table window-offload: %v\n%s", err, rep)
	}
	t.Logf("pxeperf report --table window-offload:\n%s", rep)
	id := strconv.FormatInt(recs[0].ID, 10)
	rep, err = exec.Command(bin, "report", "--data", data, "--intervals", id).CombinedOutput()
	if err != nil || !strings.Contains(string(rep), "[ ID] Interval") || !strings.Contains(string(rep), "sender") {
		t.Errorf("report --intervals %s: %v\n%s", id, err, rep)
	}
	t.Logf("pxeperf report --intervals %s:\n%s", id, rep)
}
