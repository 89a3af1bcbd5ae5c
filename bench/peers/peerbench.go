//go:build linux

package peers

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/measure"
)

// Server is one server process under test with its CPU meter.
type Server struct {
	Name string
	Proc *nstest.Proc
	cpu  *Meter
}

// CPU is the user+system CPU seconds the server (all its processes and
// threads, exited ones too where the meter is a cgroup) used so far.
func (s *Server) CPU(t testing.TB) float64 { return s.cpu.Seconds(t) }

// Meter reads the CPU time of a set of processes: a cgroup v1 cpuacct (or
// v2) group made for it when the kernel lets us, which counts every process
// and thread the server ever ran (in.tftpd forks a child per transfer and
// ignores SIGCHLD, so /proc never shows their time), else the live members
// of the process group from /proc/PID/stat (utime+stime+cutime+cstime).
type Meter struct {
	dir  string // cgroup folder, "" for the /proc fallback
	v2   bool
	pgid int
}

var meterSeq atomic.Int32

// newMeter makes a cgroup for a server about to start, or returns a
// fallback meter that is bound to its process group later.
func newMeter(t testing.TB, name string) *Meter {
	base := fmt.Sprintf("pxeperf-peer-%d-%d-%s", os.Getpid(), meterSeq.Add(1), strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name)))
	for _, c := range []struct {
		root string
		v2   bool
	}{{"/sys/fs/cgroup/cpuacct", false}, {"/sys/fs/cgroup", true}, {"/sys/fs/cgroup/unified", true}} {
		if c.v2 {
			if _, err := os.Stat(filepath.Join(c.root, "cgroup.subtree_control")); err != nil {
				continue
			}
		}
		dir := filepath.Join(c.root, base)
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		m := &Meter{dir: dir, v2: c.v2}
		if _, err := m.read(); err != nil {
			_ = os.Remove(dir)
			continue
		}
		t.Cleanup(func() {
			// The group can be removed once its processes are gone
			// (nstest kills them in an earlier-registered cleanup, which
			// runs later: wait a little).
			nstest.WaitFor(5*time.Second, func() bool { return os.Remove(dir) == nil })
		})
		return m
	}
	return &Meter{}
}

func (m *Meter) read() (float64, error) {
	if m.v2 {
		b, err := os.ReadFile(filepath.Join(m.dir, "cpu.stat"))
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				us, err := strconv.ParseFloat(v, 64)
				return us / 1e6, err
			}
		}
		return 0, fmt.Errorf("no usage_usec in %s/cpu.stat", m.dir)
	}
	b, err := os.ReadFile(filepath.Join(m.dir, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return ns / 1e9, err
}

// Seconds is the CPU time so far.
func (m *Meter) Seconds(t testing.TB) float64 {
	t.Helper()
	if m.dir != "" {
		s, err := m.read()
		if err != nil {
			t.Fatalf("peers: CPU of %s: %v", m.dir, err)
		}
		return s
	}
	return GroupCPU(m.pgid)
}

// Cgroup says how CPU is measured, for the table's notes.
func (m *Meter) Cgroup() bool { return m.dir != "" }

// Start runs a server in namespace ns under a CPU meter of its own: the
// shell that execs it (through ip netns exec) first joins the meter's
// cgroup, so every process it forks is counted from the start. Its pid is
// the server's: each step execs the next.
func Start(t testing.TB, ns, name, prog string, args ...string) *Server {
	t.Helper()
	m := newMeter(t, name)
	var proc *nstest.Proc
	if m.dir != "" {
		// Join outside the namespace: ip netns exec mounts a sysfs of
		// the namespace's own, without the cgroup folders.
		script := fmt.Sprintf(`echo $$ > %s/cgroup.procs && exec "$@"`, m.dir)
		cmd := append([]string{"-c", script, "sh"}, prog)
		if ns != "" {
			cmd = append([]string{"-c", script, "sh", "ip", "netns", "exec", ns}, prog)
		}
		proc = nstest.Start(t, "", "sh", append(cmd, args...)...)
	} else {
		proc = nstest.Start(t, ns, prog, args...)
	}
	m.pgid = proc.Cmd.Process.Pid
	return &Server{Name: name, Proc: proc, cpu: m}
}

// GroupPIDs lists the processes of process group pgid, comma-separated
// (for perf -p and strace -p).
func GroupPIDs(pgid int) string {
	var pids []string
	forGroup(pgid, func(pid string, _ []string) { pids = append(pids, pid) })
	return strings.Join(pids, ",")
}

// GroupCPU is the user+system CPU seconds of every live process in process
// group pgid, with the time of the children each has waited for.
func GroupCPU(pgid int) float64 {
	var ticks float64
	forGroup(pgid, func(_ string, f []string) {
		// utime, stime, cutime, cstime: fields 14-17 of proc(5).
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseFloat(f[i], 64)
			ticks += v
		}
	})
	return ticks / clockTicks
}

// clockTicks is USER_HZ on Linux.
const clockTicks = 100

// forGroup calls fn with the pid and the /proc/PID/stat fields after the
// command name (state is 0, pgrp 2) of every process in group pgid.
func forGroup(pgid int, fn func(pid string, f []string)) {
	ents, _ := os.ReadDir("/proc")
	want := strconv.Itoa(pgid)
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 14 && f[2] == want {
			fn(e.Name(), f)
		}
	}
}

// ProcCPU is utime and stime, in seconds, of one process (all its threads,
// exited ones too).
func ProcCPU(pid int) (user, system float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return u / clockTicks, s / clockTicks, nil
}

// Ratios are a/b for each round where both exist and b > 0.
func Ratios(a, b []float64) []float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return r
}

// SignP is the one-sided sign test: the chance that at least behind of n
// rounds go against pxeperf when each round is a fair coin (no real
// difference, only noise).
func SignP(behind, n int) float64 {
	if n <= 0 || behind <= 0 {
		return 1
	}
	p, c := 0.0, 1.0 // c: n choose k, from k = 0
	for k := 0; k <= n; k++ {
		if k >= behind {
			p += c
		}
		c = c * float64(n-k) / float64(k+1)
	}
	return p / math.Pow(2, float64(n))
}

// Verdict judges same-round ratios rs (pxeperf over its peer) against a
// target ratio (at least target; at most, when atMost): "yes" when their
// median meets it; "par" when it does not but the rounds do not show
// pxeperf behind (fewer of them miss the target than a one-sided sign
// test needs at the 5 % level: on a shared 2-core machine a median a few
// percent off is often that); "NO" when they do. A round exactly at the
// target counts as met.
func Verdict(rs []float64, target float64, atMost bool) string {
	if len(rs) == 0 {
		return "n/a"
	}
	behind := 0
	for _, r := range rs {
		if atMost && r > target || !atMost && r < target {
			behind++
		}
	}
	m := measure.Median(rs)
	if atMost && m <= target || !atMost && m >= target {
		return "yes"
	}
	p := SignP(behind, len(rs))
	if p >= 0.05 {
		return fmt.Sprintf("par (behind in %d of %d, p %.2f)", behind, len(rs), p)
	}
	return fmt.Sprintf("NO (behind in %d of %d, p %.3f)", behind, len(rs), p)
}

// Rotate is names in the order of round r: each round starts one further
// on, so every server runs first, in the middle and last alike.
func Rotate[T any](names []T, r int) []T {
	out := make([]T, 0, len(names))
	for i := range names {
		out = append(out, names[(i+r)%len(names)])
	}
	return out
}
