//go:build linux

package hostile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// The HTTP boot port's rows of issue 27 (9, 10, 13, 14, 15): what one
// board can make the boot port send, write or hold.

// httpYAML serves HTTP only, on port 80 of the pair's server side.
const httpYAML = `dhcp:
  mode: "off"
tftp:
  enabled: false
http:
  listen: ":80"
`

// writeFile puts n pseudo-random bytes at root/name (nstest.RandomFile:
// the same bytes each run).
func writeFile(t *testing.T, root, name string, n int) {
	t.Helper()
	nstest.RandomFile(t, filepath.Join(root, name), n, 27)
}

// sparse makes name a file of n zero bytes that takes no disk.
func sparse(t *testing.T, name string, n int64) {
	t.Helper()
	f, err := os.Create(name)
	if err == nil {
		err = f.Truncate(n)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// httpURL is the lab's URL for path.
func (l *lab) httpURL(path string) string { return "http://" + l.P.ServerIP.String() + path }

// dial opens a TCP connection from the client namespace to the boot port.
func (l *lab) dial(ctx context.Context) (net.Conn, error) {
	return nstest.DialContext(l.P.Client)(ctx, "tcp", l.P.ServerIP.String()+":80")
}

// curlOK is a real board's fetch of path with curl from the client
// namespace: it must come back 200 with size bytes.
func (l *lab) curlOK(path string, size int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		out, err := l.curl(ctx, "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", l.httpURL(path))
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("200 %d", size); strings.TrimSpace(string(out)) != want {
			return fmt.Errorf("curl got %q, want %q", out, want)
		}
		return nil
	}
}

// smallFetch is a real board's fetch of the 4 KiB /small.
func (l *lab) smallFetch() board { return board{"curl of a 4 KiB file", l.curlOK("/small", 4096)} }

// httpSiege runs fl against l to its end (d at most) within bound, with
// smallFetch a second into it, and at most 64 goroutines after.
func httpSiege(t *testing.T, l *lab, d time.Duration, bound nstest.Usage, fl flood) sieged {
	t.Helper()
	return siege(t, l, siegeOpts{Flood: fl, For: d, UntilFlood: true, Warm: time.Second, Boards: []board{l.smallFetch()},
		Bound: bound, MaxGoroutinesAfter: 64})
}

// keepAlive runs requests on one keep-alive connection until ctx ends or
// max requests are done: each is req's bytes, and its answer is read
// whole (HEAD answers have no body). reply gets each answer's size in
// bytes, header included.
func keepAlive(ctx context.Context, l *lab, req string, head bool, max int, reply func(int64)) (done int, err error) {
	c, err := l.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	br := bufio.NewReaderSize(c, 64<<10)
	for done < max && ctx.Err() == nil {
		if _, err := io.WriteString(c, req); err != nil {
			return done, err
		}
		n, err := readAnswer(br, head)
		if err != nil {
			return done, err
		}
		done++
		if reply != nil {
			reply(n)
		}
	}
	return done, nil
}

// readAnswer reads one HTTP/1.1 answer (Content-Length bodies only) and
// returns its size, header included.
func readAnswer(br *bufio.Reader, head bool) (int64, error) {
	var n, length int64
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return n, err
		}
		n += int64(len(line))
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if head {
		return n, nil
	}
	m, err := io.CopyN(io.Discard, br, length)
	return n + m, err
}

// manyRanges is a Range header of n one-byte ranges: the same byte n
// times when same (15,500 make the 62 KB header of the issue), else every
// other byte (5000 fit in net/http's 64 KiB of header). Both pass
// net/http's own check (ranges adding up to more than the file).
func manyRanges(n int, same bool) string {
	var b strings.Builder
	b.WriteString("bytes=")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if same {
			b.WriteString("0-0")
		} else {
			fmt.Fprintf(&b, "%d-%d", 2*i, 2*i)
		}
	}
	return b.String()
}

// rangeFlood (row 9) sends GETs of ranges.bin with 15,500 ranges of one
// byte or 5000 of every other byte, from four keep-alive connections, at
// most 400 in all, and keeps the largest answer in *largest.
func rangeFlood(largest *atomic.Int64) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		var wg sync.WaitGroup
		for i := range 4 {
			req := "GET /ranges.bin HTTP/1.1\r\nHost: pxe\r\nRange: " + manyRanges(15500, true) + "\r\n\r\n"
			if i%2 == 1 {
				req = "GET /ranges.bin HTTP/1.1\r\nHost: pxe\r\nRange: " + manyRanges(5000, false) + "\r\n\r\n"
			}
			wg.Go(func() {
				_, _ = keepAlive(ctx, l, req, false, 100, func(n int64) {
					for m := largest.Load(); n > m && !largest.CompareAndSwap(m, n); m = largest.Load() {
					}
				})
			})
		}
		wg.Wait()
	}
}

