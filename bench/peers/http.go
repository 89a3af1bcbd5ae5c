//go:build linux

package peers

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/netlab"
)

// HTTPCase is one HTTP measurement: a link ("veth" unshaped, or "tbf", a
// 1 Gbit/s token bucket on the server's veth end) and a stream count.
type HTTPCase struct {
	Link    string
	Streams int
}

func (c HTTPCase) String() string { return fmt.Sprintf("%s/%d", c.Link, c.Streams) }

// HTTPRun is one server's figures for one case in one round.
type HTTPRun struct {
	CPUPerGiB float64 // server CPU seconds per GiB served
	Gbps      float64 // client goodput, all streams
}

// HTTPLab serves two files (one.img for a single stream, many.img for each
// of 32) from one root with pxeperf (the real binary, `pxeperf serve`,
// records and all), nginx (sendfile on) and whatever else a test adds,
// each in the server namespace of Pair; the client is the test process in
// the client namespace.
type HTTPLab struct {
	Pair       *nstest.Pair
	Root       string
	Servers    []*Server
	URLs       map[string]string
	Size1      int64 // bytes of one.img
	SizeMany   int64 // bytes of many.img
	client     *http.Client
	transport  *http.Transport
	shaped     bool
	nextPort   int
	listenHost string
}

// NewHTTPLab writes the files and starts pxeperf (bin) and nginx.
func NewHTTPLab(t testing.TB, p *nstest.Pair, bin string, mb1, mbMany int) *HTTPLab {
	t.Helper()
	l := &HTTPLab{Pair: p, Root: t.TempDir(), URLs: map[string]string{}, Size1: int64(mb1) << 20,
		SizeMany: int64(mbMany) << 20, nextPort: 8081, listenHost: p.ServerIP.String()}
	if err := os.Chmod(l.Root, 0o755); err != nil { // nginx workers read as root, but be plain
		t.Fatal(err)
	}
	// Each case starts from the same TCP state: the pair is a netlab
	// testbed, whose namespaces keep no TCP metrics (netlab's
	// forgetTCPMetrics); otherwise one case's cached metrics size nginx's
	// buffers in the next and skew its row (see
	// bench/DESIGN.md#tcp-metrics-between-cases).
	WriteFile(t, filepath.Join(l.Root, "one.img"), l.Size1)
	WriteFile(t, filepath.Join(l.Root, "many.img"), l.SizeMany)
	l.transport = &http.Transport{
		DialContext:        nstest.DialContext(p.Client),
		DisableCompression: true, MaxIdleConnsPerHost: 64,
	}
	t.Cleanup(l.transport.CloseIdleConnections)
	l.client = &http.Client{Transport: l.transport, Timeout: 30 * time.Minute}

	l.AddPxeperf(t, "pxeperf", bin)
	addr := l.NextAddr()
	dir := t.TempDir()
	conf := WriteNginxConf(t, dir, l.Root, addr)
	l.Add(t, Start(t, p.Server, "nginx", "nginx", "-p", dir, "-c", conf, "-g", "daemon off;"), addr)
	return l
}

// AddPxeperf starts `pxeperf serve` of binary bin (records and all) as a
// server named name: "pxeperf" for the tree's own, another name for a
// binary to compare with in the same rounds (TestPeers's
// PXEPERF_BENCH_ALTBIN).
func (l *HTTPLab) AddPxeperf(t testing.TB, name, bin string) {
	t.Helper()
	addr := l.NextAddr()
	l.Add(t, Start(t, l.Pair.Server, name, bin, "serve", "--dhcp", "off", "--tftp-addr", "off",
		"--admin-addr", "off", "--iface", l.Pair.ServerIf, "--addr", l.listenHost, "--http-addr", addr,
		"--root", l.Root, "--data", t.TempDir(), "--log-level", LogLevel()), addr)
}

// NextAddr is a free host:port on the server side for the next server.
func (l *HTTPLab) NextAddr() string {
	a := net.JoinHostPort(l.listenHost, strconv.Itoa(l.nextPort))
	l.nextPort++
	return a
}

