//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
	"github.com/pxeperf/pxeperf/tftp"
)

// Load test: the real `pxeperf serve` on loopback ports, 200 TFTP and 200
// HTTP clients in this process fetching again and again for
// PXEPERF_LOAD_DURATION (default 60 s; longer as a benchmark, e.g.
// PXEPERF_LOAD_DURATION=10m go test -run TestLoad -timeout 30m ./e2e).
// Every transfer is checked byte for byte (sha256); the server's RSS,
// threads and open files are sampled from /proc during and after. /healthz
// counts no goroutines, so leaks are judged from open files (every
// connection and transfer socket is one) and threads, and from /healthz's
// count of active HTTP fetches.
const (
	loadTFTPClients = 200
	loadHTTPClients = 200
	// loadRSSPeak bounds the server's resident memory under the load. The
	// server keeps no per-client buffers beyond a TFTP window (64 × 1468
	// bytes) and an 8 KiB goroutine stack per connection; HTTP bodies go by
	// sendfile. Measured ~40-60 MiB on loopback: 256 MiB leaves room for
	// the record store's SQLite cache and the Go heap's slack, and still
	// catches a buffer per request that is never freed (200 × 1 MiB files).
	loadRSSPeak = 256 << 20
	// loadRSSGrowth bounds how far RSS may stay above the warmed-up baseline
	// once the load is over: Go returns freed pages to the OS only slowly
	// (the scavenger), so a settled server keeps some of its peak, but not
	// a leak's worth.
	loadRSSGrowth = 128 << 20
)

// loadFile is one file the clients fetch, with what they must receive.
type loadFile struct {
	name string
	size int64
	sum  string
}

func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: 60 s of 400 clients; skipped with -short")
	}
	dur := loadDuration(t)
	r := startLoadServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), dur+2*time.Minute)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: loadHTTPClients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	r.tr, r.hc = tr, &http.Client{Transport: tr, Timeout: time.Minute}

	// Warm up: every client once, so the baseline holds what the server
	// opens on first use (the cache folder, the record store's files).
	var warm loadTally
	r.runClients(ctx, time.Now(), &warm)
	if warm.failed() {
		t.Fatalf("warm-up failed: %s\nserver log (tail):\n%s", warm.errors(), nstest.Tail(r.srv.Out.String(), 20))
	}
	before := r.baseline()
	t.Logf("baseline after warm-up: RSS %.1f MiB, %d threads, %d open files", mib(before.RSS), before.Threads, before.FDs)

	// The load.
	var tally loadTally
	start := time.Now()
	peak, samples := r.sampledWhile(before, func() { r.runClients(ctx, start.Add(dur), &tally) })
	took := time.Since(start)
	after, h, settled := r.settle(before)

	secs := took.Seconds()
	t.Logf("%d s: TFTP %d transfers (%.0f/s, %.0f Mbit/s), HTTP %d transfers (%.0f/s, %.0f Mbit/s); TFTP early ACKs %d, client timeouts %d, transfers given up and restarted %d",
		int(secs), tally.tftpN.Load(), float64(tally.tftpN.Load())/secs, float64(tally.tftpBytes.Load())*8/secs/1e6,
		tally.httpN.Load(), float64(tally.httpN.Load())/secs, float64(tally.httpBytes.Load())*8/secs/1e6,
		tally.tftpEarly.Load(), tally.tftpTimeouts.Load(), tally.tftpGaveUp.Load())
	t.Logf("server: RSS %.1f MiB before, %.1f MiB peak, %.1f MiB after; threads %d / %d / %d; open files %d / %d / %d; %d samples",
		mib(before.RSS), mib(peak.RSS), mib(after.RSS), before.Threads, peak.Threads, after.Threads,
		before.FDs, peak.FDs, after.FDs, samples)
	checkLoad(t, &tally, before, peak, after)
	if !settled {
		t.Errorf("15 s after the load: %d open files (baseline %d), %d active HTTP fetches: a leak", after.FDs, before.FDs, h.Active)
	}
	if peak.Threads > 256 {
		t.Errorf("server ran %d threads: something blocks an OS thread per request", peak.Threads)
	}
	if t.Failed() {
		t.Logf("server log (tail):\n%s", nstest.Tail(r.srv.Out.String(), 30))
	}
}

