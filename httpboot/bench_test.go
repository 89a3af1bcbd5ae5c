//go:build linux

package httpboot

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/measure"
	"golang.org/x/sys/unix"
)

// BenchmarkServe compares image download throughput of pxeperf's handler,
// the same handler behind a wrapper that hides io.ReaderFrom (no sendfile),
// Go's http.FileServer and nginx (sendfile on), one client and 32 clients at
// once. One op is every client fetching the whole file once; MB/s is the
// aggregate. Knobs:
//
//	PXEPERF_BENCH_MB=256        file size in MiB
//	PXEPERF_BENCH_NET=veth      server and client in two namespaces over veth
//	                            (MTU 1500, needs root); default loopback
//
// go test ./httpboot -run '^$' -bench BenchmarkServe -benchtime 3x
//
// On a shared, noisy machine prefer TestBenchTable, which interleaves the
// servers round by round and prints medians.
func BenchmarkServe(b *testing.B) {
	servers, client, size := benchSetup(b)
	for _, s := range servers {
		for _, clients := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/clients=%d", s.name, clients), func(b *testing.B) {
				b.SetBytes(size * int64(clients))
				for range b.N {
					if err := peers.FetchConcurrent(client, s.url+"/bench.img", size, clients); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestBenchTable (PXEPERF_BENCH=1, run with -v) measures the same matrix as
// BenchmarkServe in interleaved rounds (PXEPERF_BENCH_ROUNDS, default 5) so
// load from other processes hits every server alike, and logs a table of
// median and best MB/s.
func TestBenchTable(t *testing.T) {
	peers.Require(t, "benchmark table: set PXEPERF_BENCH=1 (and -v) to run")
	rounds := peers.Rounds(5)
	servers, client, size := benchSetup(t)
	type key struct {
		server  string
		clients int
	}
	res := map[key][]float64{}
	for range rounds {
		for _, clients := range []int{1, 32} {
			for _, s := range servers {
				start := time.Now()
				if err := peers.FetchConcurrent(client, s.url+"/bench.img", size, clients); err != nil {
					t.Fatal(err)
				}
				k := key{s.name, clients}
				res[k] = append(res[k], float64(size)*float64(clients)/time.Since(start).Seconds()/1e6)
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d MiB file, %s, %d rounds, MB/s (10^6 B/s) median / best\n", size>>20, benchNet(), rounds)
	fmt.Fprintf(&sb, "%-28s %22s %22s\n", "server", "1 client", "32 clients")
	for _, s := range servers {
		fmt.Fprintf(&sb, "%-28s", s.name)
		for _, clients := range []int{1, 32} {
			v := res[key{s.name, clients}]
			fmt.Fprintf(&sb, " %10.0f / %9.0f", measure.Median(v), slices.Max(v))
		}
		sb.WriteString("\n")
	}
	t.Log(sb.String())
}

type benchServer struct{ name, url string }

func benchNet() string {
	if peers.Env("PXEPERF_BENCH_NET") == "veth" {
		return "veth between two namespaces (MTU 1500)"
	}
	return "loopback"
}

// benchSetup writes the test file and starts every server once.
func benchSetup(tb testing.TB) ([]benchServer, *http.Client, int64) {
	mb := peers.EnvInt("PXEPERF_BENCH_MB", 256)
	size := int64(mb) << 20
	root := tb.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	peers.WriteFile(tb, filepath.Join(root, "bench.img"), size)

	// Where servers listen and how clients dial.
	serverNS, host := "", "127.0.0.1"
	dial := (&net.Dialer{}).DialContext
	if peers.Env("PXEPERF_BENCH_NET") == "veth" {
		p := nstest.NewPair(tb, nstest.Options{})
		serverNS, host = p.Server, p.ServerIP.String()
		dial = nstest.DialContext(p.Client)
	}
	inNS := func(fn func() error) {
		var err error
		if serverNS == "" {
			err = fn()
		} else {
			err = nstest.Do(serverNS, fn)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	var ln net.Listener
	inNS(func() (err error) { ln, err = net.Listen("tcp", host+":0"); return err })
	fsrv := &http.Server{Handler: http.FileServer(http.Dir(root))}
	go fsrv.Serve(ln)
	tb.Cleanup(func() { fsrv.Close() })
	servers := []benchServer{
		{"pxeperf", benchPxeperf(tb, root, host, inNS, false)},
		{"pxeperf-ReaderFrom-hidden", benchPxeperf(tb, root, host, inNS, true)},
		{"go-FileServer", "http://" + ln.Addr().String()},
	}
	if _, err := exec.LookPath("nginx"); err == nil {
		servers = append(servers, benchServer{"nginx", benchNginx(tb, root, host, serverNS)})
	} else {
		tb.Log("nginx not installed (apt-get install nginx-light): no nginx row")
	}
	tr := &http.Transport{DialContext: dial, DisableCompression: true, MaxIdleConnsPerHost: 64}
	tb.Cleanup(tr.CloseIdleConnections)
	return servers, &http.Client{Transport: tr, Timeout: 10 * time.Minute}, size
}

func benchPxeperf(b testing.TB, root, host string, inNS func(func() error), hide bool) string {
	store, err := images.Open(root, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	h := defaultHTTP()
	h.Listen = host + ":0"
	var s *Server
	inNS(func() (err error) { s, err = New(Options{HTTP: h, Images: store}); return err })
	if hide {
		s.srv.Handler = hiding(s)
	}
	b.Cleanup(func() { store.Close() }) // after Serve has returned
	servetest.Run(b, "pxeperf", 30*time.Second, s.Serve)
	return "http://" + s.Addr().String()
}

// benchNginx runs nginx with sendfile on a temp config; skips when missing.
func benchNginx(b testing.TB, root, host, ns string) string {
	nstest.RequireTool(b, "nginx")
	var port int
	{
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	dir := b.TempDir()
	conf := peers.WriteNginxConf(b, dir, root, net.JoinHostPort(host, strconv.Itoa(port)))
	args := []string{"-p", dir, "-c", conf, "-g", "daemon off;"}
	cmd := exec.Command("nginx", args...)
	if ns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, "nginx"}, args...)...)
	}
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	out := &nstest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGTERM)
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("http://%s:%d", host, port)
	if !nstest.WaitFor(5*time.Second, func() bool {
		var err error
		if ns == "" {
			var c net.Conn
			c, err = net.DialTimeout("tcp", fmt.Sprintf("%s:%d", host, port), time.Second)
			if err == nil {
				c.Close()
			}
		} else {
			err = nstest.Do(ns, func() error {
				c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", host, port), time.Second)
				if err == nil {
					c.Close()
				}
				return err
			})
		}
		return err == nil
	}) {
		b.Fatalf("nginx did not start:\n%s", out.String())
	}
	return url
}
