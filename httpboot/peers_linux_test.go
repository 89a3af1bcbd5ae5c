//go:build linux

package httpboot

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/nstest"
	"golang.org/x/sys/unix"
)

// TestBenchPeers (PXEPERF_BENCH=1, run with -v) measures server CPU per GiB
// and throughput of pxeperf (the real binary, `pxeperf serve`, records and
// all), nginx (sendfile on) and Go's http.FileServer, each its own process
// in the server namespace of a veth pair, so its CPU (utime+stime of its
// process group, /proc/PID/stat) is its own. Clients are this test process
// in the client namespace. Every round runs every case for every server
// back to back, in a rotating order, so the noise of a shared machine hits
// them alike; the table has medians and each server's ratio to nginx.
//
//	PXEPERF_BENCH_ROUNDS=3       rounds
//	PXEPERF_BENCH_MB=512         file size for one stream (MiB)
//	PXEPERF_BENCH_MB32=32        file size for each of 32 streams (MiB)
//	PXEPERF_BENCH_CASES=...      comma-separated subset of veth/1,veth/32,tbf/1,tbf/32
//	PXEPERF_BENCH_PROFILE=DIR    also run pxeperf's handler in a helper process
//	                             (row "pxeperf-inproc", no record store) and write its
//	                             and the FileServer's CPU profiles to DIR/*.pprof
//	PXEPERF_BENCH_NOSAMPLE=1     with PXEPERF_BENCH_PROFILE: also a row with the handler
//	                             sampling TCP_INFO only at start and end, and one without
//	                             write deadlines (http.stall_timeout 0): what each costs
//	PXEPERF_BENCH_PERF=DIR       perf record every server into DIR/NAME.perf.data
//	PXEPERF_BENCH_PERF_STAT=1    with PXEPERF_BENCH_PERF: perf stat (syscall counts) into DIR/NAME.stat
//
// PXEPERF_BENCH=1 go test ./httpboot -run TestBenchPeers -v -timeout 60m
func TestBenchPeers(t *testing.T) {
	if os.Getenv("PXEPERF_BENCH") != "1" {
		t.Skip("peer benchmark: set PXEPERF_BENCH=1 (and -v) to run")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "nginx", "tc")
	rounds := envInt("PXEPERF_BENCH_ROUNDS", 3)
	mb1, mb32 := envInt("PXEPERF_BENCH_MB", 512), envInt("PXEPERF_BENCH_MB32", 32)

	p := nstest.NewPair(t, nstest.Options{})
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeBenchFile(t, filepath.Join(root, "one.img"), int64(mb1)<<20)
	writeBenchFile(t, filepath.Join(root, "many.img"), int64(mb32)<<20)
	host := p.ServerIP.String()

	type server struct {
		name, url string
		proc      *nstest.Proc
	}
	var servers []server
	start := func(name string, port int, proc *nstest.Proc) {
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		if !nstest.WaitFor(20*time.Second, func() bool {
			return nstest.Do(p.Client, func() error {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					c.Close()
				}
				return err
			}) == nil
		}) {
			t.Fatalf("%s did not start:\n%s", name, proc.Out.String())
		}
		servers = append(servers, server{name, "http://" + addr, proc})
	}

	bin := nstest.Binary(t)
	start("pxeperf", 8081, nstest.Start(t, p.Server, bin, "serve", "--dhcp", "off", "--tftp-addr", "off",
		"--admin-addr", "off", "--iface", p.ServerIf, "--addr", host, "--http-addr", host+":8081",
		"--root", root, "--data", t.TempDir(), "--log-level", "warn"))

	nginxDir := t.TempDir()
	conf := writeNginxConf(t, nginxDir, root, host, 8082)
	start("nginx", 8082, nstest.Start(t, p.Server, "nginx", "-p", nginxDir, "-c", conf, "-g", "daemon off;"))

	helper := func(kind string, port int, profile string) *nstest.Proc {
		t.Setenv("PXEPERF_BENCH_HELPER", kind)
		t.Setenv("PXEPERF_BENCH_HELPER_ADDR", net.JoinHostPort(host, strconv.Itoa(port)))
		t.Setenv("PXEPERF_BENCH_HELPER_ROOT", root)
		t.Setenv("PXEPERF_BENCH_HELPER_PROFILE", profile)
		return nstest.Start(t, p.Server, os.Args[0], "-test.run=^TestBenchHelper$")
	}
	profDir := os.Getenv("PXEPERF_BENCH_PROFILE")
	profile := func(name string) string {
		if profDir == "" {
			return ""
		}
		p, err := filepath.Abs(filepath.Join(profDir, name+".pprof"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	start("go-FileServer", 8083, helper("fileserver", 8083, profile("go-FileServer")))
	if profDir != "" {
		start("pxeperf-inproc", 8084, helper("pxeperf", 8084, profile("pxeperf-inproc")))
		if os.Getenv("PXEPERF_BENCH_NOSAMPLE") == "1" {
			start("pxeperf-inproc-nosample", 8085, helper("pxeperf-nosample", 8085, profile("pxeperf-inproc-nosample")))
			start("pxeperf-inproc-nostall", 8086, helper("pxeperf-nostall", 8086, profile("pxeperf-inproc-nostall")))
		}
	}

	if dir := os.Getenv("PXEPERF_BENCH_PERF"); dir != "" {
		// perf record each server (kernel stacks too), stopped with SIGINT
		// at the end of the test.
		for _, s := range servers {
			args := []string{"record", "-e", "cpu-clock", "-F", "997", "-g", "-o", filepath.Join(dir, s.name+".perf.data")}
			if os.Getenv("PXEPERF_BENCH_PERF_STAT") == "1" {
				args = []string{"stat", "-o", filepath.Join(dir, s.name+".stat"), "-e", "task-clock," +
					"syscalls:sys_enter_sendfile64,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex," +
					"syscalls:sys_enter_getsockopt,syscalls:sys_enter_nanosleep,context-switches"}
			}
			pr := nstest.Start(t, "", "perf", append(args, "-p", groupPIDs(s.proc))...)
			t.Cleanup(func() { _ = pr.Signal(unix.SIGINT); _ = pr.Cmd.Wait() })
		}
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := nstest.Do(p.Client, func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableCompression: true, MaxIdleConnsPerHost: 64,
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Minute}

	type benchCase struct {
		link    string // veth or tbf
		streams int
	}
	var cases []benchCase
	want := os.Getenv("PXEPERF_BENCH_CASES")
	for _, c := range []benchCase{{"veth", 1}, {"veth", 32}, {"tbf", 1}, {"tbf", 32}} {
		if want == "" || slices.Contains(strings.Split(want, ","), fmt.Sprintf("%s/%d", c.link, c.streams)) {
			cases = append(cases, c)
		}
	}
	type key struct {
		c      benchCase
		server string
	}
	cpu, gbps := map[key][]float64{}, map[key][]float64{}
	ratio := map[key][]float64{} // per round, CPU/GiB over nginx's
	shaped := false
	shape := func(on bool) {
		if on == shaped {
			return
		}
		if on {
			// netlab's sizing for 1gbit: burst rate/HZ, 20 ms of queue.
			nstest.Run(t, p.Server, "tc", "qdisc", "replace", "dev", p.ServerIf, "root", "tbf",
				"rate", "1gbit", "burst", "500000", "limit", "3000000")
		} else {
			nstest.Run(t, p.Server, "tc", "qdisc", "del", "dev", p.ServerIf, "root")
		}
		shaped = on
	}
	for round := range rounds {
		for _, c := range cases {
			shape(c.link == "tbf")
			file, size := "/one.img", int64(mb1)<<20
			if c.streams > 1 {
				file, size = "/many.img", int64(mb32)<<20
			}
			gib := float64(size) * float64(c.streams) / (1 << 30)
			perRound := map[string]float64{}
			for i := range servers {
				s := servers[(i+round)%len(servers)]
				before := groupCPU(t, s.proc)
				t0 := time.Now()
				if err := fetchConcurrent(client, s.url+file, size, c.streams); err != nil {
					t.Fatalf("%s %s/%d: %v", s.name, c.link, c.streams, err)
				}
				wall := time.Since(t0).Seconds()
				tr.CloseIdleConnections()
				k := key{c, s.name}
				perRound[s.name] = (groupCPU(t, s.proc) - before) / gib
				cpu[k] = append(cpu[k], perRound[s.name])
				gbps[k] = append(gbps[k], gib*(1<<30)*8/wall/1e9)
			}
			for name, v := range perRound {
				ratio[key{c, name}] = append(ratio[key{c, name}], v/perRound["nginx"])
			}
		}
	}
	shape(false)
	for _, s := range servers {
		if profDir != "" && s.name != "pxeperf" && s.name != "nginx" {
			_ = s.proc.Signal(unix.SIGTERM) // writes the profile
			_ = s.proc.Cmd.Wait()
		}
	}

	med := func(v []float64) float64 {
		s := slices.Sorted(slices.Values(v))
		return s[len(s)/2]
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "link\tstreams\tserver\tGbit/s\tCPU s/GiB\tx nginx\truns CPU s/GiB\t\n")
	for _, c := range cases {
		for _, s := range servers {
			k := key{c, s.name}
			runs := make([]string, len(cpu[k]))
			for i, v := range cpu[k] {
				runs[i] = strconv.FormatFloat(v, 'f', 3, 64)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.3f\t%.2f\t%s\t\n", c.link, c.streams, s.name,
				med(gbps[k]), med(cpu[k]), med(ratio[k]), strings.Join(runs, " "))
		}
	}
	tw.Flush()
	t.Logf("HTTP server CPU (utime+stime of its processes) per GiB served and throughput; veth pair, MTU 1500, "+
		"tbf = 1gbit tbf on the server's side; one stream fetches %d MiB, each of 32 streams %d MiB; "+
		"medians of %d rounds; x nginx = median of the per-round ratios of CPU s/GiB\n%s",
		mb1, mb32, rounds, sb.String())
}

// TestBenchHelper is a server process for TestBenchPeers, which starts this
// test binary again with PXEPERF_BENCH_HELPER set: "fileserver" serves the
// root with Go's http.FileServer, "pxeperf" with this package's Server (and
// a CPU profile to PXEPERF_BENCH_HELPER_PROFILE). It serves until SIGTERM.
func TestBenchHelper(t *testing.T) {
	kind := os.Getenv("PXEPERF_BENCH_HELPER")
	if kind == "" {
		t.Skip("server process of TestBenchPeers")
	}
	addr, root := os.Getenv("PXEPERF_BENCH_HELPER_ADDR"), os.Getenv("PXEPERF_BENCH_HELPER_ROOT")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if prof := os.Getenv("PXEPERF_BENCH_HELPER_PROFILE"); prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	switch kind {
	case "fileserver":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.FileServer(http.Dir(root))}
		go func() { <-ctx.Done(); srv.Close() }()
		_ = srv.Serve(ln)
	case "pxeperf", "pxeperf-nosample", "pxeperf-nostall":
		store, err := images.Open(root, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		h := defaultHTTP()
		h.Listen = addr
		h.StallTimeout = 60 * time.Second // the default config's
		if kind == "pxeperf-nostall" {
			h.StallTimeout = 0 // no write deadlines: what they cost
		}
		s, err := New(Options{HTTP: h, Images: store})
		if err != nil {
			t.Fatal(err)
		}
		if kind == "pxeperf-nosample" {
			// What the sampling costs: no sample after the first.
			s.sampler.every = time.Hour
		}
		_ = s.Serve(ctx)
	default:
		t.Fatalf("PXEPERF_BENCH_HELPER=%q: want fileserver or pxeperf", kind)
	}
}

// groupPIDs lists the processes of p's process group, comma-separated.
func groupPIDs(p *nstest.Proc) string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(p.Cmd.Process.Pid) {
			pids = append(pids, e.Name())
		}
	}
	return strings.Join(pids, ",")
}

// groupCPU is the user+system CPU seconds of every live process in p's
// process group (nginx's master and workers), from /proc/PID/stat.
func groupCPU(t *testing.T, p *nstest.Proc) float64 {
	t.Helper()
	pgid := p.Cmd.Process.Pid
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var ticks float64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the ")" that ends the command name: state is 0,
		// pgrp 2, utime 11 and stime 12 (fields 3, 5, 14, 15 of proc(5)).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		ticks += ut + st
	}
	return ticks / 100 // USER_HZ
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// writeNginxConf writes an nginx config serving root on host:port with
// sendfile, and returns its path.
func writeNginxConf(tb testing.TB, dir, root, host string, port int) string {
	conf := filepath.Join(dir, "nginx.conf")
	cfg := fmt.Sprintf(`worker_processes 2;
user root;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 1024; }
http {
  sendfile on;
  tcp_nopush on;
  access_log off;
  keepalive_requests 100000;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  default_type application/octet-stream;
  server { listen %[2]s:%[3]d; root %[4]s; }
}
`, dir, host, port, root)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	return conf
}