// loadDuration is PXEPERF_LOAD_DURATION, 60 s without it.
func loadDuration(t *testing.T) time.Duration {
	v := os.Getenv("PXEPERF_LOAD_DURATION")
	if v == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("PXEPERF_LOAD_DURATION=%q: want a duration such as 10m", v)
	}
	return d
}

// loadRun is the load test's server and what its clients fetch.
type loadRun struct {
	t                    *testing.T
	srv                  *nstest.Proc
	pid                  int
	base                 string // the HTTP port's URL
	tftpAddr             netip.AddrPort
	tftpFiles, httpFiles []loadFile
	tr                   *http.Transport
	hc                   *http.Client
}

// startLoadServe writes the clients' files and starts the real `pxeperf
// serve` on loopback ports for them, waiting until it answers /healthz.
func startLoadServe(t *testing.T) *loadRun {
	bin := nstest.Binary(t)
	dir := t.TempDir()
	root, data := filepath.Join(dir, "root"), filepath.Join(dir, "data")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &loadRun{t: t}
	r.tftpFiles, r.httpFiles = loadFiles(t, root)
	tftpPort, httpPort := testenv.FreePort(t, "udp"), testenv.FreePort(t, "tcp")
	cfg := fmt.Sprintf(`root: %s
data: %s
log_level: warn
dhcp:
  mode: off
tftp:
  listen: 127.0.0.1:%d
  max_blksize: 1468
  max_transfers_per_client: 1024
http:
  listen: 127.0.0.1:%d
  max_conns_per_client: 2048
admin:
  listen: "off"
`, root, data, tftpPort, httpPort)
	// All 400 clients share 127.0.0.1, where a lab's boards each have an
	// address of their own: the per-client caps are lifted to the global
	// ones so this test measures the server, not the budget for one board.
	cfgPath := filepath.Join(dir, "pxeperf.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r.srv = nstest.Start(t, "", bin, "serve", "--config", cfgPath, "--iface", "lo", "--addr", "127.0.0.1")
	r.base = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	if !nstest.WaitFor(15*time.Second, func() bool { _, err := health(r.base); return err == nil }) {
		t.Fatalf("pxeperf did not start:\n%s", r.srv.Out.String())
	}
	r.pid = r.srv.Cmd.Process.Pid
	r.tftpAddr = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(tftpPort))
	return r
}

// loadFiles writes the files under root: TFTP gets boot-loader sized
// files, HTTP kernels and an initrd; both get one image stored only
// compressed (served from the unpack cache).
func loadFiles(t *testing.T, root string) (tftpFiles, httpFiles []loadFile) {
	mk := func(name string, size int, seed uint64) loadFile {
		nstest.RandomFile(t, filepath.Join(root, name), size, seed)
		return loadFile{name: name, size: int64(size), sum: nstest.FileSHA256(t, filepath.Join(root, name))}
	}
	tftpFiles = []loadFile{mk("pxelinux.0", 42<<10, 1), mk("ipxe.efi", 1<<20, 2)}
	httpFiles = []loadFile{mk("vmlinuz", 6<<20, 3), mk("boot.ipxe.bin", 300<<10, 4)}
	packed := mk("initrd.img", 2<<20, 5)
	compressTo(t, filepath.Join(root, "initrd.img"), filepath.Join(root, "initrd.img.zst"))
	return append(tftpFiles, packed), append(httpFiles, packed)
}

// baseline is what the server holds once the warm-up's connections are
// closed: no active fetch and the same open files for half a second.
func (r *loadRun) baseline() nstest.Usage {
	r.tr.CloseIdleConnections()
	var before nstest.Usage
	stable := 0
	nstest.WaitFor(10*time.Second, func() bool {
		h, _ := health(r.base)
		s := sampleProc(r.t, r.pid)
		if h.Active == 0 && s.FDs == before.FDs {
			stable++
		} else {
			stable = 0
		}
		before = s
		return stable >= 10
	})
	return before
}

