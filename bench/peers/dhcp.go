//go:build linux

package peers

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/measure"
)

// DHCPLab runs DHCP servers one at a time against Kea's perfdhcp with 1000
// clients on a /22 beside Pair's /24. perfdhcp acts as a relay (giaddr =
// its address), so replies are unicast to it on port 67: this measures the
// servers, not broadcast handling.
type DHCPLab struct {
	Pair    *nstest.Pair
	Bin     string // pxeperf binary
	Journal string // pxeperf's lease journal file name: started when it exists
	Rates   []int  // offered rates swept, per second
	Period  int    // seconds per perfdhcp run
	Logf    func(format string, args ...any)
}

// The /22 the DHCP lab adds to its pair, and the pool on it.
const (
	dhcpServerIP = "10.200.0.1"
	dhcpClientIP = "10.200.0.2"
	dhcpSubnet   = "10.200.0.0/22"
	dhcpPool     = "10.200.0.10-10.200.3.250"
)

// NewDHCPLab addresses the pair for 1000 clients.
func NewDHCPLab(t testing.TB, p *nstest.Pair, bin, journal string, rates []int, period int) *DHCPLab {
	t.Helper()
	nstest.RequireTool(t, "perfdhcp", "kea-dhcp4", "strace")
	nstest.Run(t, p.Server, "ip", "addr", "add", dhcpServerIP+"/22", "dev", p.ServerIf)
	nstest.Run(t, p.Client, "ip", "addr", "add", dhcpClientIP+"/22", "dev", p.ClientIf)
	return &DHCPLab{Pair: p, Bin: bin, Journal: journal, Rates: rates, Period: period, Logf: t.Logf}
}

// Start starts a fresh server: "pxeperf" (full mode, every lease fsynced
// before its ACK), "kea" (kea-dhcp4, memfile, which never fsyncs, one
// thread), "kea-mt" (the same with multi-threading on: a pool of 2 threads,
// one per core here, packet queue 64) or "before=BINARY" (another pxeperf
// binary). It returns when the server is ready.
func (l *DHCPLab) Start(t testing.TB, name string) *Server {
	t.Helper()
	p := l.Pair
	pxeperf := func(bin string) *Server {
		data, root := t.TempDir(), t.TempDir()
		args := []string{"serve", "--dhcp", "full", "--pool", dhcpPool, "--iface", p.ServerIf,
			"--addr", dhcpServerIP, "--root", root, "--data", data, "--http-addr", "off", "--tftp-addr", "off",
			"--log-level", LogLevel()}
		// perfdhcp relays (giaddr = its address): a pxeperf that answers
		// only dhcp.relays (issue 27) must trust it; an older one has no flag.
		if help, _ := exec.Command(bin, "serve", "--help").CombinedOutput(); strings.Contains(string(help), "--dhcp-relays") {
			args = append(args, "--dhcp-relays", dhcpClientIP)
		}
		s := Start(t, p.Server, name, bin, args...)
		if !nstest.WaitFor(20*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(data, l.Journal))
			return err == nil
		}) {
			t.Fatalf("%s did not start:\n%s", name, s.Proc.Out.String())
		}
		return s
	}
	switch {
	case name == "pxeperf":
		return pxeperf(l.Bin)
	case strings.HasPrefix(name, "before="):
		return pxeperf(strings.TrimPrefix(name, "before="))
	case name == "kea" || name == "kea-mt":
		dir := t.TempDir()
		mt := ""
		if name == "kea-mt" {
			mt = `"multi-threading": {"enable-multi-threading": true, "thread-pool-size": 2, "packet-queue-size": 64},`
		}
		cfg := fmt.Sprintf(`{"Dhcp4": {
  "interfaces-config": {"interfaces": [%q], "dhcp-socket-type": "udp"},
  "lease-database": {"type": "memfile", "persist": true, "lfc-interval": 0, "name": %q},
  "valid-lifetime": 3600, %s
  "subnet4": [{"id": 1, "subnet": %q, "pools": [{"pool": %q}]}],
  "loggers": [{"name": "kea-dhcp4", "severity": "WARN", "output_options": [{"output": "stderr"}]}]
}}`, p.ServerIf, filepath.Join(dir, "leases4.csv"), mt, dhcpSubnet, strings.Replace(dhcpPool, "-", " - ", 1))
		path := filepath.Join(dir, "kea.json")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		s := Start(t, p.Server, name, "env", "KEA_PIDFILE_DIR="+dir, "KEA_LOCKFILE_DIR="+dir, "kea-dhcp4", "-c", path)
		// Ready when it answers: a short perfdhcp run gets an exchange.
		if !nstest.WaitFor(20*time.Second, func() bool { return l.Perfdhcp(t, 50, 1).Acks > 0 }) {
			t.Fatalf("%s did not start:\n%s", name, s.Proc.Out.String())
		}
		return s
	}
	t.Fatalf("peers: no DHCP server %q (want pxeperf, kea, kea-mt or before=BINARY)", name)
	return nil
}

