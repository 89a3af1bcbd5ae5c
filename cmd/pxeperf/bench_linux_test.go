//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// The bench runs on a netlab testbed (network namespaces: Linux only).

// TestBenchCommand runs a tiny sweep through the CLI and reads it back with
// pxeperf report.
func TestBenchCommand(t *testing.T) {
	nstest.RequireRoot(t)
	data := t.TempDir()
	// The config names the server and site every bench record carries.
	cfg := filepath.Join(t.TempDir(), "pxeperf.yaml")
	if err := os.WriteFile(cfg, []byte("server:\n  name: bench-lab\n  site: bay-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runBenchCmd(t, "--window", "4K,64K", "--offload", "off", "--rate", "100mbit", "--size", "4MiB", "--data", data, "--config", cfg)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	for _, want := range []string{"Throughput by client window", "RX csum off", "Sweep by point", "100mbit", "Model fit", "netem"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "[2/2]") {
		t.Errorf("no progress lines on stderr:\n%s", errOut)
	}
	rep, _, err := runReportCmd(t, "--table", "fetches", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(rep, "bench.img") != 2 {
		t.Errorf("report shows not two bench fetches:\n%s", rep)
	}
	rep, _, err = runReportCmd(t, "--table", "servers", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep, "bench-lab") || !strings.Contains(rep, "bay-2") {
		t.Errorf("the bench records do not carry server.name and server.site from the config:\n%s", rep)
	}
}

// TestBenchTFTPCommand runs a tiny TFTP sweep through the CLI, prints the
// blksize x windowsize table and reads it back with pxeperf report.
func TestBenchTFTPCommand(t *testing.T) {
	nstest.RequireRoot(t)
	data := t.TempDir()
	out, errOut, err := runBenchCmd(t, "--proto", "tftp", "--blksize", "512,1468", "--windowsize", "1,16", "--rate", "100mbit", "--size", "1MiB", "--data", data)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	for _, want := range []string{"TFTP throughput by blksize and windowsize", "win 16", "TFTP sweep by point", "Datagrams", "netem"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "[4/4]") || !strings.Contains(errOut, "4 TFTP fetches") {
		t.Errorf("no progress lines on stderr:\n%s", errOut)
	}
	rep, _, err := runReportCmd(t, "--table", "tftp", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep, "1468") || !strings.Contains(rep, "win 16") || !strings.Contains(rep, "512") {
		t.Errorf("report --table tftp:\n%s", rep)
	}
}
