package netlab

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseName(t *testing.T) {
	type want struct {
		PID int
		OK  bool
	}
	tests := map[string]struct {
		name string
		want want
	}{
		"server":          {nsName(4242, 0, Server), want{4242, true}},
		"client":          {nsName(7, 12, Client), want{7, true}},
		"other prefix":    {"pxs12345", want{}},
		"no side":         {"pxl-12-0", want{}},
		"unknown side":    {"pxl-12-0-router", want{}},
		"pid not number":  {"pxl-x-0-server", want{}},
		"zero pid":        {"pxl-0-0-server", want{}},
		"negative n":      {"pxl-12--1-server", want{}},
		"leading zero":    {"pxl-012-0-server", want{}},
		"extra part":      {"pxl-12-0-server-x", want{}},
		"prefix only":     {"pxl-", want{}},
		"signed pid":      {"pxl-+12-0-server", want{}},
		"trailing spaces": {"pxl-12-0-server ", want{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pid, ok := parseName(tc.name)
			if diff := cmp.Diff(tc.want, want{pid, ok}); diff != "" {
				t.Errorf("parseName(%q) (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}

func TestTBFSize(t *testing.T) {
	type want struct {
		Burst, Limit uint32
		Err          bool
	}
	tests := map[string]struct {
		rate uint64
		mtu  int
		want want
	}{
		// rate/HZ dominates: 125e6/250 = 500000; + 125e6*20ms = 2.5e6.
		"1gbit":                        {1_000_000_000, 1500, want{500_000, 3_000_000, false}},
		"100mbit":                      {100_000_000, 1500, want{65536, 65536 + 250_000, false}},
		"10mbit":                       {10_000_000, 9000, want{65536, 65536 + 25_000, false}},
		"jumbo64k mtu beats the floor": {10_000_000, 65535, want{65549, 65549 + 25_000, false}},
		"10gbit":                       {10_000_000_000, 1500, want{5_000_000, 30_000_000, false}},
		"too slow":                     {MinRate - 1, 1500, want{Err: true}},
		"too fast":                     {MaxRate + 1, 1500, want{Err: true}},
		"min rate":                     {MinRate, 1500, want{65536, 65536 + 160, false}},
		"max rate":                     {MaxRate, 1500, want{50_000_000, 300_000_000, false}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b, l, err := tbfSize(tc.rate, tc.mtu)
			if diff := cmp.Diff(tc.want, want{b, l, err != nil}); diff != "" {
				t.Errorf("tbfSize(%d, %d) (-want +got):\n%s", tc.rate, tc.mtu, diff)
			}
		})
	}
}