// TestHTTPManyRanges (row 9): 15,500 one-byte ranges in one header made
// a 2.25 MB multipart answer for a 64 KiB file, 0.25 s of CPU each. With
// http.max_ranges (16) the request is served whole: no answer is larger
// than the file and its header, and a real board is served within 1 s.
func TestHTTPManyRanges(t *testing.T) {
	const size = 64 << 10
	l := newLab(t, nstest.Options{}, httpYAML, func(root string) {
		writeFile(t, root, "ranges.bin", size)
		writeFile(t, root, "small", 4096)
	})
	var largest atomic.Int64
	peak := httpSiege(t, l, 4*time.Second, nstest.Usage{RSS: 256 << 20, FDs: 128}, rangeFlood(&largest)).Peak
	t.Logf("largest answer %d bytes for a %d-byte file; peak RSS %d MiB, %d fds", largest.Load(), size, peak.RSS>>20, peak.FDs)
	if largest.Load() < size {
		t.Fatalf("the flood's largest answer was %d bytes: not the file (refused?)", largest.Load())
	}
	if n := largest.Load(); n > size+4096 {
		t.Errorf("an answer of %d bytes to one request for a %d-byte file (want at most the file and its header: http.max_ranges)", n, size)
	}
}

// probeFlood (row 10) runs HEAD and Range: bytes=0-0 GETs, each on one
// keep-alive connection, at most 20,000 each, and adds them to *sent.
func probeFlood(sent *atomic.Int64) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		var wg sync.WaitGroup
		for _, r := range []struct {
			req  string
			head bool
		}{
			{"HEAD /probe.bin HTTP/1.1\r\nHost: pxe\r\n\r\n", true},
			{"GET /probe.bin HTTP/1.1\r\nHost: pxe\r\nRange: bytes=0-0\r\n\r\n", false},
		} {
			wg.Go(func() {
				n, _ := keepAlive(ctx, l, r.req, r.head, 20000, nil)
				sent.Add(int64(n))
			})
		}
		wg.Wait()
	}
}

// TestHTTPProbeRecords (row 10): HEAD or Range: bytes=0-0 in a loop on
// one keep-alive connection put a record each in the store (85k records,
// +31 MB in 10 s). Now each client's such records take from
// http.probe_records_per_minute (120, a burst of as many): past it they
// are answered, counted in pxeperf_refusals_total and not recorded.
func TestHTTPProbeRecords(t *testing.T) {
	l := newLab(t, nstest.Options{}, httpYAML, func(root string) {
		writeFile(t, root, "probe.bin", 1<<20)
		writeFile(t, root, "small", 4096)
	})
	var sent atomic.Int64
	peak := httpSiege(t, l, 3*time.Second, nstest.Usage{RSS: 256 << 20, FDs: 128}, probeFlood(&sent)).Peak
	// The records: what the sink got (the metrics sink counts each).
	var recs, refused float64
	nstest.WaitFor(2*time.Second, func() bool {
		recs, _ = l.S.Metric("pxeperf_fetches_total", `proto="http"`)
		refused, _ = l.S.Metric("pxeperf_refusals_total", `proto="http"`, `reason="HEAD and small range`)
		return recs+refused >= float64(sent.Load())
	})
	t.Logf("%d HEAD and 0-0 requests answered: %.0f records, %.0f counted over the budget; peak RSS %d MiB", sent.Load(), recs, refused, peak.RSS>>20)
	if sent.Load() < 1000 {
		t.Fatalf("only %d requests in the flood: too few to tell", sent.Load())
	}
	// Two bursts of 120 (HEAD and range share the client's budget: one)
	// plus the board's fetch and a few tokens refilled meanwhile.
	if recs > 160 {
		t.Errorf("%.0f records from one client's %d HEAD and 0-0 requests in 3 s (want at most 160: http.probe_records_per_minute 120)", recs, sent.Load())
	}
	if refused < float64(sent.Load())-recs {
		t.Errorf("%.0f refusals counted for %d requests not recorded", refused, sent.Load()-int64(recs))
	}
}

