//go:build linux

package tftp

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/measure"
)

// TestBenchThroughput compares pxeperf's TFTP server with tftp-hpa's
// in.tftpd over a veth pair, same run, same client (atftp), for the default
// block size and blksize 512 and 1468. It runs only with PXEPERF_BENCH=1:
//
//	PXEPERF_BENCH=1 go test -run TestBenchThroughput -v -timeout 30m ./tftp/
//
// PXEPERF_BENCH_MB sets the file size (default 64), PXEPERF_BENCH_RUNS the
// repeats (default 3, the median is shown). Each link is measured plain and
// under a 1 Gbit/s token bucket on both ends.
func TestBenchThroughput(t *testing.T) {
	requireBench(t, "atftp", "in.tftpd")
	mb, runs := benchSize(), benchRuns(3)
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "link\tserver\tblksize\tMiB/s (median)\tMbit/s\tall runs (s)\t\n")
	for _, shaped := range []bool{false, true} {
		link := "veth"
		if shaped {
			link = "veth+tbf 1gbit"
		}
		b := newBenchBed(t, nstest.Options{}, shaped, mb)
		p, ip := b.pair, b.ip
		servers := []struct{ name, port string }{{"pxeperf", "69"}, {"pxeperf single-port", "70"}, {"in.tftpd", "1069"}}
		b.startThroughputServers(t)
		out := t.TempDir()
		blks := []string{"default", "512", "1468"}
		secs := map[string][]float64{}
		// Round-robin over servers within each repeat, so load from
		// elsewhere on the machine hits every server alike.
		for range runs {
			for _, srv := range servers {
				for _, blk := range blks {
					args := []string{"-g", "-r", "img.bin", "-l", filepath.Join(out, "img.bin"), ip, srv.port}
					if blk != "default" {
						args = append([]string{"--option", "blksize " + blk, "--option", "tsize 0"}, args...)
					}
					os.Remove(filepath.Join(out, "img.bin"))
					start := time.Now()
					if o, err := nstest.Output(p.Client, 10*time.Minute, "atftp", args...); err != nil {
						t.Fatalf("%s %s: atftp %s: %v\n%s", link, srv.name, strings.Join(args, " "), err, o)
					}
					key := srv.name + "/" + blk
					secs[key] = append(secs[key], time.Since(start).Seconds())
					if fi, err := os.Stat(filepath.Join(out, "img.bin")); err != nil || fi.Size() != int64(mb<<20) {
						t.Fatalf("%s %s: fetched file is wrong: %v", link, srv.name, err)
					}
				}
			}
		}
		for _, srv := range servers {
			for _, blk := range blks {
				s := secs[srv.name+"/"+blk]
				mibs := float64(mb) / measure.Median(s)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.0f\t%s\t\n", link, srv.name, blk, mibs, mibs*8*1.048576, fmtSecs(s))
			}
		}
	}
	tw.Flush()
	t.Logf("TFTP throughput, %d MiB file, atftp client, median of %d:\n%s", mb, runs, table.String())
}

// The set-up every TFTP benchmark (bench_test.go, lockstep_bench_test.go,
// adapt_bench_test.go) shares: one gate, the size and rounds knobs, one bed
// of a veth pair and a served root, one way to start each server.

// requireBench skips t unless PXEPERF_BENCH=1 and tools are in PATH.
func requireBench(t *testing.T, tools ...string) {
	t.Helper()
	peers.Require(t, "benchmark: set PXEPERF_BENCH=1 to run")
	nstest.RequireTool(t, tools...)
}

// benchSize is PXEPERF_BENCH_MB, the image size in MiB (default 64).
func benchSize() int { return peers.EnvInt("PXEPERF_BENCH_MB", 64) }

// benchRuns is PXEPERF_BENCH_RUNS, the rounds (default def).
func benchRuns(def int) int { return peers.EnvInt("PXEPERF_BENCH_RUNS", def) }

// median is the median of a benchmark's samples (measure.Median on a
// copy, so the samples keep their round order).

// benchBed is a veth pair, shaped to 1 Gbit/s both ways or not, with a root
// the servers in the server namespace share (img.bin of mb MiB when mb > 0).
type benchBed struct {
	pair      *nstest.Pair
	root, ip  string
	logLevel  string // pxeperf's --log-level (warn)
	adminAddr bool   // leave pxeperf's admin server on (default off)
}

