//go:build linux

package tftp

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/measure"
)

// TestBenchLockstep is the lock-step (RFC 1350 + blksize/tsize, no
// windowsize) table of issue 12: pxeperf with its ACK-waiting threads, the
// same binary with tftp.transfer_threads: 0 (every ACK through Go's
// poller), atftpd and in.tftpd, fetched by curl, atftp and tftp-hpa (512
// only: it sends no options) at blksize 512 and 1468, over a veth pair
// plain and under a 1 Gbit/s tbf. Servers alternate within each round;
// Mbit/s and server CPU s/GiB (user+system of the server process and its
// children, from /proc: see cpuMeter) are medians. It runs only with
// PXEPERF_BENCH=1 and needs atftpd (see requireAtftpd); the servers' order
// rotates from round to round:
//
//	PXEPERF_BENCH=1 go test -run TestBenchLockstep -v -timeout 60m ./tftp/
//
// PXEPERF_BENCH_MB sets the file size (default 64), PXEPERF_BENCH_RUNS the
// rounds (default 3), PXEPERF_BENCH_LINK=veth or tbf one link only, and
// PXEPERF_BENCH_ALTBIN adds another pxeperf binary (a variant to compare).
// PXEPERF_BENCH_MTU sets the veth MTU (default 1500; at 9000 curl and atftp
// also fetch at blksize 8192), PXEPERF_BENCH_CLIENTS keeps only the named
// cases (e.g. "tftp-hpa/512,curl/8192") and PXEPERF_BENCH_SERVERS only the
// named servers (e.g. "pxeperf,pxeperf alt,atftpd,in.tftpd"). The "same
// round" column is the median over rounds of the server's Mbit/s over the
// better peer's in that round (steadier than the ratio of medians on a
// machine others load), "x pxeperf" the same against pxeperf's.
func TestBenchLockstep(t *testing.T) {
	requireBench(t, "atftp", "curl", "tftp", "in.tftpd")
	atftpd := requireAtftpd(t)
	mb, runs := benchSize(), benchRuns(3)
	mtu := peers.EnvInt("PXEPERF_BENCH_MTU", 1500)
	links := []string{"veth", "veth+tbf 1gbit"}
	switch peers.Env("PXEPERF_BENCH_LINK") {
	case "veth":
		links = links[:1]
	case "tbf":
		links = links[1:]
	}
	type client struct {
		name string
		blk  int
		args func(ip, port, out string) (string, []string)
	}
	clients := []client{}
	blks := []int{512, 1468}
	if mtu >= 9000 {
		blks = append(blks, 8192)
	}
	for _, blk := range blks {
		b := strconv.Itoa(blk)
		clients = append(clients,
			client{"curl", blk, func(ip, port, out string) (string, []string) {
				return "curl", []string{"-sS", "--tftp-blksize", b, "-o", out, "tftp://" + ip + ":" + port + "/img.bin"}
			}},
			client{"atftp", blk, func(ip, port, out string) (string, []string) {
				return "atftp", []string{"--option", "blksize " + b, "--option", "tsize 0", "-g", "-r", "img.bin", "-l", out, ip, port}
			}})
	}
	clients = append(clients, client{"tftp-hpa", 512, func(ip, port, out string) (string, []string) {
		return "tftp", []string{"-m", "binary", ip, port, "-c", "get", "img.bin", out}
	}})
	clients = slices.DeleteFunc(clients, func(c client) bool {
		return !peers.Only("PXEPERF_BENCH_CLIENTS", fmt.Sprintf("%s/%d", c.name, c.blk))
	})
	if len(clients) == 0 {
		t.Fatalf("PXEPERF_BENCH_CLIENTS=%q names no case: use client/blksize, e.g. curl/512, atftp/1468, tftp-hpa/512",
			peers.Env("PXEPERF_BENCH_CLIENTS"))
	}

	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "link\tclient\tblksize\tserver\tMbit/s\tCPU s/GiB\tx best peer Mbit/s\tsame round\tx pxeperf\tx best peer CPU\truns (s)\t\n")
	for _, link := range links {
		b := newBenchBed(t, nstest.Options{MTU: mtu}, link != "veth", mb)
		p, ip := b.pair, b.ip
		type server struct {
			name, port string
			proc       *nstest.Proc
			peer       bool
		}
		threads := func(n int) string { return fmt.Sprintf("tftp:\n  transfer_threads: %d\n", n) }
		bin := nstest.Binary(t)
		servers := []*server{
			{name: "pxeperf", port: "69", proc: b.startPxeperf(t, bin, "69", threads(16))},
			{name: "pxeperf poller", port: "70", proc: b.startPxeperf(t, bin, "70", threads(0))},
			{name: "atftpd", port: "1069", peer: true, proc: b.startAtftpd(t, atftpd, "1069", "/dev/null")},
			{name: "in.tftpd", port: "1070", peer: true, proc: b.startInTFTPD(t, "1070")},
		}
		if alt := peers.Env("PXEPERF_BENCH_ALTBIN"); alt != "" {
			servers = append(servers, &server{name: "pxeperf alt", port: "71", proc: b.startPxeperf(t, alt, "71", threads(16))})
		}
		servers = slices.DeleteFunc(servers, func(s *server) bool { return !peers.Only("PXEPERF_BENCH_SERVERS", s.name) })
		for _, srv := range servers {
			waitTFTP(t, p, ip, srv.port, srv.name)
		}
		out := filepath.Join(t.TempDir(), "img.bin")
		secs := map[string][]float64{}
		cpu := map[string][]float64{}
		key := func(c client, srv *server) string { return fmt.Sprintf("%s/%d/%s", c.name, c.blk, srv.name) }
		for r := range runs {
			for _, c := range clients {
				// The order rotates from round to round, so no server
				// always follows the same one (page cache, CPU state).
				for _, srv := range peers.Rotate(servers, r) {
					name, args := c.args(ip, srv.port, out)
					os.Remove(out)
					meter := startCPUMeter(t, srv.proc)
					start := time.Now()
					if o, err := nstest.Output(p.Client, 10*time.Minute, name, args...); err != nil {
						t.Fatalf("%s: %s %s: %v\n%s", srv.name, name, strings.Join(args, " "), err, o)
					}
					el := time.Since(start).Seconds()
					used := meter.seconds(t)
					if fi, err := os.Stat(out); err != nil || fi.Size() != int64(mb<<20) {
						t.Fatalf("%s %s: fetched file is wrong: %v", srv.name, name, err)
					}
					k := key(c, srv)
					secs[k] = append(secs[k], el)
					cpu[k] = append(cpu[k], used*1024/float64(mb))
				}
			}
		}
		for _, c := range clients {
			var bestMbps, bestCPU float64
			for _, srv := range servers {
				if srv.peer {
					bestMbps = max(bestMbps, float64(mb<<20)*8/measure.Median(secs[key(c, srv)])/1e6)
					if cp := measure.Median(cpu[key(c, srv)]); bestCPU == 0 || cp < bestCPU {
						bestCPU = cp
					}
				}
			}
			// Same round: this server's time against the better peer's.
			rounds := map[string][]float64{}
			vs := map[string][]float64{} // same round, against pxeperf (an A/B of a variant)
			for i := range runs {
				best := 0.0
				for _, srv := range servers {
					if srv.peer && (best == 0 || secs[key(c, srv)][i] < best) {
						best = secs[key(c, srv)][i]
					}
				}
				for _, srv := range servers {
					rounds[srv.name] = append(rounds[srv.name], best/secs[key(c, srv)][i])
					if pk := key(c, servers[0]); servers[0].name == "pxeperf" {
						vs[srv.name] = append(vs[srv.name], secs[pk][i]/secs[key(c, srv)][i])
					}
				}
			}
			for _, srv := range servers {
				mbps := float64(mb<<20) * 8 / measure.Median(secs[key(c, srv)]) / 1e6
				cp := measure.Median(cpu[key(c, srv)])
				x := "-"
				if len(vs[srv.name]) > 0 {
					x = fmt.Sprintf("%.2f", measure.Median(vs[srv.name]))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.0f\t%.1f\t%.2f\t%.2f\t%s\t%.2f\t%s\t\n", link, c.name, c.blk, srv.name, mbps, cp,
					mbps/bestMbps, measure.Median(rounds[srv.name]), x, cp/bestCPU, fmtSecs(secs[key(c, srv)]))
			}
		}
	}
	tw.Flush()
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("TFTP lock-step, %d MiB file, MTU %d, median of %d rounds (load average %s):\n%s",
		mb, mtu, runs, strings.TrimSpace(string(load)), table.String())
}