// zstdZeros writes name as n zero bytes, zstd-compressed (a few KiB).
func zstdZeros(t *testing.T, name string, n int64) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(enc, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// tmpfsData mounts a tmpfs of size MiB on the lab's data folder (beside
// root), unmounted when the test ends, so the cache's disk can fill.
func tmpfsData(t *testing.T, root string, size int) {
	t.Helper()
	data := filepath.Join(filepath.Dir(root), "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", size), "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for the data folder: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", data).Run() })
}

// written is the bytes the process has written (wchar of /proc/PID/io).
func written(t *testing.T, s *nstest.Served) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", s.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no wchar in /proc/PID/io")
	return 0
}

// unfitFlood (row 13) asks for path, a compressed image that cannot fit
// the data filesystem, from two keep-alive connections, at most 50 times
// each, and counts the answers that are not 503 in *other.
func unfitFlood(path string, answers, other *atomic.Int64) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				c, err := l.dial(ctx)
				if err != nil {
					return
				}
				defer c.Close()
				stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
				defer stop()
				br := bufio.NewReader(c)
				for range 50 {
					if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: pxe\r\n\r\n"); err != nil {
						return
					}
					status, err := br.Peek(12)
					if err != nil {
						return
					}
					if !strings.HasSuffix(string(status), " 503") {
						other.Add(1)
					}
					if _, err := readAnswer(br, false); err != nil {
						return
					}
					answers.Add(1)
				}
			})
		}
		wg.Wait()
	}
}

// TestHTTPUnfitImageOnce (row 13): a compressed image that can never fit
// the cache (16 GiB of zeros, 1.5 GB free) was unpacked ~0.5 GB on every
// request before its 503. Here: 512 MiB of zeros, a 160 MiB data
// filesystem, images.min_free_bytes 32 MiB. The first request unpacks
// until the space runs out; the rest are answered 503 at once, from
// memory: the process writes at most 200 MiB in all. An image the zstd
// tool compressed from a file declares its size and is refused before
// any unpack: its requests write at most 16 MiB (records) in all.
func TestHTTPUnfitImageOnce(t *testing.T) {
	declared := false
	l := newLab(t, nstest.Options{}, httpYAML+"images:\n  min_free_bytes: 32MiB\n", func(root string) {
		tmpfsData(t, root, 160)
		zstdZeros(t, filepath.Join(root, "big.img.zst"), 512<<20)
		writeFile(t, root, "small", 4096)
		if _, err := exec.LookPath("zstd"); err == nil {
			in := filepath.Join(t.TempDir(), "declared.img")
			sparse(t, in, 512<<20)
			out, err := exec.Command("zstd", "-q", "-1", in, "-o", filepath.Join(root, "declared.img.zst")).CombinedOutput()
			if err != nil {
				t.Fatalf("zstd: %v: %s", err, out)
			}
			declared = true
		}
	})
	var answers, other atomic.Int64
	before := written(t, l.S)
	peak := httpSiege(t, l, 4*time.Second, nstest.Usage{RSS: 384 << 20, FDs: 128}, unfitFlood("/big.img", &answers, &other)).Peak
	w := written(t, l.S) - before
	t.Logf("%d requests for an image that cannot fit (%d not 503): the process wrote %d MiB; peak RSS %d MiB",
		answers.Load(), other.Load(), w>>20, peak.RSS>>20)
	if answers.Load() < 10 {
		t.Fatalf("only %d answers in the flood: too few to tell", answers.Load())
	}
	if other.Load() > 0 {
		t.Errorf("%d answers were not 503", other.Load())
	}
	if w > 200<<20 {
		t.Errorf("the process wrote %d MiB for %d requests of an image that cannot fit (want at most 200 MiB: one unpack)", w>>20, answers.Load())
	}
	if !declared {
		t.Log("no zstd tool: the declared-size case is not run")
		return
	}
	answers.Store(0)
	before = written(t, l.S)
	siege(t, l, siegeOpts{Flood: unfitFlood("/declared.img", &answers, &other), For: 2 * time.Second, UntilFlood: true,
		Bound: nstest.Usage{RSS: 384 << 20, FDs: 128}})
	w = written(t, l.S) - before
	t.Logf("%d requests for an image that declares it cannot fit (%d not 503 in all): the process wrote %d KiB", answers.Load(), other.Load(), w>>10)
	if other.Load() > 0 || answers.Load() < 10 {
		t.Errorf("%d answers, %d not 503, for the image that declares it cannot fit", answers.Load(), other.Load())
	}
	if w > 16<<20 {
		t.Errorf("the process wrote %d MiB for an image that declares it cannot fit (want at most 16 MiB: no unpack)", w>>20)
	}
}