func newBenchBed(t *testing.T, opt nstest.Options, shaped bool, mb int) *benchBed {
	t.Helper()
	p := nstest.NewPair(t, opt)
	if shaped {
		peers.ShapeBoth(t, p, true)
	}
	b := &benchBed{pair: p, root: t.TempDir(), ip: p.ServerIP.String(), logLevel: "warn"}
	if err := os.Chmod(b.root, 0o755); err != nil { // in.tftpd drops to nobody
		t.Fatal(err)
	}
	if mb > 0 {
		nstest.RandomFile(t, filepath.Join(b.root, "img.bin"), mb<<20, 42)
	}
	return b
}

// startPxeperf runs bin's serve with TFTP only on port, serving the root;
// yaml, when set, is its config file.
func (b *benchBed) startPxeperf(t *testing.T, bin, port, yaml string) *nstest.Proc {
	t.Helper()
	data := t.TempDir()
	args := []string{"serve", "--dhcp", "off", "--http-addr", "off", "--tftp-addr", b.ip + ":" + port,
		"--root", b.root, "--data", data, "--iface", b.pair.ServerIf, "--log-level", b.logLevel}
	if !b.adminAddr {
		args = append(args[:1], append([]string{"--admin-addr", "off"}, args[1:]...)...)
	}
	if yaml != "" {
		cfg := filepath.Join(data, "c.yaml")
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", cfg)
	}
	return nstest.Start(t, b.pair.Server, bin, args...)
}

// startAtftpd runs atftpd on port, logging to logfile, with extra flags.
func (b *benchBed) startAtftpd(t *testing.T, atftpd, port, logfile string, extra ...string) *nstest.Proc {
	t.Helper()
	args := append([]string{"--daemon", "--no-fork", "--user", "root", "--group", "root",
		"--port", port, "--bind-address", b.ip, "--logfile", logfile}, extra...)
	return nstest.Start(t, b.pair.Server, atftpd, append(args, b.root)...)
}

// startInTFTPD runs tftp-hpa's in.tftpd on port.
func (b *benchBed) startInTFTPD(t *testing.T, port string) *nstest.Proc {
	t.Helper()
	return nstest.Start(t, b.pair.Server, "in.tftpd", "-L", "-s", b.root, "-a", b.ip+":"+port)
}

// startThroughputServers runs pxeperf (per-transfer ports on :69,
// single-port on :70) and in.tftpd (:1069), and waits until each answers.
func (b *benchBed) startThroughputServers(t *testing.T) {
	t.Helper()
	bin := nstest.Binary(t)
	b.startPxeperf(t, bin, "69", "")
	b.startPxeperf(t, bin, "70", "tftp:\n  single_port: true\n")
	b.startInTFTPD(t, "1069")
	// Ready when each answers a missing-file request.
	for _, port := range []string{"69", "70", "1069"} {
		waitTFTP(t, b.pair, b.ip, port, "TFTP server")
	}
}

// waitTFTP waits (20 s at most) until the TFTP server what on ip:port
// answers a request for a missing file.
func waitTFTP(t *testing.T, p *nstest.Pair, ip, port, what string) {
	t.Helper()
	ok := nstest.WaitFor(20*time.Second, func() bool {
		o, _ := nstest.Output(p.Client, 5*time.Second, "atftp", "-g", "-r", "none", "-l", "/dev/null", ip, port)
		return strings.Contains(strings.ToLower(o), "not found")
	})
	if !ok {
		t.Fatalf("%s on port %s did not come up", what, port)
	}
}

// requireAtftpd finds atftpd (see peers.AtftpdPath) or skips the test.
func requireAtftpd(t *testing.T) string {
	t.Helper()
	atftpd := peers.AtftpdPath()
	if atftpd == "" {
		t.Skip(peers.AtftpdHint)
	}
	return atftpd
}