// Perf is what one perfdhcp run reports.
type Perf struct {
	Rate             float64 // completed 4-way exchanges per second
	Discovers, Acks  int     // DISCOVERs sent, ACKs received
	Requests, Offers int
}

// Loss is the share of DISCOVERs that did not end in an ACK.
func (r Perf) Loss() float64 {
	if r.Discovers == 0 {
		return 1
	}
	return 1 - float64(r.Acks)/float64(r.Discovers)
}

var (
	perfRate = regexp.MustCompile(`(?m)^Rate: ([0-9.]+)`)
	perfSent = regexp.MustCompile(`(?m)^sent packets: ([0-9]+)`)
	perfRecv = regexp.MustCompile(`(?m)^received packets: ([0-9]+)`)
)

// ParsePerfdhcp reads perfdhcp -4's summary.
func ParsePerfdhcp(out string) Perf {
	var r Perf
	if m := perfRate.FindStringSubmatch(out); m != nil {
		r.Rate, _ = strconv.ParseFloat(m[1], 64)
	}
	sent, recv := perfSent.FindAllStringSubmatch(out, 2), perfRecv.FindAllStringSubmatch(out, 2)
	if len(sent) == 2 && len(recv) == 2 {
		r.Discovers, _ = strconv.Atoi(sent[0][1])
		r.Offers, _ = strconv.Atoi(recv[0][1])
		r.Requests, _ = strconv.Atoi(sent[1][1])
		r.Acks, _ = strconv.Atoi(recv[1][1])
	}
	return r
}

// Perfdhcp offers rate exchanges/s for seconds from 1000 clients.
func (l *DHCPLab) Perfdhcp(t testing.TB, rate, seconds int) Perf {
	t.Helper()
	out, err := nstest.Output(l.Pair.Client, time.Duration(seconds+30)*time.Second, "perfdhcp", "-4",
		"-r", strconv.Itoa(rate), "-R", "1000", "-p", strconv.Itoa(seconds), "-l", dhcpClientIP, dhcpServerIP)
	r := ParsePerfdhcp(out)
	if err != nil && r.Discovers == 0 {
		t.Fatalf("perfdhcp: %v\n%s", err, out)
	}
	return r
}

// DHCPResult is one server's sweep in one round.
type DHCPResult struct {
	MaxOK   int     // highest offered rate with < 1% loss
	Peak    float64 // completed exchanges/s at any offered rate
	CPUus   float64 // server CPU µs per exchange at 1000/s offered
	Sys     map[string]float64
	PerRate map[int]Perf
}

// Sweep runs every rate against s (round is for the log), then counts
// syscalls per ACK with strace at 100/s. perfRecord, when set, is a
// folder for `perf record -g` of the 1000/s run.
func (l *DHCPLab) Sweep(t testing.TB, s *Server, round int, perfRecord string) DHCPResult {
	t.Helper()
	res := DHCPResult{PerRate: map[int]Perf{}}
	pid := s.Proc.Cmd.Process.Pid // sh and env exec the server: its pid
	for _, rate := range l.Rates {
		c0 := s.CPU(t)
		var prof *exec.Cmd
		if perfRecord != "" && rate == 1000 {
			prof = exec.Command("perf", "record", "-g", "-o", filepath.Join(perfRecord, fmt.Sprintf("%s-%d.data", s.Name, round)), "-p", GroupPIDs(pid))
			if err := prof.Start(); err != nil {
				t.Fatal(err)
			}
		}
		r := l.Perfdhcp(t, rate, l.Period)
		if prof != nil {
			_ = prof.Process.Signal(syscall.SIGINT)
			_ = prof.Wait()
		}
		cpu := s.CPU(t) - c0
		if rate == 1000 && r.Acks > 0 {
			res.CPUus = cpu * 1e6 / float64(r.Acks)
		}
		res.PerRate[rate] = r
		if r.Loss() < 0.01 && rate > res.MaxOK {
			res.MaxOK = rate
		}
		res.Peak = max(res.Peak, r.Rate)
		l.Logf("round %d %-8s offered %5d/s: %8.0f exchanges/s, loss %5.2f%%, cpu %4.0f us/exchange",
			round, s.Name, rate, r.Rate, 100*r.Loss(), cpu*1e6/float64(max(1, r.Acks)))
	}
	res.Sys = StracePerUnit(t, pid, func() int { return l.Perfdhcp(t, 100, l.Period).Acks })
	l.Logf("round %d %-8s syscalls/ACK at 100/s: %v", round, s.Name, res.Sys)
	return res
}

