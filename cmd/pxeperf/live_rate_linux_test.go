//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

// Issue 28 row 4: the live rate of a download (the dashboard's "Mbit/s
// now", /api/active's mbps, `pxeperf status`) is the rate the board
// acknowledges, smoothed over a few seconds, and "bytes so far" the bytes
// it acknowledged. Before, the count took the bytes written once the last
// write was in a send buffer of up to 16 MiB (the rest of the download
// then read 0 Mbit/s), and "Mbit/s now" was the growth since whoever read
// /api/active last (the page's stream every 500 ms), over spans as short
// as 200 ms of a count the HTTP sampler moves every 100 ms.
//
// The links are shaped with tbf (what a slow board's link does): curl
// 7.88's own --limit-rate is no steady client. It reads 100 x 100 KiB at
// once and then sleeps until its average is down to the limit: with
// --limit-rate 500K its kernel took 14.8 MB in the first second and
// nothing for the next 20 (ss in the client's namespace), so what the board
// acknowledges comes in 10 MB bursts 20 s apart and no few-second window
// can read 4 Mbit/s there (docs in event/DESIGN.md).

// liveYAML serves HTTP on port 80 and TFTP on 69 of the pair's server side.
const liveYAML = `dhcp:
  mode: "off"
http:
  listen: ":80"
`

// liveSample is one read of /api/active for one transfer.
type liveSample struct {
	At    time.Duration // since the first sample
	Bytes int64
	Mbps  float64
}

func (s liveSample) String() string {
	return fmt.Sprintf("%.0fs %.2fMB %.2f", s.At.Seconds(), float64(s.Bytes)/1e6, s.Mbps)
}

// sampleActive reads /api/active once a second for n seconds (from the
// first second the transfer of file is listed) and returns its samples.
// at, when set, runs right after each sample with its index.
func sampleActive(t *testing.T, s *nstest.Served, file string, n int, at func(i int, s liveSample)) []liveSample {
	t.Helper()
	var out []liveSample
	var first time.Time
	deadline := time.Now().Add(time.Duration(n+10) * time.Second)
	next := time.Now()
	for len(out) < n && time.Now().Before(deadline) {
		time.Sleep(time.Until(next))
		next = next.Add(time.Second)
		body, err := s.Get("/api/active")
		if err != nil {
			t.Logf("/api/active: %v", err)
			continue
		}
		var a struct {
			Transfers []struct {
				File  string  `json:"file"`
				Bytes int64   `json:"bytes"`
				Mbps  float64 `json:"mbps"`
			} `json:"transfers"`
		}
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("/api/active: %v\n%s", err, body)
		}
		for _, tr := range a.Transfers {
			if tr.File != file {
				continue
			}
			if first.IsZero() {
				first = time.Now()
			}
			ls := liveSample{At: time.Since(first).Round(100 * time.Millisecond), Bytes: tr.Bytes, Mbps: tr.Mbps}
			out = append(out, ls)
			if at != nil {
				at(len(out)-1, ls)
			}
		}
	}
	return out
}

// checkLive wants at least 80% of the samples' rates within want +/- 1
// Mbit/s (the acceptance), and every second's growth of bytes so
// far within a factor of 2 of want's (what was acknowledged moves with the
// link, never in send-buffer-sized jumps). The first sample is held to
// neither: the transfer is younger than the smoothing window there. It
// returns the median rate of the rest.
func checkLive(t *testing.T, what string, samples []liveSample, want float64) float64 {
	t.Helper()
	t.Logf("%s: /api/active once a second (time, bytes so far, Mbit/s now): %v", what, samples)
	if len(samples) < 10 {
		t.Fatalf("%s: only %d samples of the transfer in /api/active", what, len(samples))
	}
	in := 0
	rates := make([]float64, 0, len(samples))
	for _, s := range samples[1:] {
		rates = append(rates, s.Mbps)
		if math.Abs(s.Mbps-want) <= 1 {
			in++
		}
	}
	if n := len(samples) - 1; in*10 < n*8 {
		t.Errorf("%s: %d of %d 1 s samples read %.2f +/- 1 Mbit/s (want at least 80%%)", what, in, n, want)
	}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dt := (b.At - a.At).Seconds()
		got := float64(b.Bytes-a.Bytes) * 8 / 1e6 / dt
		if got > 2*want || got < want/2 {
			t.Errorf("%s: bytes so far moved %.2f MB in %.1f s (%.1f Mbit/s) at %v; the link carries %.2f Mbit/s",
				what, float64(b.Bytes-a.Bytes)/1e6, dt, got, b.At, want)
		}
	}
	slices.Sort(rates)
	return rates[len(rates)/2]
}

