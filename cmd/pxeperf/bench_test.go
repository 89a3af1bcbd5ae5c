package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

func runBenchCmd(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	return runCmdSplit(t, append([]string{"bench"}, args...)...)
}

// TestBenchFlagErrors: bad sweeps fail before anything is built, naming
// the flag and the forms it takes.
func TestBenchFlagErrors(t *testing.T) {
	checkBadFlags(t, map[string]badFlags{
		"window":         {args: []string{"--window", "4K..64K"}, want: []string{"--window", "lo..hi/step"}},
		"rate":           {args: []string{"--rate", "fast"}, want: []string{"--rate", "100mbit"}},
		"unknown preset": {args: []string{"--preset", "nosuch"}, want: []string{"--preset", "gpxe", "tftp"}},
		"proto":          {args: []string{"--proto", "sctp"}, want: []string{"--proto", "http"}},
		"format":         {args: []string{"--format", "xml"}, want: []string{"--format"}},
		"two at once":    {args: []string{"--mtu", "1", "--offload", "sideways"}, want: []string{"--mtu", "--offload"}},
	})
}

// badFlags is a bench command line that must fail before anything is
// built, with an error containing each of want.
type badFlags struct {
	args []string
	want []string
}

func checkBadFlags(t *testing.T, tests map[string]badFlags) {
	t.Helper()
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := runBenchCmd(t, append(tt.args, "--data", t.TempDir())...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

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