// sampledWhile runs load while sampling the server every 500 ms and
// returns the peak (from `from` up) and the count of samples.
func (r *loadRun) sampledWhile(from nstest.Usage, load func()) (peak nstest.Usage, samples int) {
	peak = from
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			peak = peak.Max(sampleProc(r.t, r.pid))
			samples++
		}
	}()
	load()
	close(stop)
	<-sampled
	return peak, samples
}

// settle waits (15 s at most) until the load's connections are gone: no
// active HTTP fetch and no more open files than before.
func (r *loadRun) settle(before nstest.Usage) (after nstest.Usage, h nstest.Health, settled bool) {
	r.tr.CloseIdleConnections()
	settled = nstest.WaitFor(15*time.Second, func() bool {
		h, _ = health(r.base)
		after = sampleProc(r.t, r.pid)
		return h.Active == 0 && after.FDs <= before.FDs
	})
	return after, h, settled
}

// checkLoad fails t on failed, given-up or too few transfers, and on a
// server that held too much memory.
func checkLoad(t *testing.T, tally *loadTally, before, peak, after nstest.Usage) {
	t.Helper()
	if tally.failed() {
		t.Errorf("failed transfers: %s", tally.errors())
	}
	// A transfer given up after 10 s without a packet is the machine
	// starving both processes, not wrong bytes; many of them is a stall.
	if g := tally.tftpGaveUp.Load(); g*10 > tally.tftpN.Load() {
		t.Errorf("%d TFTP transfers timed out against %d done: more than 10%%", g, tally.tftpN.Load())
	}
	if tally.tftpN.Load() < loadTFTPClients || tally.httpN.Load() < loadHTTPClients {
		t.Errorf("too few transfers: TFTP %d, HTTP %d (each client fetches repeatedly)", tally.tftpN.Load(), tally.httpN.Load())
	}
	if peak.RSS > loadRSSPeak {
		t.Errorf("server RSS peaked at %.1f MiB, over the %d MiB bound", mib(peak.RSS), loadRSSPeak>>20)
	}
	if after.RSS > before.RSS+loadRSSGrowth {
		t.Errorf("server RSS settled at %.1f MiB, more than %d MiB over the %.1f MiB baseline", mib(after.RSS), loadRSSGrowth>>20, mib(before.RSS))
	}
}

// runClients runs every client until deadline (each at least once) and
// waits for them.
func (r *loadRun) runClients(ctx context.Context, deadline time.Time, tally *loadTally) {
	var wg sync.WaitGroup
	for i := range loadTFTPClients {
		wg.Go(func() { r.tftpClient(ctx, i, deadline, tally) })
	}
	for i := range loadHTTPClients {
		wg.Go(func() { r.httpClient(ctx, i, deadline, tally) })
	}
	wg.Wait()
}

// tftpClient is TFTP client i: it fetches the TFTP files in turn, each
// checked, until deadline (at least once) or its first failure.
func (r *loadRun) tftpClient(ctx context.Context, i int, deadline time.Time, tally *loadTally) {
	// Firmware asks for no window (RFC 1350 lock-step: PXE ROMs,
	// iPXE) or small ones (EDK2 4, U-Boot's CONFIG_TFTP_WINDOWSIZE),
	// and gives up after 10 timeouts in a row (U-Boot's
	// TIMEOUT_COUNT).
	opt := tftp.ClientOptions{BlkSize: 1468, WindowSize: []int{0, 4, 8, 16}[i%4], Timeout: time.Second, Retries: 10}
	h := sha256.New()
	for n := i; ctx.Err() == nil; n++ {
		f := r.tftpFiles[n%len(r.tftpFiles)]
		h.Reset()
		st, err := tftpGet(ctx, r.tftpAddr, f.name, h, opt)
		if errors.Is(err, tftp.ErrTimeout) && ctx.Err() == nil {
			// Firmware starts the transfer again; on a starved
			// machine a transfer may time out (counted, bounded).
			tally.tftpGaveUp.Add(1)
			continue
		}
		if err == nil {
			err = check(f, st.Bytes, h)
		}
		if err != nil {
			tally.fail("tftp client %d, %s: %v", i, f.name, err)
			return
		}
		tally.tftpN.Add(1)
		tally.tftpBytes.Add(st.Bytes)
		tally.tftpEarly.Add(st.EarlyACKs)
		tally.tftpTimeouts.Add(st.Timeouts)
		if !time.Now().Before(deadline) {
			return
		}
	}
}

