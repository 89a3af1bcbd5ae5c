package peers

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The benchmark tests' environment knobs, read here and nowhere else, so
// one list (doc.go, "Knobs") names them all and TestKnobsListed keeps that
// list whole.

// Enabled reports PXEPERF_BENCH=1: the benchmark tests run.
func Enabled() bool { return os.Getenv("PXEPERF_BENCH") == "1" }

// Require skips t with why (what to set, how long it takes) unless
// PXEPERF_BENCH=1: every benchmark test's gate.
func Require(t testing.TB, why string) {
	t.Helper()
	if !Enabled() {
		t.Skip(why)
	}
}

// Quick reports PXEPERF_BENCH_QUICK=1: smaller files, fewer rates.
func Quick() bool { return os.Getenv("PXEPERF_BENCH_QUICK") == "1" }

// Env is knob name's value ("" when unset): a PXEPERF_BENCH_* knob that
// takes a word, a path or a list.
func Env(name string) string { return os.Getenv(name) }

// EnvInt is the positive integer in environment variable name, else def.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Rounds is PXEPERF_BENCH_ROUNDS, the interleaved rounds a benchmark
// runs, else def.
func Rounds(def int) int { return EnvInt("PXEPERF_BENCH_ROUNDS", def) }

// EnvInts is the space-separated integers in name, else those of def.
func EnvInts(t testing.TB, name, def string) []int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %q is not a number (want space-separated integers, e.g. %q)", name, f, def)
		}
		out = append(out, n)
	}
	return out
}

// Only reports whether the comma-separated list in knob name keeps item:
// true when the knob is unset (every case runs) or lists item.
func Only(name, item string) bool {
	v := os.Getenv(name)
	return v == "" || slices.Contains(strings.Split(v, ","), item)
}

// LogLevel is the --log-level of the pxeperf servers the labs start:
// PXEPERF_BENCH_LOG (info logs every fetch with its TFTP window, losses
// and RTT), else warn.
func LogLevel() string {
	if l := os.Getenv("PXEPERF_BENCH_LOG"); l != "" {
		return l
	}
	return "warn"
}