// watchStream reads /api/active/stream in s's namespace until the test
// ends, as the dashboard page does while it is open.
func watchStream(t *testing.T, s *nstest.Served) {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{DialContext: nstest.DialContext(s.NS)}
	t.Cleanup(func() { cancel(); tr.CloseIdleConnections() })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Admin+"/api/active/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("/api/active/stream: %v", err)
	}
	go func() {
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
}

// activeBytes is the bytes so far of file's transfer in /api/active.
func activeBytes(t *testing.T, s *nstest.Served, file string) int64 {
	t.Helper()
	body, err := s.Get("/api/active")
	if err != nil {
		t.Fatalf("/api/active: %v", err)
	}
	var a struct {
		Transfers []struct {
			File  string `json:"file"`
			Bytes int64  `json:"bytes"`
		} `json:"transfers"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("/api/active: %v\n%s", err, body)
	}
	for _, tr := range a.Transfers {
		if tr.File == file {
			return tr.Bytes
		}
	}
	t.Fatalf("/api/active does not list %s:\n%s", file, body)
	return 0
}

// statusLine runs `pxeperf status` against s and returns its line for file
// with that line's bytes and Mbit/s (the BYTES and MBIT/S columns).
func statusLine(t *testing.T, s *nstest.Served, file string) (line string, bytes int64, mbps float64) {
	t.Helper()
	out, err := nstest.Output(s.NS, 20*time.Second, nstest.Binary(t), "status", "--config", filepath.Join(s.Dir, "pxeperf.yaml"),
		"--admin-addr", s.Admin)
	if err != nil {
		t.Fatalf("pxeperf status: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 7 && f[3] == file {
			b, err1 := strconv.ParseInt(f[4], 10, 64)
			v, err2 := strconv.ParseFloat(f[6], 64)
			if err1 == nil && err2 == nil {
				return line, b, v
			}
		}
	}
	t.Fatalf("pxeperf status does not list %s in progress:\n%s", file, out)
	return "", 0, 0
}

// clientReceived is what the kernel in the client's namespace received on
// its connection to port 80 (ss's bytes_received): the bytes it
// acknowledged to the server.
func clientReceived(t *testing.T, ns string) int64 {
	t.Helper()
	out, err := nstest.Output(ns, 5*time.Second, "ss", "-tniH", "state", "established", "dport", "=", ":80")
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`bytes_received:(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ss shows no bytes_received for the download:\n%s", out)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// liveLab is the real binary serving a file of size random bytes in a
// pair whose link carries 4 Mbit/s to the board (shape), with the
// dashboard's stream open (watchStream).
func liveLab(t *testing.T, file string, size int) (*nstest.Pair, *nstest.Served) {
	t.Helper()
	if testing.Short() {
		t.Skip("a 20 s download (-short)")
	}
	p := nstest.NewPair(t, nstest.Options{})
	s := nstest.Serve(t, p.Server, liveYAML, func(root string) {
		nstest.RandomFile(t, filepath.Join(root, file), size, 28)
	}, "--iface", p.ServerIf, "--addr", p.ServerIP.String())
	shape(t, p)
	watchStream(t, s)
	return p, s
}

// shape puts a 4 Mbit/s token bucket on the server's veth end: what the
// board receives.
func shape(t *testing.T, p *nstest.Pair) {
	t.Helper()
	nstest.RequireTool(t, "tc")
	nstest.Run(t, p.Server, "tc", "qdisc", "replace", "dev", p.ServerIf, "root", "tbf", "rate", "4mbit", "burst", "8kb", "latency", "100ms")
}

// TestLiveRateHTTP: curl of a 16 MiB image through a 4 Mbit/s link from
// the real binary, with the dashboard's stream open, /api/active sampled
// once a second for 18 s. tbf counts frames: a full TCP segment carries
// 1448 of every 1514 bytes, so the payload rate is 3.83 Mbit/s. The
// download takes 35 s, longer than the test looks: curl stops at 20 s.
func TestLiveRateHTTP(t *testing.T) {
	nstest.RequireTool(t, "curl", "ss")
	p, s := liveLab(t, "big.img", 16<<20)

	curl := nstest.Start(t, p.Client, "curl", "-s", "-o", "/dev/null", "--max-time", "20",
		"-w", "%{size_download} %{speed_download} %{time_total}\n", "http://"+p.ServerIP.String()+"/big.img")
	var stLine string
	var stBytes, stBefore, stAfter, kernBytes, kernAfter, apiBytes int64
	var stMbps float64
	samples := sampleActive(t, s, "big.img", 18, func(i int, ls liveSample) {
		if i == 9 {
			// /api/active between two reads of the client's count:
			// its bytes lag the kernel's by at most the HTTP
			// sampler's 100 ms.
			kernBytes = clientReceived(t, p.Client)
			apiBytes = activeBytes(t, s, "big.img")
			kernAfter = clientReceived(t, p.Client)
			stBefore = clientReceived(t, p.Client)
			stLine, stBytes, stMbps = statusLine(t, s, "big.img")
			stAfter = clientReceived(t, p.Client)
		}
	})
	_ = curl.Cmd.Wait() // curl ends at --max-time (exit 28) with its figures printed
	const want = 4.0 * 1448 / 1514
	med := checkLive(t, "curl through a 4 Mbit/s link", samples, want)

	// curl's own figure: bytes/s over its whole transfer.
	m := regexp.MustCompile(`(\d+) ([\d.]+) ([\d.]+)`).FindStringSubmatch(curl.Out.String())
	if m == nil {
		t.Fatalf("curl printed no figures: %q", curl.Out.String())
	}
	speed, _ := strconv.ParseFloat(m[2], 64)
	curlMbps := speed * 8 / 1e6
	t.Logf("curl: %s B in %s s, %.3f Mbit/s; median live rate %.3f Mbit/s", m[1], m[3], curlMbps, med)
	t.Logf("at 10 s: the client's kernel had received %d B (header included), /api/active said %d B, the client's kernel %d B; pxeperf status: %q",
		kernBytes, apiBytes, kernAfter, stLine)
	// The live rate is the last 3 s at each sample, curl's its whole
	// transfer's average (with the first round trips, slower): for a
	// steady link they agree within 2%.
	if pctOff(med, curlMbps) > 2 {
		t.Errorf("median live rate %.3f Mbit/s, curl's own %.3f Mbit/s (%.1f%% off)", med, curlMbps, pctOff(med, curlMbps))
	}
	// Bytes so far against what the board's kernel received just before
	// and after: within 1% below the first (at 0.48 MB/s the sampler's
	// 100 ms is 48 KB of 4.7 MB) and never above the second.
	if float64(apiBytes) < 0.99*float64(kernBytes) || apiBytes > kernAfter {
		t.Errorf("bytes so far %d, the client's kernel received %d before and %d after", apiBytes, kernBytes, kernAfter)
	}
	if math.Abs(stMbps-want) > 1 || float64(stBytes) < 0.99*float64(stBefore) || stBytes > stAfter {
		t.Errorf("pxeperf status printed %d B at %.1f Mbit/s now for the download (the client's kernel: %d B before, %d after; want %.1f +/- 1 Mbit/s): %q",
			stBytes, stMbps, stBefore, stAfter, want, stLine)
	}
}

// TestLiveRateTFTP: atftp fetches an 8 MiB image (blksize 1428,
// windowsize 8: the link, not the client's turnaround on a loaded host,
// sets the pace) through a 4 Mbit/s link, /api/active sampled once a
// second for 14 s. Each block is a 1474-byte frame for 1428 bytes (UDP,
// IP, Ethernet and TFTP headers): 3.88 Mbit/s of payload.
func TestLiveRateTFTP(t *testing.T) {
	nstest.RequireTool(t, "atftp")
	p, s := liveLab(t, "tftp.img", 8<<20)

	const size = 8 << 20
	begin := time.Now()
	get := nstest.Start(t, p.Client, "atftp", "--option", "blksize 1428", "--option", "windowsize 8", "-g", "-r", "tftp.img",
		"-l", "/dev/null", p.ServerIP.String())
	samples := sampleActive(t, s, "tftp.img", 14, nil)
	err := get.Cmd.Wait()
	took := time.Since(begin)
	if err != nil {
		t.Fatalf("atftp: %v\n%s", err, get.Out.String())
	}
	const want = 4.0 * 1428 / 1474
	med := checkLive(t, "atftp (windowsize 8) through a 4 Mbit/s link", samples, want)
	// atftp prints no figures: its rate is the file's bytes over the
	// wall time of its process, which also holds `ip netns exec`, atftp's
	// start and its request and option exchange (0.2-0.4 s of 17 on this
	// 2-core host, loaded), which no 3 s of the transfer do: 4% against
	// it, 2% against the link's payload rate.
	clientMbps := size * 8 / took.Seconds() / 1e6
	t.Logf("atftp: %d B in %v, %.3f Mbit/s; median live rate %.3f Mbit/s", size, took.Round(time.Millisecond), clientMbps, med)
	if pctOff(med, clientMbps) > 4 || pctOff(med, want) > 2 {
		t.Errorf("median live rate %.3f Mbit/s, atftp's %.3f Mbit/s (%.1f%% off), the link's payload rate %.3f (%.1f%% off)",
			med, clientMbps, pctOff(med, clientMbps), want, pctOff(med, want))
	}
}
