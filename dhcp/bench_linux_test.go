//go:build linux

package dhcp

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

var perfRateRE = regexp.MustCompile(`(?m)^Rate: ([0-9.]+)`)

// TestPerfdhcpBench measures DHCP exchanges per second with Kea's perfdhcp
// against pxeperf full mode and against dnsmasq, in the same namespaces and
// run. It prints figures and asserts nothing about them. Opt in with
// PXEPERF_BENCH=1 (it takes about a minute); PXEPERF_BENCH_RATES sets the
// offered rates (default "500 2000 8000").
//
// perfdhcp acts as a relay (giaddr = its address), so replies are unicast
// to it on port 67: this measures the servers, not broadcast handling.
func TestPerfdhcpBench(t *testing.T) {
	peers.Require(t, "benchmark: set PXEPERF_BENCH=1 to run perfdhcp against pxeperf and dnsmasq")
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "perfdhcp", "dnsmasq")
	rates := strings.Fields(peers.Env("PXEPERF_BENCH_RATES"))
	if len(rates) == 0 {
		rates = []string{"500", "2000", "8000"}
	}
	const clients, period = "200", "8"
	p := nstest.NewPair(t, nstest.Options{})
	bin := nstest.Binary(t)
	run := func(server, rate string) string {
		out, err := nstest.Output(p.Client, 60*time.Second, "perfdhcp", "-4", "-r", rate, "-R", clients, "-p", period,
			"-l", p.ClientIP.String(), p.ServerIP.String())
		if err != nil && !strings.Contains(out, "Rate:") {
			t.Fatalf("perfdhcp against %s: %v\n%s", server, err, out)
		}
		m := perfRateRE.FindStringSubmatch(out)
		got := "?"
		if m != nil {
			got = m[1]
		}
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "drops") || strings.Contains(l, "min delay") || strings.Contains(l, "avg delay") || strings.Contains(l, "max delay") {
				keep = append(keep, strings.TrimSpace(l))
			}
		}
		line := fmt.Sprintf("%-22s offered %5s/s  got %8s 4-way exchanges/s  %s", server, rate, got, strings.Join(keep, "; "))
		t.Log(line)
		return line
	}
	var report []string
	pool := poolFor(p, 10, 250)
	first, last, _ := strings.Cut(pool, "-")

	// pxeperf, journal fsynced before every ACK (group commit); then with
	// the data folder on tmpfs, where fsync costs nothing, to show its share.
	dataDirs := map[string]string{"pxeperf": t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "pxeperf-bench-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(shm) })
			dataDirs["pxeperf data on tmpfs"] = shm
		}
	}
	for _, name := range []string{"pxeperf", "pxeperf data on tmpfs"} {
		data, ok := dataDirs[name]
		if !ok {
			continue
		}
		root := t.TempDir()
		srv := nstest.Start(t, p.Server, bin, "serve", "--dhcp", "full", "--pool", pool, "--iface", p.ServerIf,
			"--addr", p.ServerIP.String(), "--root", root, "--data", data, "--http-addr", "off", "--tftp-addr", "off",
			"--log-level", "warn", "--dhcp-relays", p.ClientIP.String())
		if !nstest.WaitFor(20*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(data, JournalName))
			return err == nil
		}) {
			t.Fatalf("pxeperf did not start:\n%s", srv.Out.String())
		}
		time.Sleep(300 * time.Millisecond)
		for _, r := range rates {
			report = append(report, run(name, r))
		}
		srv.Kill()
	}

	for _, leasefile := range []string{"", filepath.Join(t.TempDir(), "dnsmasq.leases")} {
		name := "dnsmasq leasefile-ro"
		args := []string{"-d", "-C", "/dev/null", "--port=0", "--dhcp-authoritative", "--dhcp-range=" + first + "," + last + ",1h",
			"--interface=" + p.ServerIf, "--bind-interfaces", "--dhcp-lease-max=1000", "--no-ping"}
		if leasefile == "" {
			args = append(args, "--leasefile-ro", "--dhcp-script=/bin/true")
		} else {
			name = "dnsmasq leasefile"
			args = append(args, "--dhcp-leasefile="+leasefile)
		}
		d := nstest.Start(t, p.Server, "dnsmasq", args...)
		time.Sleep(500 * time.Millisecond)
		for _, r := range rates {
			report = append(report, run(name, r))
		}
		d.Kill()
	}
	fmt.Println("perfdhcp -4 -R " + clients + " -p " + period + " (DORA exchanges, perfdhcp as relay):")
	for _, l := range report {
		fmt.Println("  " + l)
	}
}
