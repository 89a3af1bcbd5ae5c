package main

import (
	"strings"
	"testing"
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