// httpClient is HTTP client i: it fetches the HTTP files in turn, each
// checked, until deadline (at least once) or its first failure.
func (r *loadRun) httpClient(ctx context.Context, i int, deadline time.Time, tally *loadTally) {
	h := sha256.New()
	for n := i; ctx.Err() == nil; n++ {
		f := r.httpFiles[n%len(r.httpFiles)]
		h.Reset()
		got, err := httpGet(ctx, r.hc, r.base+"/"+f.name, f.size, h)
		if err == nil {
			err = check(f, got, h)
		}
		if err != nil {
			tally.fail("http client %d, %s: %v", i, f.name, err)
			return
		}
		tally.httpN.Add(1)
		tally.httpBytes.Add(got)
		if !time.Now().Before(deadline) {
			return
		}
	}
}

// tftpGet fetches through a new socket, as firmware takes a new port
// (transfer ID) for each transfer: a late packet of the last transfer must
// not be taken for the first of this one.
func tftpGet(ctx context.Context, server netip.AddrPort, name string, w io.Writer, opt tftp.ClientOptions) (tftp.ClientStats, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return tftp.ClientStats{}, err
	}
	defer conn.Close()
	return tftp.Get(ctx, conn, server, name, w, opt)
}

func httpGet(ctx context.Context, hc *http.Client, url string, size int64, h hash.Hash) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("HTTP %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if resp.ContentLength != size {
		return 0, fmt.Errorf("Content-Length %d, want %d", resp.ContentLength, size)
	}
	return io.Copy(h, resp.Body)
}

func check(f loadFile, n int64, h hash.Hash) error {
	if sum := hex.EncodeToString(h.Sum(nil)); n != f.size || sum != f.sum {
		return fmt.Errorf("got %d bytes sha256 %.12s…, want %d bytes %.12s…", n, sum, f.size, f.sum)
	}
	return nil
}

// loadTally counts what the clients did.
type loadTally struct {
	tftpN, tftpBytes, tftpEarly, tftpTimeouts atomic.Int64
	tftpGaveUp                                atomic.Int64 // transfers the client gave up on (10 timeouts in a row) and started again
	httpN, httpBytes                          atomic.Int64

	mu   sync.Mutex
	errs []string
	nerr int
}

func (l *loadTally) fail(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nerr++
	if len(l.errs) < 10 {
		l.errs = append(l.errs, fmt.Sprintf(format, a...))
	}
}

func (l *loadTally) failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nerr > 0
}

func (l *loadTally) errors() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d clients stopped on an error, first ones:\n  %s", l.nerr, strings.Join(l.errs, "\n  "))
}

// sampleProc is what the server process holds (nstest.ProcUsage); a
// vanished server fails the test.
func sampleProc(t *testing.T, pid int) nstest.Usage {
	t.Helper()
	u, err := nstest.ProcUsage(pid)
	if err != nil && u.RSS == 0 {
		t.Errorf("server gone? %v", err)
	}
	return u
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// health is the boot port's /healthz, decoded.
func health(base string) (nstest.Health, error) {
	var h nstest.Health
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// compressTo writes src zstd-compressed to dst and removes src, so the
// server has only the compressed file and serves it through its cache.
func compressTo(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
}
