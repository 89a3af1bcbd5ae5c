//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/tftp"
)

// TestLiveOverhead measures what the live view costs (issue 11: within 2%
// of a run without it). Two `pxeperf serve` run side by side on loopback
// from the same image root, both recording every fetch: "live" with the
// admin listener scraped by a Prometheus-like client every second, a
// dashboard's event stream open and /api/recent polled every two seconds;
// "off" with --admin-addr off. Fetches alternate between them (HTTP 256
// MiB, TFTP 64 MiB at 1468 x 16), and each fetch's server CPU is the
// serving process's own CPU time across it (schedstat, in ns). It prints medians and the
// live/off ratios; no pass/fail on speed.
//
//	PXEPERF_BENCH=1 PXEPERF_BENCH_ROUNDS=7 go test -run TestLiveOverhead -v ./cmd/pxeperf
func TestLiveOverhead(t *testing.T) {
	peers.Require(t, "set PXEPERF_BENCH=1 to measure the live view's overhead (a few minutes)")
	rounds := peers.Rounds(5)
	bin := nstest.Binary(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	const httpSize, tftpSize = 256 << 20, 64 << 20
	nstest.RandomFile(t, filepath.Join(img, "big.img"), httpSize, 3)
	nstest.RandomFile(t, filepath.Join(img, "tftp.img"), tftpSize, 4)

	type server struct {
		name                                 string
		pid                                  int
		http, admin                          string
		tftp                                 netip.AddrPort
		httpMbps, tftpMbps, httpCPU, tftpCPU []float64
	}
	start := func(name string, live bool) *server {
		s := &server{name: name, http: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t, "tcp")), admin: "off"}
		s.tftp = netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t, "udp")))
		if live {
			s.admin = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t, "tcp"))
		}
		cmd, _ := startLoopbackServe(t, bin, dir, "http boot serving",
			"--tftp-addr", s.tftp.String(), "--http-addr", s.http, "--admin-addr", s.admin,
			"--root", img, "--data", filepath.Join(dir, name))
		s.pid = cmd.Process.Pid
		return s
	}
	live, off := start("live", true), start("off", false)

	// The live view's readers, for the whole run.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	poll := func(path string, every time.Duration) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				if n, err := getAll(ctx, "http://"+live.admin+path); err != nil && ctx.Err() == nil {
					t.Errorf("GET %s: %v", path, err)
				} else if n == 0 && ctx.Err() == nil {
					t.Errorf("GET %s: empty", path)
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	poll("/metrics", time.Second)
	poll("/api/recent", 2*time.Second)
	wg.Add(1)
	go func() { // a dashboard's event stream, read as it comes
		defer wg.Done()
		_, _ = getAll(ctx, "http://"+live.admin+"/api/active/stream")
	}()

	httpFetch := func(s *server) {
		cpu0 := procCPU(t, s.pid)
		t0 := time.Now()
		n, err := getAll(context.Background(), "http://"+s.http+"/big.img")
		el := time.Since(t0)
		cpu := procCPU(t, s.pid) - cpu0
		if err != nil || n != httpSize {
			t.Fatalf("%s: HTTP %d bytes, %v", s.name, n, err)
		}
		s.httpMbps = append(s.httpMbps, float64(n)*8/el.Seconds()/1e6)
		s.httpCPU = append(s.httpCPU, cpu.Seconds()/(float64(n)/(1<<30)))
	}
	tftpFetch := func(s *server) {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetReadBuffer(4 << 20)
		cpu0 := procCPU(t, s.pid)
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer fcancel()
		cs, err := tftp.Get(fctx, conn, s.tftp, "tftp.img", io.Discard, tftp.ClientOptions{BlkSize: 1468, WindowSize: 16})
		cpu := procCPU(t, s.pid) - cpu0
		if err != nil || cs.Bytes != tftpSize {
			t.Fatalf("%s: TFTP %d bytes, %v", s.name, cs.Bytes, err)
		}
		s.tftpMbps = append(s.tftpMbps, cs.Mbps())
		s.tftpCPU = append(s.tftpCPU, cpu.Seconds()/(float64(cs.Bytes)/(1<<30)))
	}
	// Warm both (page cache, the image cache, first connections).
	httpFetch(live)
	httpFetch(off)
	live.httpMbps, live.httpCPU, off.httpMbps, off.httpCPU = nil, nil, nil, nil
	for r := range rounds {
		order := []*server{live, off}
		if r%2 == 1 {
			order = []*server{off, live}
		}
		for _, s := range order {
			httpFetch(s)
		}
		for _, s := range order {
			tftpFetch(s)
		}
	}
	med := measure.Median[float64]
	var b strings.Builder
	fmt.Fprintf(&b, "%d rounds, live and off alternating; medians\n", rounds)
	fmt.Fprintf(&b, "%-5s %14s %14s %7s %16s %16s %7s\n", "proto", "live Mbit/s", "off Mbit/s", "ratio", "live CPU s/GiB", "off CPU s/GiB", "ratio")
	row := func(proto string, lm, om, lc, oc []float64) {
		fmt.Fprintf(&b, "%-5s %14.0f %14.0f %7.3f %16.3f %16.3f %7.3f\n", proto, med(lm), med(om), med(lm)/med(om), med(lc), med(oc), med(lc)/med(oc))
	}
	row("http", live.httpMbps, off.httpMbps, live.httpCPU, off.httpCPU)
	row("tftp", live.tftpMbps, off.tftpMbps, live.tftpCPU, off.tftpCPU)
	t.Logf("live view overhead (HTTP %d MiB, TFTP %d MiB 1468x16, loopback):\n%s", httpSize>>20, tftpSize>>20, b.String())
}

// getAll GETs url and reads the body to its end (or until ctx ends).
func getAll(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return io.Copy(io.Discard, resp.Body)
}

// procCPU is the time the process's threads have run on a CPU so far, in
// nanoseconds (the first field of each /proc/PID/task/TID/schedstat):
// /proc/PID/stat's utime and stime count 10 ms ticks, too coarse for a
// fetch that costs tens of milliseconds. Go keeps its threads, so none of
// the sum is lost to a thread that ended between two reads.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no threads of process %d: %v", pid, err)
	}
	var sum int64
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", p, b)
		}
		sum += ns
	}
	return time.Duration(sum)
}
