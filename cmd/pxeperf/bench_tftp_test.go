package main

import "testing"

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