// Add waits until s accepts on addr and puts it in the rotation.
func (l *HTTPLab) Add(t testing.TB, s *Server, addr string) {
	t.Helper()
	if !nstest.WaitFor(20*time.Second, func() bool {
		return nstest.Do(l.Pair.Client, func() error {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}) == nil
	}) {
		t.Fatalf("%s did not start on %s:\n%s", s.Name, addr, s.Proc.Out.String())
	}
	l.Servers = append(l.Servers, s)
	l.URLs[s.Name] = "http://" + addr
}

// Shape puts a 1 Gbit/s tbf on the server's veth end (netlab's sizing for
// 1gbit: burst rate/HZ, 20 ms of queue), or takes it off.
func (l *HTTPLab) Shape(t testing.TB, on bool) {
	if on == l.shaped {
		return
	}
	Shape(t, l.Pair, netlab.Server, on)
	l.shaped = on
}

// Round measures case c once for every server, in round r's rotation.
func (l *HTTPLab) Round(t testing.TB, c HTTPCase, r int) map[string]HTTPRun {
	t.Helper()
	l.Shape(t, c.Link == "tbf")
	file, size := "/one.img", l.Size1
	if c.Streams > 1 {
		file, size = "/many.img", l.SizeMany
	}
	gib := float64(size) * float64(c.Streams) / (1 << 30)
	out := map[string]HTTPRun{}
	for _, s := range Rotate(l.Servers, r) {
		before := s.CPU(t)
		t0 := time.Now()
		if err := FetchConcurrent(l.client, l.URLs[s.Name]+file, size, c.Streams); err != nil {
			t.Fatalf("%s %s: %v", s.Name, c, err)
		}
		wall := time.Since(t0).Seconds()
		l.transport.CloseIdleConnections()
		out[s.Name] = HTTPRun{CPUPerGiB: (s.CPU(t) - before) / gib, Gbps: gib * (1 << 30) * 8 / wall / 1e9}
	}
	return out
}

// FetchConcurrent has n clients fetch url at once, each checking it got
// size bytes and 200.
func FetchConcurrent(c *http.Client, url string, size int64, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- fetchAll(c, url, size) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func fetchAll(c *http.Client, url string, size int64) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := make([]byte, 1<<20)
	// writerOnly hides io.Discard's ReaderFrom, so the client reads
	// through buf like a real one instead of a pooled 8 KiB buffer.
	n, err := io.CopyBuffer(writerOnly{io.Discard}, resp.Body, buf)
	if err != nil {
		return err
	}
	if n != size || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s, %d of %d bytes", url, resp.Status, n, size)
	}
	return nil
}

type writerOnly struct{ io.Writer }

// WriteFile writes size bytes of a fixed pseudo-random pattern to path.
func WriteFile(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	x := uint64(42)
	for i := 0; i+8 <= len(chunk); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := range 8 {
			chunk[i+j] = byte(x >> (8 * j))
		}
	}
	for off := int64(0); off < size; off += int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), size-off)]); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteNginxConf writes an nginx config serving root on addr (host:port)
// with sendfile and tcp_nopush, two workers, no access log, and returns
// its path.
func WriteNginxConf(t testing.TB, dir, root, addr string) string {
	t.Helper()
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
  server { listen %[2]s; root %[3]s; }
}
`, dir, addr, root)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// HelperEnv names the environment variable a helper process reads its
// kind from; HelperAddr and HelperRoot where it serves what.
const (
	HelperEnv  = "PXEPERF_BENCH_HELPER"
	HelperAddr = "PXEPERF_BENCH_HELPER_ADDR"
	HelperRoot = "PXEPERF_BENCH_HELPER_ROOT"
)

// StartHelper starts this test binary again in ns, running only test
// (which must call ServeHelper or handle the kind itself), as a server of
// the given kind on addr serving root.
func StartHelper(t testing.TB, ns, name, test, kind, addr, root string, env ...string) *Server {
	t.Helper()
	t.Setenv(HelperEnv, kind)
	t.Setenv(HelperAddr, addr)
	t.Setenv(HelperRoot, root)
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	return Start(t, ns, name, os.Args[0], "-test.run=^"+test+"$")
}

// ServeFileServer serves root on addr with Go's http.FileServer until ctx
// ends: the plain-Go peer.
func ServeFileServer(ctx context.Context, addr, root string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(root))}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
