package main

import (
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

// TestBenchTFTPFlagErrors: TFTP flags in the wrong place fail before
// anything is built.
func TestBenchTFTPFlagErrors(t *testing.T) {
	checkBadFlags(t, map[string]badFlags{
		"blksize without tftp":  {args: []string{"--blksize", "1468"}, want: []string{"--blksize", "--proto tftp"}},
		"window with tftp":      {args: []string{"--preset", "tftp", "--window", "4K"}, want: []string{"--window", "--windowsize"}},
		"blksize over the MTU":  {args: []string{"--proto", "tftp", "--blksize", "1500"}, want: []string{"--blksize 1500", "--mtu 1500"}},
		"windowsize not a list": {args: []string{"--proto", "tftp", "--windowsize", "lots"}, want: []string{"--windowsize", "1..64"}},
	})
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
