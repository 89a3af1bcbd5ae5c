package httpboot

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// testEnv is a Server on 127.0.0.1:0 serving a temp root.
type testEnv struct {
	srv     *Server
	url     string // http://127.0.0.1:PORT
	root    string
	rec     *event.Recorder
	serving *servetest.Serving // Stop and Wait for the tests of shutdown
}

type envOpts struct {
	http    configs.HTTP
	hosts   []configs.Host
	observe []hosts.Client
	files   map[string][]byte // root-relative name -> content
	logger  *slog.Logger
	// before runs after New and before Serve (to wrap the listener, ...).
	before func(*Server)
	// generate serves loader configs generated from hosts (bootcfg).
	generate bool
	// unstamped hands the server's own events to the recorder, without
	// hosts.Stamping before it.
	unstamped bool
}

func defaultHTTP() configs.HTTP {
	return configs.HTTP{
		Enabled:           true,
		Listen:            "127.0.0.1:0",
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       5 * time.Second,
		StallTimeout:      10 * time.Second,
		ShutdownGrace:     10 * time.Second,
	}
}

func newTestEnv(t testing.TB, o envOpts) *testEnv {
	t.Helper()
	root := t.TempDir()
	for name, b := range o.files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	store, err := images.Open(root, t.TempDir(), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ht := o.http
	if ht.Listen == "" {
		ht = defaultHTTP()
	}
	tbl := hosts.New(o.hosts)
	for _, c := range o.observe {
		tbl.Observe(c)
	}
	rec := &event.Recorder{}
	var files *bootcfg.Source
	if o.generate {
		files, err = bootcfg.New(bootcfg.Options{Config: &configs.Config{Hosts: o.hosts}, Images: store, Hosts: tbl})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The sink as serve wires it: every event learns its host entry's
	// name and labels (hosts.Stamping) before any sink sees it.
	var sink event.Sink = hosts.Stamping{Table: tbl, Next: rec}
	if o.unstamped {
		sink = rec
	}
	s, err := New(Options{HTTP: ht, Images: store, Files: files, Hosts: tbl, Sink: sink, Logger: logger, Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	if o.before != nil {
		o.before(s)
	}
	serving := servetest.Run(t, "http", 15*time.Second, s.Serve)
	return &testEnv{srv: s, url: "http://" + s.Addr().String(), root: root, rec: rec, serving: serving}
}

// waitFetches polls the recorder until n fetches are in (10 s at most).
func (e *testEnv) waitFetches(t testing.TB, n int) []event.Fetch {
	t.Helper()
	f, ok := e.rec.WaitFetches(n, 10*time.Second)
	if !ok {
		t.Fatalf("got %d fetch events, want %d", len(f), n)
	}
	return f
}

// rawGet sends a request line exactly as given (no client-side path
// cleaning) and returns the response with its body read.
func rawGet(t testing.TB, addr, target string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: pxeperf\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", target, err)
	}
	return resp, b
}

// pattern returns n deterministic, incompressible-ish bytes.
func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	x := seed | 1
	for i := 0; i+8 <= n; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := range 8 {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	return b
}

func rawClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 30 * time.Second}
}

func mustMAC(s string) configs.MAC {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return configs.MAC{HardwareAddr: hw}
}

func imagesOpen(root, data string) (*images.Store, error) { return images.Open(root, data, nil) }