// neverRead (row 14) opens n connections from the client namespace, each
// with a 4 KiB receive buffer, asks each for path and never reads the
// answer; the connections stay open until ctx ends.
func neverRead(n int, path string, opened *atomic.Int64) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		d := net.Dialer{Control: smallRcvBuf}
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range n {
			c, err := l.dialFrom(ctx, d, l.P.ServerIP.String()+":80")
			if err != nil {
				break
			}
			conns = append(conns, c)
			if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: pxe\r\n\r\n"); err != nil {
				break
			}
			opened.Add(1)
		}
		<-ctx.Done()
	}
}

// sendQueues sums, over the server namespace's TCP connections from port
// 80, the kernel memory their send queues hold (ss's skmem w:
// wmem_queued) and their send buffers (tb).
func sendQueues(t *testing.T, l *lab) (queued, bufs int64, conns int) {
	t.Helper()
	out, err := nstest.Output(l.P.Server, 5*time.Second, "ss", "-tmnH", "state", "established", "( sport = :80 )")
	if err != nil {
		t.Fatalf("ss: %v: %s", err, out)
	}
	for _, f := range strings.Fields(out) {
		sk, ok := strings.CutPrefix(f, "skmem:(")
		if !ok {
			continue
		}
		conns++
		for _, kv := range strings.Split(strings.TrimSuffix(sk, ")"), ",") {
			switch {
			case strings.HasPrefix(kv, "w"):
				v, _ := strconv.ParseInt(kv[1:], 10, 64)
				queued += v
			case strings.HasPrefix(kv, "tb"):
				v, _ := strconv.ParseInt(kv[2:], 10, 64)
				bufs += v
			}
		}
	}
	return queued, bufs, conns
}

// TestHTTPNeverReadSendBuffers (row 14): 64 clients that never read held
// 162 MiB of send buffers (each download got http.send_buffer_kib, 4 MiB);
// 2048 would pass the host's tcp_mem. With http.send_buffer_total_mib
// (128) the buffers downloads set themselves hold at most that together,
// and the rest keep the kernel's autotuning: 96 never-reading clients hold
// at most 128 MiB + 96 x 256 KiB of send queues, and a real board is
// served within 1 s.
func TestHTTPNeverReadSendBuffers(t *testing.T) {
	const n = 96
	l := newLab(t, nstest.Options{}, httpYAML+"  max_conns_per_client: 128\n", func(root string) {
		sparse(t, filepath.Join(root, "big.bin"), 256<<20)
		writeFile(t, root, "small", 4096)
	})
	var opened atomic.Int64
	var queued, bufs int64
	var conns int
	peak := siege(t, l, siegeOpts{Flood: neverRead(n, "/big.bin", &opened), For: 5 * time.Second, StopAfterBoards: true,
		Ready: func() error {
			// Every connection's queue fills within a round trip of its request.
			nstest.WaitFor(3*time.Second, func() bool { return opened.Load() == n })
			time.Sleep(time.Second)
			queued, bufs, conns = sendQueues(t, l)
			return nil
		},
		Boards: []board{l.smallFetch()}, Bound: nstest.Usage{RSS: 256 << 20, FDs: 2*n + 64}}).Peak
	t.Logf("%d never-reading clients (%d connections seen): send queues %d MiB, send buffers %d MiB; peak RSS %d MiB, %d fds",
		opened.Load(), conns, queued>>20, bufs>>20, peak.RSS>>20, peak.FDs)
	if conns < n {
		t.Fatalf("only %d of %d connections established: too few to tell", conns, n)
	}
	if bound := int64(128<<20 + n*256<<10); queued > bound {
		t.Errorf("never-reading clients hold %d MiB of send queues, want at most %d MiB (http.send_buffer_total_mib 128 + the kernel's own per connection)", queued>>20, bound>>20)
	}
}

// idleKeepAlives (row 15) opens n connections that each fetch path once
// and then stay idle, keep-alive, until ctx ends; opened counts them.
func idleKeepAlives(n int, path string, opened *atomic.Int64) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range n {
			c, err := l.dial(ctx)
			if err != nil {
				break
			}
			conns = append(conns, c)
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: pxe\r\n\r\n"); err != nil {
				break
			}
			if _, err := readAnswer(bufio.NewReader(c), false); err != nil {
				break
			}
			_ = c.SetDeadline(time.Time{})
			opened.Add(1)
		}
		<-ctx.Done()
	}
}