// StracePerUnit counts pid's syscalls (all threads) while run runs, and
// returns each per unit of what run returns (ACKs, say).
func StracePerUnit(t testing.TB, pid int, run func() int) map[string]float64 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command("strace", "-c", "-f", "-o", out, "-p", strconv.Itoa(pid))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // attach to every thread
	units := run()
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
		per[fs[len(fs)-1]] = float64(calls) / float64(max(1, units))
	}
	return per
}

// KeaVersion is kea-dhcp4 -v.
func KeaVersion() string {
	out, _ := exec.Command("kea-dhcp4", "-v").Output()
	return strings.TrimSpace(string(out))
}

// DHCPSyscalls are the syscalls the tables show per ACK.
var DHCPSyscalls = []string{"write", "pwrite64", "writev", "fsync", "fdatasync", "ftruncate", "sendmsg", "sendto",
	"recvfrom", "recvmsg", "futex", "epoll_pwait", "nanosleep", "total"}

// DHCPTable is the per-server table of DHCP sweeps: medians over rounds,
// and each pxeperf's (every name not starting with "kea") same-round ratio
// to each kea.
func DHCPTable(results map[string][]DHCPResult, names []string, rates []int) string {
	var ours, keas []string
	for _, n := range names {
		if strings.HasPrefix(n, "kea") {
			keas = append(keas, n)
		} else {
			ours = append(ours, n)
		}
	}
	med := func(f func(DHCPResult) float64, name string) float64 {
		var v []float64
		for _, r := range results[name] {
			v = append(v, f(r))
		}
		return measure.Median(v)
	}
	ratio := func(f func(DHCPResult) float64, a, b string) float64 {
		var va, vb []float64
		for _, r := range results[a] {
			va = append(va, f(r))
		}
		for _, r := range results[b] {
			vb = append(vb, f(r))
		}
		return measure.Median(Ratios(va, vb))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s", "")
	for _, n := range names {
		fmt.Fprintf(&b, " %10s", n)
	}
	var pairs [][2]string
	for _, o := range ours {
		for _, k := range keas {
			pairs = append(pairs, [2]string{o, k})
			fmt.Fprintf(&b, " %14s", o+"/"+k)
		}
	}
	b.WriteString("\n")
	row := func(label string, f func(DHCPResult) float64, format string) {
		fmt.Fprintf(&b, "%-44s", label)
		for _, n := range names {
			fmt.Fprintf(&b, " %10s", fmt.Sprintf(format, med(f, n)))
		}
		for _, p := range pairs {
			fmt.Fprintf(&b, " %13.2fx", ratio(f, p[0], p[1]))
		}
		b.WriteString("\n")
	}
	row("highest offered rate with < 1% loss (/s)", func(r DHCPResult) float64 { return float64(r.MaxOK) }, "%.0f")
	row("peak completed exchanges/s (any loss)", func(r DHCPResult) float64 { return r.Peak }, "%.0f")
	row("server CPU per exchange at 1000/s (us)", func(r DHCPResult) float64 { return r.CPUus }, "%.0f")
	for _, sc := range DHCPSyscalls {
		row("syscalls per ACK at 100/s: "+sc, func(r DHCPResult) float64 { return r.Sys[sc] }, "%.2f")
	}
	fmt.Fprintf(&b, "by offered rate, medians: loss %% / completed exchanges/s\n")
	for _, rate := range rates {
		fmt.Fprintf(&b, "  %6d/s", rate)
		for _, n := range names {
			fmt.Fprintf(&b, "   %s %5.2f%% %6.0f/s", n,
				med(func(r DHCPResult) float64 { return 100 * r.PerRate[rate].Loss() }, n),
				med(func(r DHCPResult) float64 { return r.PerRate[rate].Rate }, n))
		}
		b.WriteString("\n")
	}
	return b.String()
}