// TestBenchWindowsize is the RFC 7440 table: pxeperf against atftpd over a
// veth pair shaped to 1 Gbit/s on both ends (tbf), same run, fetched with
// atftp's windowsize client, for blksize 512 and 1468 and windowsize 1 to
// 64. It runs only with PXEPERF_BENCH=1 and needs atftpd (see requireAtftpd):
//
//	PXEPERF_BENCH=1 go test -run TestBenchWindowsize -v -timeout 60m ./tftp/
//
// PXEPERF_BENCH_MB sets the file size (default 64), PXEPERF_BENCH_RUNS the
// repeats (default 3, the median is shown); PXEPERF_BENCH_LINK=veth leaves
// the link unshaped, to see what the CPU allows; PXEPERF_BENCH_ALTBIN adds
// another pxeperf binary (a variant to compare, as pxeperf-alt), and
// PXEPERF_BENCH_WINDOWS the window sizes (space-separated).
func TestBenchWindowsize(t *testing.T) {
	requireBench(t, "atftp")
	atftpd := requireAtftpd(t)
	mb, runs := benchSize(), benchRuns(3)
	unshaped := peers.Env("PXEPERF_BENCH_LINK") == "veth"
	link := "veth + tbf 1gbit"
	if unshaped {
		link = "veth, unshaped (CPU-bound)"
	}
	b := newBenchBed(t, nstest.Options{}, !unshaped, mb)
	p, ip := b.pair, b.ip
	type server struct {
		name, port string
		proc       *nstest.Proc
	}
	servers := []*server{{name: "pxeperf", port: "69", proc: b.startPxeperf(t, nstest.Binary(t), "69", "")},
		{name: "atftpd", port: "1069", proc: b.startAtftpd(t, atftpd, "1069", "-", "--verbose=3")}}
	if alt := peers.Env("PXEPERF_BENCH_ALTBIN"); alt != "" {
		servers = append(servers, &server{name: "pxeperf-alt", port: "3069", proc: b.startPxeperf(t, alt, "3069", "")})
	}
	for _, srv := range servers {
		waitTFTP(t, p, ip, srv.port, srv.name)
	}
	blks := []int{512, 1468}
	wins := peers.EnvInts(t, "PXEPERF_BENCH_WINDOWS", "1 4 8 16 32 64")
	out := filepath.Join(t.TempDir(), "img.bin")
	secs := map[string][]float64{}
	cpu := map[string][]float64{} // server CPU seconds per fetch
	key := func(srv string, blk, win int) string { return fmt.Sprintf("%s/%d/%d", srv, blk, win) }
	for run := range runs {
		for _, blk := range blks {
			for _, win := range wins {
				for _, srv := range peers.Rotate(servers, run) {
					args := []string{"--option", fmt.Sprintf("blksize %d", blk), "--option", fmt.Sprintf("windowsize %d", win),
						"--option", "tsize 0", "-g", "-r", "img.bin", "-l", out, ip, srv.port}
					os.Remove(out)
					cpu0 := cpuSeconds(t, srv.proc)
					start := time.Now()
					if o, err := nstest.Output(p.Client, 10*time.Minute, "atftp", args...); err != nil {
						t.Fatalf("%s: atftp %s: %v\n%s", srv.name, strings.Join(args, " "), err, o)
					}
					k := key(srv.name, blk, win)
					secs[k] = append(secs[k], time.Since(start).Seconds())
					cpu[k] = append(cpu[k], cpuSeconds(t, srv.proc)-cpu0)
					if fi, err := os.Stat(out); err != nil || fi.Size() != int64(mb<<20) {
						t.Fatalf("%s: fetched file is wrong: %v", srv.name, err)
					}
				}
			}
		}
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "blksize\twindowsize\t")
	for _, srv := range servers {
		fmt.Fprintf(tw, "%s Mbit/s\tCPU s\t", srv.name)
	}
	fmt.Fprintf(tw, "runs (s)\t\n")
	for _, blk := range blks {
		for _, win := range wins {
			fmt.Fprintf(tw, "%d\t%d\t", blk, win)
			var all []string
			for _, srv := range servers {
				s := secs[key(srv.name, blk, win)]
				fmt.Fprintf(tw, "%.0f\t%.2f\t", float64(mb<<20)*8/measure.Median(s)/1e6, measure.Median(cpu[key(srv.name, blk, win)]))
				all = append(all, srv.name+" "+fmtSecs(s))
			}
			fmt.Fprintf(tw, "%s\t\n", strings.Join(all, "; "))
		}
	}
	tw.Flush()
	t.Logf("TFTP windowsize over %s, %d MiB file, atftp client, median of %d (wall time of atftp):\n%s",
		link, mb, runs, table.String())
}

// cpuSeconds is the user+system CPU time a server process used so far
// (exited threads included), from /proc/PID/stat.
func cpuSeconds(t *testing.T, p *nstest.Proc) float64 {
	u, s, err := peers.ProcCPU(p.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return u + s
}

func fmtSecs(s []float64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strings.Join(parts, " ")
}
