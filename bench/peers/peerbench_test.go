//go:build linux

package peers

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/measure"
)

// perfdhcp 2.2's summary, cut to what ParsePerfdhcp reads.
const perfdhcpOut = `Running: perfdhcp -4 -r 1000 -R 1000 -p 3 -l 10.200.0.2 10.200.0.1
Scenario: basic.
***Rate statistics***
Rate: 525.25 4-way exchanges/second, expected rate: 1000

***Statistics for: DISCOVER-OFFER***
sent packets: 2999
received packets: 1908
drops: 1091

***Statistics for: REQUEST-ACK***
sent packets: 1908
received packets: 1576
drops: 332
`

func TestParsePerfdhcp(t *testing.T) {
	tests := map[string]struct {
		out  string
		want Perf
		loss float64
	}{
		"summary":        {perfdhcpOut, Perf{Rate: 525.25, Discovers: 2999, Offers: 1908, Requests: 1908, Acks: 1576}, 1 - 1576.0/2999},
		"nothing sent":   {"Running: perfdhcp\n", Perf{}, 1},
		"rate only":      {"Rate: 12.5 4-way\n", Perf{Rate: 12.5}, 1},
		"one stage only": {"sent packets: 10\nreceived packets: 9\n", Perf{}, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ParsePerfdhcp(tc.out)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ParsePerfdhcp (-want +got):\n%s", d)
			}
			if l := got.Loss(); l != tc.loss {
				t.Errorf("Loss = %v, want %v", l, tc.loss)
			}
		})
	}
}

func TestMedianRatiosRotate(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []float64
		want float64
	}{
		"empty": {nil, 0}, "odd": {[]float64{3, 1, 2}, 2}, "even": {[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := measure.Median(tc.in); got != tc.want {
			t.Errorf("%s: measure.Median(%v) = %v, want %v", name, tc.in, got, tc.want)
		}
	}
	// A round without a peer figure (0) or without both figures is left out.
	if d := cmp.Diff([]float64{2, 0.5}, Ratios([]float64{4, 1, 9, 7}, []float64{2, 2, 0})); d != "" {
		t.Errorf("Ratios (-want +got):\n%s", d)
	}
	names := []string{"a", "b", "c"}
	for r, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if d := cmp.Diff(want, Rotate(names, r)); d != "" {
			t.Errorf("Rotate round %d (-want +got):\n%s", r, d)
		}
	}
}

// TestMeterCountsExitedChildren: a server's CPU meter keeps the time of a
// child that exited unwaited-for (in.tftpd ignores SIGCHLD and forks one
// per transfer), which /proc no longer shows anywhere.
func TestMeterCountsExitedChildren(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a cgroup")
	}
	s := Start(t, "", "burner", "sh", "-c",
		`trap '' CHLD; sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done' & sleep 60`)
	if !s.cpu.Cgroup() {
		t.Skip("no writable cgroup (cpuacct v1 or v2) here: the /proc fallback cannot see such children")
	}
	pgid := s.Proc.Cmd.Process.Pid
	// Done when the busy child is gone: the group is the sleeping shell
	// (and its sleep) only.
	if !nstest.WaitFor(60*time.Second, func() bool { return len(strings.Split(GroupPIDs(pgid), ",")) <= 2 && s.CPU(t) > 0.05 }) {
		t.Fatalf("the busy child did not finish: group %s, meter %.3f s", GroupPIDs(pgid), s.CPU(t))
	}
	time.Sleep(100 * time.Millisecond)
	if got, live := s.CPU(t), GroupCPU(pgid); got < 0.05 || got < live {
		t.Fatalf("meter %.3f s, live group %.3f s: want the exited child's time in the meter", got, live)
	}
}

// TestSignP: the one-sided sign test's tail, against values worked out by
// hand (sum of n choose k over 2^n).
func TestSignP(t *testing.T) {
	tests := []struct {
		behind, n int
		want      float64
	}{
		{5, 5, 1.0 / 32},
		{4, 5, 6.0 / 32},
		{0, 5, 1},
		{9, 15, 9949.0 / 32768},
		{12, 15, 576.0 / 32768},
		{1, 1, 0.5},
	}
	for _, tt := range tests {
		if got := SignP(tt.behind, tt.n); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("SignP(%d, %d) = %g, want %g", tt.behind, tt.n, got, tt.want)
		}
	}
}

// TestVerdict: a median that meets the target is yes; one that misses is
// par unless enough rounds miss to rule out noise.
func TestVerdict(t *testing.T) {
	tests := []struct {
		rs     []float64
		target float64
		atMost bool
		want   string
	}{
		{[]float64{1.1, 0.9, 1.2}, 1, false, "yes"},
		{[]float64{0.9, 0.95, 1.2, 0.8, 1.1}, 1, false, "par (behind in 3 of 5, p 0.50)"},
		{[]float64{0.9, 0.95, 0.97, 0.8, 0.99}, 1, false, "NO (behind in 5 of 5, p 0.031)"},
		{[]float64{1.0, 1.0, 1.0}, 1, false, "yes"},
		{[]float64{1.2, 1.3, 1.15, 1.12, 1.25}, 1.1, true, "NO (behind in 5 of 5, p 0.031)"},
		{[]float64{1.2, 1.3, 1.0, 1.05, 1.25}, 1.1, true, "par (behind in 3 of 5, p 0.50)"},
		{[]float64{0.9, 1.3}, 1.1, true, "yes"},
		{nil, 1, false, "n/a"},
	}
	for _, tt := range tests {
		if got := Verdict(tt.rs, tt.target, tt.atMost); got != tt.want {
			t.Errorf("Verdict(%v, %g, %v) = %q, want %q", tt.rs, tt.target, tt.atMost, got, tt.want)
		}
	}
}

// TestKnobsListed keeps doc.go's list of knobs whole: every PXEPERF_BENCH*
// name a Go file of the tree mentions is in it.
func TestKnobsListed(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`PXEPERF_BENCH(_[A-Z0-9_]+)?`)
	listed := name.FindAllString(string(doc), -1)
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "../.." {
			if err == nil {
				err = filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, k := range name.FindAllString(string(b), -1) {
			if !slices.Contains(listed, k) {
				t.Errorf("%s: %s is not in bench/peers/doc.go's list of knobs", path, k)
				listed = append(listed, k) // once per name
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