// TestHTTPIdleKeepAlivesAtCap (row 15): idle keep-alive connections up to
// http.max_conns kept every real client at 503 for the idle timeout (60
// s; 2048 of them at the default cap). Now a new connection at the cap
// takes the place of the keep-alive idle longest, as nginx does: with 64
// idle at a cap of 64, a real board is served within 1 s.
func TestHTTPIdleKeepAlivesAtCap(t *testing.T) {
	const n = 64
	l := newLab(t, nstest.Options{}, httpYAML+"  max_conns: 64\n  max_conns_per_client: 64\n", func(root string) {
		writeFile(t, root, "small", 4096)
	})
	var opened atomic.Int64
	var curls []board
	for i := range 3 {
		curls = append(curls, board{fmt.Sprintf("curl %d of a 4 KiB file with %d idle keep-alives at the cap", i+1, n), l.curlOK("/small", 4096)})
	}
	peak := siege(t, l, siegeOpts{Flood: idleKeepAlives(n, "/small", &opened), For: 4 * time.Second, StopAfterBoards: true,
		Ready: func() error {
			if !nstest.WaitFor(3*time.Second, func() bool { return opened.Load() == n }) {
				return fmt.Errorf("only %d of %d keep-alives opened", opened.Load(), n)
			}
			return nil
		},
		Boards: curls, Bound: nstest.Usage{RSS: 256 << 20, FDs: n + 64}}).Peak
	reclaimed, _ := l.S.Metric("pxeperf_refusals_total", `proto="http"`, `reason="idle connection closed`)
	t.Logf("%d idle keep-alives at a cap of %d: %.0f closed to make room; peak RSS %d MiB, %d fds", opened.Load(), n, reclaimed, peak.RSS>>20, peak.FDs)
}

// trickle (row 15) opens n connections with a 4 KiB receive buffer that
// each ask for path and read 1 KiB every 62 ms (16 KiB/s), at most 10 s;
// ended counts those the server ended (EOF or reset) before ctx did.
func trickle(n int, path string, ended *atomic.Int64) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		d := net.Dialer{Control: smallRcvBuf}
		var wg sync.WaitGroup
		for range n {
			c, err := l.dialFrom(ctx, d, l.P.ServerIP.String()+":80")
			if err != nil {
				break
			}
			wg.Go(func() {
				defer c.Close()
				stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
				defer stop()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: pxe\r\n\r\n"); err != nil {
					return
				}
				buf := make([]byte, 1024)
				for {
					if _, err := c.Read(buf); err != nil {
						if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
							ended.Add(1)
						}
						return
					}
					time.Sleep(62 * time.Millisecond)
				}
			})
		}
		wg.Wait()
	}
}

// TestHTTPTrickleEnded (row 15): a download that takes in a little
// before each stall_timeout held its connection (and its slot under
// http.max_conns) as long as it liked. With http.min_rate_kib 64 over
// min_rate_window 2s, 8 clients reading a 4 MiB file at 16 KiB/s (256 s
// at that rate) are ended within 8 s and recorded as errors, while a real
// board's full-speed fetch of the same file is served within 1 s.
func TestHTTPTrickleEnded(t *testing.T) {
	const size, n = 4 << 20, 8
	l := newLab(t, nstest.Options{}, httpYAML+"  min_rate_kib: 64\n  min_rate_window: 2s\n", func(root string) {
		writeFile(t, root, "big.bin", size)
	})
	var ended atomic.Int64
	peak := siege(t, l, siegeOpts{Flood: trickle(n, "/big.bin", &ended), For: 8 * time.Second, UntilFlood: true, Warm: time.Second,
		Boards: []board{{"curl of the 4 MiB file at full speed", l.curlOK("/big.bin", size)}},
		Bound:  nstest.Usage{RSS: 256 << 20, FDs: 64}}).Peak
	var errs float64
	nstest.WaitFor(2*time.Second, func() bool {
		errs, _ = l.S.Metric("pxeperf_fetches_total", `proto="http"`, `outcome="error"`)
		return errs >= n
	})
	t.Logf("%d of %d trickles ended by the server, %.0f error records; peak RSS %d MiB, %d fds", ended.Load(), n, errs, peak.RSS>>20, peak.FDs)
	if ended.Load() < n {
		t.Errorf("%d of %d trickles at 16 KiB/s were still served after 8 s (want ended: http.min_rate_kib 64 over 2s)", n-ended.Load(), n)
	}
	if errs < n {
		t.Errorf("%.0f error records for %d ended trickles", errs, n)
	}
}
