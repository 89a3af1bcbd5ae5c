//go:build linux

package dhcp

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

// TestVersusKea runs pxeperf (full mode, the real binary, every lease
// fsynced before its ACK) and kea-dhcp4 (memfile, which never fsyncs) in one
// alternating run against Kea's perfdhcp with 1000 clients, and prints per
// server, as medians over the rounds and as same-round ratios pxeperf/kea:
//
//   - the highest offered rate with < 1% loss (loss = 1 - ACKs/DISCOVERs),
//   - the peak completed 4-way exchanges/s at any offered rate,
//   - server CPU per exchange at 1000/s offered (utime+stime of
//     /proc/PID/stat over the run, divided by the ACKs perfdhcp received),
//   - syscalls per ACK at 100/s (strace -c -f on the server).
//
// It asserts nothing about the figures. Opt in with PXEPERF_BENCH=1 (about
// 3 minutes a round). PXEPERF_BENCH_RATES (default "1000 2000 3000 4000
// 5000 6000 8000 12000"), PXEPERF_BENCH_ROUNDS (3) and PXEPERF_BENCH_PERIOD
// (seconds per perfdhcp run, 6) shape it; PXEPERF_BENCH_PERF=DIR records
// `perf record -g` of each server's 1000/s run there, and
// PXEPERF_BENCH_SERVERS="pxeperf" runs one server only;
// PXEPERF_BENCH_BEFORE=BINARY adds another pxeperf binary (built from
// main, say) to the same alternating run, as "before".
//
// perfdhcp acts as a relay (giaddr = its address), so replies are unicast
// to it on port 67: this measures the servers, not broadcast handling.
func TestVersusKea(t *testing.T) {
	if os.Getenv("PXEPERF_BENCH") != "1" {
		t.Skip("benchmark: set PXEPERF_BENCH=1 to run pxeperf and kea side by side")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "perfdhcp", "kea-dhcp4", "strace")
	rates := intsEnv(t, "PXEPERF_BENCH_RATES", "1000 2000 3000 4000 5000 6000 8000 12000")
	rounds := intsEnv(t, "PXEPERF_BENCH_ROUNDS", "3")[0]
	period := intsEnv(t, "PXEPERF_BENCH_PERIOD", "6")[0]

	p := nstest.NewPair(t, nstest.Options{})
	// A /22 beside the pair's /24, so that 1000 clients fit the pool.
	const srvIP, cliIP, subnet, pool = "10.200.0.1", "10.200.0.2", "10.200.0.0/22", "10.200.0.10-10.200.3.250"
	nstest.Run(t, p.Server, "ip", "addr", "add", srvIP+"/22", "dev", p.ServerIf)
	nstest.Run(t, p.Client, "ip", "addr", "add", cliIP+"/22", "dev", p.ClientIf)
	bin := nstest.Binary(t)

	perf := func(rate, seconds int) perfResult {
		out, err := nstest.Output(p.Client, time.Duration(seconds+30)*time.Second, "perfdhcp", "-4",
			"-r", strconv.Itoa(rate), "-R", "1000", "-p", strconv.Itoa(seconds), "-l", cliIP, srvIP)
		r := parsePerfdhcp(out)
		if err != nil && r.discovers == 0 {
			t.Fatalf("perfdhcp: %v\n%s", err, out)
		}
		return r
	}

	startPxeperf := func(bin string) *nstest.Proc {
		data, root := t.TempDir(), t.TempDir()
		proc := nstest.Start(t, p.Server, bin, "serve", "--dhcp", "full", "--pool", pool, "--iface", p.ServerIf,
			"--addr", srvIP, "--root", root, "--data", data, "--http-addr", "off", "--tftp-addr", "off",
			"--log-level", "warn")
		if !nstest.WaitFor(20*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(data, JournalName))
			return err == nil
		}) {
			t.Fatalf("pxeperf did not start:\n%s", proc.Out.String())
		}
		return proc
	}

	type result struct {
		maxOK   int     // highest offered rate with < 1% loss
		peak    float64 // completed exchanges/s
		cpuUS   float64 // CPU us per exchange at 1000/s
		sys     map[string]float64
		perRate map[int]perfResult
	}
	start := map[string]func() *nstest.Proc{
		"pxeperf": func() *nstest.Proc { return startPxeperf(bin) },
		"kea": func() *nstest.Proc {
			dir := t.TempDir()
			cfg := fmt.Sprintf(`{"Dhcp4": {
  "interfaces-config": {"interfaces": [%q], "dhcp-socket-type": "udp"},
  "lease-database": {"type": "memfile", "persist": true, "lfc-interval": 0, "name": %q},
  "valid-lifetime": 3600,
  "subnet4": [{"id": 1, "subnet": %q, "pools": [{"pool": %q}]}],
  "loggers": [{"name": "kea-dhcp4", "severity": "WARN", "output_options": [{"output": "stderr"}]}]
}}`, p.ServerIf, filepath.Join(dir, "leases4.csv"), subnet, strings.Replace(pool, "-", " - ", 1))
			path := filepath.Join(dir, "kea.json")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			proc := nstest.Start(t, p.Server, "env", "KEA_PIDFILE_DIR="+dir, "KEA_LOCKFILE_DIR="+dir,
				"kea-dhcp4", "-c", path)
			time.Sleep(time.Second)
			return proc
		},
	}
	names := []string{"pxeperf", "kea"}
	if before := os.Getenv("PXEPERF_BENCH_BEFORE"); before != "" {
		// Another pxeperf binary (say, built from main) in the same run.
		start["before"] = func() *nstest.Proc { return startPxeperf(before) }
		names = []string{"pxeperf", "before", "kea"}
	}
	if only := os.Getenv("PXEPERF_BENCH_SERVERS"); only != "" {
		names = strings.Fields(only) // for profiling one of them
	}
	results := map[string][]result{}
	for round := range rounds {
		order := names
		if round%2 == 1 {
			order = slices.Clone(names)
			slices.Reverse(order)
		}
		for _, name := range order {
			proc := start[name]()
			pid := proc.Cmd.Process.Pid
			res := result{perRate: map[int]perfResult{}}
			for _, rate := range rates {
				u0, s0 := cpuTicks(t, pid)
				var prof *exec.Cmd
				if dir := os.Getenv("PXEPERF_BENCH_PERF"); dir != "" && rate == 1000 {
					prof = exec.Command("perf", "record", "-g", "-o", filepath.Join(dir, fmt.Sprintf("%s-%d.data", name, round+1)), "-p", strconv.Itoa(pid))
					if err := prof.Start(); err != nil {
						t.Fatal(err)
					}
				}
				r := perf(rate, period)
				if prof != nil {
					_ = prof.Process.Signal(syscall.SIGINT)
					_ = prof.Wait()
				}
				u1, s1 := cpuTicks(t, pid)
				ticks := u1 - u0 + s1 - s0
				if rate == 1000 && r.acks > 0 {
					res.cpuUS = float64(ticks) * 1e6 / float64(clockTicks) / float64(r.acks)
				}
				res.perRate[rate] = r
				if r.loss() < 0.01 && rate > res.maxOK {
					res.maxOK = rate
				}
				res.peak = max(res.peak, r.rate)
				perAck := func(ticks int64) float64 { return float64(ticks) * 1e6 / clockTicks / float64(max(1, r.acks)) }
				t.Logf("round %d %-8s offered %5d/s: %8.0f exchanges/s, loss %5.2f%%, cpu %4.0f us/exchange (user %.0f, system %.0f)",
					round+1, name, rate, r.rate, 100*r.loss(), perAck(ticks), perAck(u1-u0), perAck(s1-s0))
			}
			res.sys = straceRun(t, pid, func() int { return perf(100, period).acks })
			t.Logf("round %d %-8s syscalls/ACK at 100/s: %v", round+1, name, res.sys)
			proc.Kill()
			results[name] = append(results[name], res)
		}
	}

	// Medians, and same-round ratios pxeperf/kea.
	med := func(f func(result) float64, name string) float64 {
		var v []float64
		for _, r := range results[name] {
			v = append(v, f(r))
		}
		return median(v)
	}
	ratio := func(f func(result) float64, name string) float64 {
		var v []float64
		for i := range results["kea"] {
			if k := f(results["kea"][i]); k > 0 && i < len(results[name]) {
				v = append(v, f(results[name][i])/k)
			}
		}
		return median(v)
	}
	var others []string // the pxeperf binaries, in table order
	for _, n := range []string{"pxeperf", "before"} {
		if len(results[n]) > 0 {
			others = append(others, n)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pxeperf vs kea-dhcp4 %s (memfile), perfdhcp -R 1000, %d rounds alternating, %ds per run; medians; X/kea = median of same-round ratios\n", keaVersion(), rounds, period)
	fmt.Fprintf(&b, "%-44s", "")
	for _, n := range append(slices.Clone(others), "kea") {
		fmt.Fprintf(&b, " %10s", n)
	}
	for _, n := range others {
		fmt.Fprintf(&b, " %10s", n+"/kea")
	}
	b.WriteString("\n")
	row := func(label string, f func(result) float64, format string) {
		fmt.Fprintf(&b, "%-44s", label)
		for _, n := range append(slices.Clone(others), "kea") {
			fmt.Fprintf(&b, " %10s", fmt.Sprintf(format, med(f, n)))
		}
		for _, n := range others {
			fmt.Fprintf(&b, " %9.2fx", ratio(f, n))
		}
		b.WriteString("\n")
	}
	row("highest offered rate with < 1% loss (/s)", func(r result) float64 { return float64(r.maxOK) }, "%.0f")
	row("peak completed exchanges/s (any loss)", func(r result) float64 { return r.peak }, "%.0f")
	row("server CPU per exchange at 1000/s (us)", func(r result) float64 { return r.cpuUS }, "%.0f")
	for _, sc := range []string{"write", "pwrite64", "writev", "fsync", "fdatasync", "ftruncate", "sendmsg", "sendto", "recvfrom", "recvmsg", "futex", "epoll_pwait", "nanosleep", "total"} {
		row("syscalls per ACK at 100/s: "+sc, func(r result) float64 { return r.sys[sc] }, "%.2f")
	}
	fmt.Fprintf(&b, "by offered rate, medians: loss %% / completed exchanges/s\n")
	for _, rate := range rates {
		fmt.Fprintf(&b, "  %6d/s", rate)
		for _, n := range append(slices.Clone(others), "kea") {
			fmt.Fprintf(&b, "   %s %5.2f%% %6.0f/s", n,
				med(func(r result) float64 { return 100 * r.perRate[rate].loss() }, n),
				med(func(r result) float64 { return r.perRate[rate].rate }, n))
		}
		b.WriteString("\n")
	}
	fmt.Print(b.String())
}

// perfResult is what one perfdhcp run reports.
type perfResult struct {
	rate             float64 // completed 4-way exchanges per second
	discovers, acks  int     // DISCOVERs sent, ACKs received
	requests, offers int
}

// loss is the share of DISCOVERs that did not end in an ACK.
func (r perfResult) loss() float64 {
	if r.discovers == 0 {
		return 1
	}
	return 1 - float64(r.acks)/float64(r.discovers)
}

var (
	perfRate = regexp.MustCompile(`(?m)^Rate: ([0-9.]+)`)
	perfSent = regexp.MustCompile(`(?m)^sent packets: ([0-9]+)`)
	perfRecv = regexp.MustCompile(`(?m)^received packets: ([0-9]+)`)
)

func parsePerfdhcp(out string) perfResult {
	var r perfResult
	if m := perfRate.FindStringSubmatch(out); m != nil {
		r.rate, _ = strconv.ParseFloat(m[1], 64)
	}
	sent, recv := perfSent.FindAllStringSubmatch(out, 2), perfRecv.FindAllStringSubmatch(out, 2)
	if len(sent) == 2 && len(recv) == 2 {
		r.discovers, _ = strconv.Atoi(sent[0][1])
		r.offers, _ = strconv.Atoi(recv[0][1])
		r.requests, _ = strconv.Atoi(sent[1][1])
		r.acks, _ = strconv.Atoi(recv[1][1])
	}
	return r
}

const clockTicks = 100 // USER_HZ on Linux

// cpuTicks is utime and stime of the process pid (all its threads).
func cpuTicks(t *testing.T, pid int) (user, system int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64) // field 14 of stat
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u, st
}

// straceRun counts pid's syscalls (all threads) while run runs, and
// returns them per ACK run reports.
func straceRun(t *testing.T, pid int, run func() int) map[string]float64 {
	out := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command("strace", "-c", "-f", "-o", out, "-p", strconv.Itoa(pid))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // attach to every thread
	acks := run()
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	per := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// % time, seconds, usecs/call, calls, [errors], syscall
		if len(fs) < 5 || strings.HasPrefix(fs[0], "%") || strings.HasPrefix(fs[0], "-") {
			continue
		}
		calls, err := strconv.Atoi(fs[3])
		if err != nil {
			continue
		}
		per[fs[len(fs)-1]] = float64(calls) / float64(max(1, acks))
	}
	return per
}

func keaVersion() string {
	out, _ := exec.Command("kea-dhcp4", "-v").Output()
	return strings.TrimSpace(string(out))
}

func intsEnv(t *testing.T, key, def string) []int {
	s := os.Getenv(key)
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %q is not a number", key, f)
		}
		out = append(out, n)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