// cpuMeter measures a server process's CPU time (user+system) over one
// fetch, with that of its children: in.tftpd forks one per transfer and
// ignores SIGCHLD, so a child's time never reaches the parent's cutime and
// is sampled from /proc every 10 ms while it runs instead (its last 10 ms
// or less are missed).
type cpuMeter struct {
	pid      int
	start    [2]float64 // own and reaped children's seconds at start
	children map[int]float64
	stop     chan struct{}
	done     chan struct{}
}

func startCPUMeter(t *testing.T, p *nstest.Proc) *cpuMeter {
	t.Helper()
	m := &cpuMeter{pid: p.Cmd.Process.Pid, children: map[int]float64{}, stop: make(chan struct{}), done: make(chan struct{})}
	own, reaped, ok := procCPU(m.pid)
	if !ok {
		t.Fatalf("reading /proc/%d/stat", m.pid)
	}
	m.start = [2]float64{own, reaped}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			m.sample()
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *cpuMeter) sample() {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", m.pid, m.pid))
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if own, _, ok := procCPU(pid); ok {
			m.children[pid] = max(m.children[pid], own)
		}
	}
}

// seconds ends the measurement: CPU seconds since startCPUMeter.
func (m *cpuMeter) seconds(t *testing.T) float64 {
	t.Helper()
	close(m.stop)
	<-m.done
	own, reaped, ok := procCPU(m.pid)
	if !ok {
		t.Fatalf("reading /proc/%d/stat", m.pid)
	}
	var sampled float64
	for _, s := range m.children {
		sampled += s
	}
	return own - m.start[0] + max(reaped-m.start[1], sampled)
}

// procCPU reads a process's own and its reaped children's user+system
// seconds (fields 14 to 17 of /proc/PID/stat, in clock ticks).
func procCPU(pid int) (own, reaped float64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var v [4]float64
	for i := range v {
		v[i], _ = strconv.ParseFloat(f[11+i], 64)
	}
	return (v[0] + v[1]) / 100, (v[2] + v[3]) / 100, true
}
