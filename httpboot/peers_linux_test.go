//go:build linux

package httpboot

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/measure"
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
	peers.Require(t, "peer benchmark: set PXEPERF_BENCH=1 (and -v) to run")
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "nginx", "tc")
	rounds := peers.Rounds(3)
	mb1, mb32 := peers.EnvInt("PXEPERF_BENCH_MB", 512), peers.EnvInt("PXEPERF_BENCH_MB32", 32)

	p := nstest.NewPair(t, nstest.Options{})
	lab := peers.NewHTTPLab(t, p, nstest.Binary(t), mb1, mb32)
	profDir := peers.Env("PXEPERF_BENCH_PROFILE")
	helper := func(name, kind string) {
		prof := ""
		if profDir != "" {
			var err error
			if prof, err = filepath.Abs(filepath.Join(profDir, name+".pprof")); err != nil {
				t.Fatal(err)
			}
		}
		addr := lab.NextAddr()
		lab.Add(t, peers.StartHelper(t, p.Server, name, "TestBenchHelper", kind, addr, lab.Root,
			"PXEPERF_BENCH_HELPER_PROFILE", prof), addr)
	}
	helper("go-FileServer", "fileserver")
	if profDir != "" {
		helper("pxeperf-inproc", "pxeperf")
		if peers.Env("PXEPERF_BENCH_NOSAMPLE") == "1" {
			helper("pxeperf-inproc-nosample", "pxeperf-nosample")
			helper("pxeperf-inproc-nostall", "pxeperf-nostall")
		}
	}

	if dir := peers.Env("PXEPERF_BENCH_PERF"); dir != "" {
		// perf record each server (kernel stacks too), stopped with SIGINT
		// at the end of the test.
		for _, s := range lab.Servers {
			args := []string{"record", "-e", "cpu-clock", "-F", "997", "-g", "-o", filepath.Join(dir, s.Name+".perf.data")}
			if peers.Env("PXEPERF_BENCH_PERF_STAT") == "1" {
				args = []string{"stat", "-o", filepath.Join(dir, s.Name+".stat"), "-e", "task-clock," +
					"syscalls:sys_enter_sendfile64,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex," +
					"syscalls:sys_enter_getsockopt,syscalls:sys_enter_nanosleep,context-switches"}
			}
			pr := nstest.Start(t, "", "perf", append(args, "-p", peers.GroupPIDs(s.Proc.Cmd.Process.Pid))...)
			t.Cleanup(func() { _ = pr.Signal(unix.SIGINT); _ = pr.Cmd.Wait() })
		}
	}

	var cases []peers.HTTPCase
	for _, c := range []peers.HTTPCase{{Link: "veth", Streams: 1}, {Link: "veth", Streams: 32}, {Link: "tbf", Streams: 1}, {Link: "tbf", Streams: 32}} {
		if peers.Only("PXEPERF_BENCH_CASES", c.String()) {
			cases = append(cases, c)
		}
	}
	type key struct {
		c      peers.HTTPCase
		server string
	}
	cpu, gbps := map[key][]float64{}, map[key][]float64{}
	for round := range rounds {
		for _, c := range cases {
			for name, r := range lab.Round(t, c, round) {
				cpu[key{c, name}] = append(cpu[key{c, name}], r.CPUPerGiB)
				gbps[key{c, name}] = append(gbps[key{c, name}], r.Gbps)
			}
		}
	}
	lab.Shape(t, false)
	for _, s := range lab.Servers {
		if profDir != "" && s.Name != "pxeperf" && s.Name != "nginx" {
			_ = s.Proc.Signal(unix.SIGTERM) // writes the profile
			_ = s.Proc.Cmd.Wait()
		}
	}

	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "link\tstreams\tserver\tGbit/s\tCPU s/GiB\tx nginx\truns CPU s/GiB\t\n")
	for _, c := range cases {
		for _, s := range lab.Servers {
			k := key{c, s.Name}
			runs := make([]string, len(cpu[k]))
			for i, v := range cpu[k] {
				runs[i] = strconv.FormatFloat(v, 'f', 3, 64)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.3f\t%.2f\t%s\t\n", c.Link, c.Streams, s.Name,
				measure.Median(gbps[k]), measure.Median(cpu[k]),
				measure.Median(peers.Ratios(cpu[k], cpu[key{c, "nginx"}])), strings.Join(runs, " "))
		}
	}
	tw.Flush()
	t.Logf("HTTP server CPU (its cgroup's, else utime+stime of its processes) per GiB served and throughput; "+
		"veth pair, MTU 1500, tbf = 1gbit tbf on the server's side; one stream fetches %d MiB, each of 32 streams %d MiB; "+
		"medians of %d rounds; x nginx = median of the per-round ratios of CPU s/GiB\n%s",
		mb1, mb32, rounds, sb.String())
}

// TestBenchHelper is a server process for TestBenchPeers, which starts this
// test binary again with PXEPERF_BENCH_HELPER set: "fileserver" serves the
// root with Go's http.FileServer, "pxeperf" with this package's Server (and
// a CPU profile to PXEPERF_BENCH_HELPER_PROFILE). It serves until SIGTERM.
func TestBenchHelper(t *testing.T) {
	kind := os.Getenv(peers.HelperEnv)
	if kind == "" {
		t.Skip("server process of TestBenchPeers")
	}
	addr, root := os.Getenv(peers.HelperAddr), os.Getenv(peers.HelperRoot)
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
		if err := peers.ServeFileServer(ctx, addr, root); err != nil {
			t.Fatal(err)
		}
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
