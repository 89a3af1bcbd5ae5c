//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/netlab"
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

// liveSample is one read of /api/active for one transfer, between two
// reads of the client's own count of the bytes it received.
type liveSample struct {
	At     time.Duration // since the first sample
	Bytes  int64
	Mbps   float64
	Before int64 // the client's count just before
	After  int64 // ... and just after
}

func (s liveSample) String() string {
	return fmt.Sprintf("%.0fs %.2fMB %.2f (client %.2fMB)", s.At.Seconds(), float64(s.Bytes)/1e6, s.Mbps, float64(s.Before)/1e6)
}

// client is the middle of a sample's two client counts.
func (s liveSample) client() float64 { return float64(s.Before+s.After) / 2 }

// sampleActive reads /api/active once a second for n seconds (from the
// first second the transfer of file is listed), each read between two
// calls of received (the client's own count), and returns the samples.
// at, when set, runs right after each sample with its index.
func sampleActive(t *testing.T, s *nstest.Served, file string, n int, received func() int64, at func(i int)) []liveSample {
	t.Helper()
	var out []liveSample
	var first time.Time
	deadline := time.Now().Add(time.Duration(n+10) * time.Second)
	next := time.Now()
	for len(out) < n && time.Now().Before(deadline) {
		time.Sleep(time.Until(next))
		next = next.Add(time.Second)
		before := received()
		body, err := s.Get("/api/active")
		after := received()
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
			out = append(out, liveSample{At: time.Since(first).Round(100 * time.Millisecond), Bytes: tr.Bytes, Mbps: tr.Mbps,
				Before: before, After: after})
			if at != nil {
				at(len(out) - 1)
			}
		}
	}
	return out
}

// checkLive holds the samples to the client's own count:
//   - bytes so far never above the count after (+ unwritten, what the
//     client has ACKed but not yet written where its count is a file),
//     and at least 99% of the count before - lag (what the server's
//     count may trail: the HTTP sampler's period) in at least 80% of the
//     samples (a loaded host delays a sampler's tick now and then);
//   - from the fourth sample on (the live rate's window is 3 s), at least
//     80% of the rates within 1 Mbit/s of the client's own over the last
//     3 samples (the acceptance), and their mean within 2% of
//     the mean of the client's (paired samples: a median of each would
//     pick different seconds when the rate moves);
//   - of the samples where the client's own rate was the link's (within
//     10% of want: the host was not too loaded for the link to set the
//     pace), at least 80% within want +/- 1 Mbit/s too, when there are 5
//     or more.
//
// It returns the mean live rate.
func checkLive(t *testing.T, what string, samples []liveSample, want float64, unwritten, lag int64) float64 {
	t.Helper()
	t.Logf("%s: /api/active once a second (time, bytes so far, Mbit/s now, the client's count): %v", what, samples)
	if len(samples) < 10 {
		t.Fatalf("%s: only %d samples of the transfer in /api/active", what, len(samples))
	}
	behind := 0
	for _, s := range samples {
		if s.Bytes > s.After+unwritten {
			t.Errorf("%s: bytes so far %d at %v, more than the client had just after (%d)", what, s.Bytes, s.At, s.After)
		}
		if float64(s.Bytes) < 0.99*float64(s.Before)-float64(lag) {
			t.Logf("%s: bytes so far %d at %v; the client had %d just before", what, s.Bytes, s.At, s.Before)
			behind++
		}
	}
	if behind*10 > len(samples)*2 {
		t.Errorf("%s: bytes so far trailed the client's count by more than 1%% + %d B in %d of %d samples", what, lag, behind, len(samples))
	}
	var live, own []float64
	near, atWant, nearWant := 0, 0, 0
	for i := 3; i < len(samples); i++ {
		a, b := samples[i-3], samples[i]
		ref := (b.client() - a.client()) * 8 / 1e6 / (b.At - a.At).Seconds()
		live, own = append(live, b.Mbps), append(own, ref)
		if math.Abs(b.Mbps-ref) <= 1 {
			near++
		}
		if pctOff(ref, want) <= 10 {
			atWant++
			if math.Abs(b.Mbps-want) <= 1 {
				nearWant++
			}
		}
	}
	t.Logf("%s: the client's own Mbit/s over the same 3 s: %.2f", what, own)
	n := len(live)
	if near*10 < n*8 {
		t.Errorf("%s: %d of %d 1 s samples read within 1 Mbit/s of the client's own rate (want at least 80%%)", what, near, n)
	}
	mean := func(v []float64) float64 {
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		return sum / float64(len(v))
	}
	avg, ownAvg := mean(live), mean(own)
	if pctOff(avg, ownAvg) > 2 {
		t.Errorf("%s: mean live rate %.3f Mbit/s, the client's own %.3f (%.1f%% off)", what, avg, ownAvg, pctOff(avg, ownAvg))
	}
	switch {
	case atWant < 5:
		t.Logf("%s: the client took the link's %.2f Mbit/s in %d of %d samples: the host was too loaded for the link to set the pace",
			what, want, atWant, n)
	case nearWant*10 < atWant*8:
		t.Errorf("%s: %d of the %d 1 s samples at the link's rate read %.2f +/- 1 Mbit/s (want at least 80%%)", what, nearWant, atWant, want)
	}
	return avg
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
// acknowledged to the server; 0 while there is no such connection.
func clientReceived(t *testing.T, ns string) int64 {
	t.Helper()
	out, err := nstest.Output(ns, 5*time.Second, "ss", "-tniH", "state", "established", "dport", "=", ":80")
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`bytes_received:(\d+)`).FindStringSubmatch(out)
	if m == nil {
		return 0 // not connected yet, or done
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
	if _, err := p.Testbed.SetRate(netlab.Server, 4e6); err != nil {
		t.Fatal(err)
	}
}

// TestLiveRateHTTP: curl of a 16 MiB image through a 4 Mbit/s link from
// the real binary, with the dashboard's stream open, /api/active sampled
// once a second for 18 s against what the client's kernel received (ss). tbf counts frames: a full TCP segment carries
// 1448 of every 1514 bytes, so the payload rate is 3.83 Mbit/s. The
// download takes 35 s, longer than the test looks: curl stops at 20 s.
func TestLiveRateHTTP(t *testing.T) {
	nstest.RequireTool(t, "curl", "ss")
	p, s := liveLab(t, "big.img", 16<<20)

	curl := nstest.Start(t, p.Client, "curl", "-s", "-o", "/dev/null", "--max-time", "20",
		"-w", "%{size_download} %{speed_download} %{time_total}\n", "http://"+p.ServerIP.String()+"/big.img")
	var stLine string
	var stBytes, stBefore, stAfter int64
	var stMbps float64
	received := func() int64 { return clientReceived(t, p.Client) }
	samples := sampleActive(t, s, "big.img", 18, received, func(i int) {
		if i == 9 {
			stBefore = received()
			stLine, stBytes, stMbps = statusLine(t, s, "big.img")
			stAfter = received()
		}
	})
	_ = curl.Cmd.Wait() // curl ends at --max-time (exit 28) with its figures printed
	const want = 4.0 * 1448 / 1514
	// Slack: the HTTP sampler reads tcpi_bytes_acked every 100 ms,
	// 48 KB at this rate; 150 ms of it, 72 KiB.
	avg := checkLive(t, "curl through a 4 Mbit/s link", samples, want, 0, 72<<10)

	// curl's own figure: bytes/s over its whole transfer.
	m := regexp.MustCompile(`(\d+) ([\d.]+) ([\d.]+)`).FindStringSubmatch(curl.Out.String())
	if m == nil {
		t.Fatalf("curl printed no figures: %q", curl.Out.String())
	}
	speed, _ := strconv.ParseFloat(m[2], 64)
	curlMbps := speed * 8 / 1e6
	t.Logf("curl: %s B in %s s, %.3f Mbit/s; mean live rate %.3f Mbit/s; pxeperf status: %q", m[1], m[3], curlMbps, avg, stLine)
	// curl's figure is its whole 20 s (the first round trips, and the
	// 2 s after the last sample, included), the live rates are the 3 s
	// before each sample from the fourth on: 3%, for a host loaded
	// enough to move the rate within the run (checkLive holds the live
	// rate to 2% of the client's own count over the same seconds).
	if pctOff(avg, curlMbps) > 3 {
		t.Errorf("mean live rate %.3f Mbit/s, curl's own %.3f Mbit/s (%.1f%% off)", avg, curlMbps, pctOff(avg, curlMbps))
	}
	if math.Abs(stMbps-avg) > 1 || float64(stBytes) < 0.99*float64(stBefore)-72<<10 || stBytes > stAfter {
		t.Errorf("pxeperf status printed %d B at %.1f Mbit/s now for the download (the client's kernel: %d B before, %d after; live rate %.1f): %q",
			stBytes, stMbps, stBefore, stAfter, avg, stLine)
	}
}

// TestLiveRateTFTP: atftp fetches an 8 MiB image (blksize 1428,
// windowsize 8: the link rather than the client's turnaround sets the
// pace) through a 4 Mbit/s link, /api/active sampled once a second for
// 14 s against the size of the file atftp writes. Each block is a
// 1474-byte frame for 1428 bytes (UDP, IP, Ethernet and TFTP headers):
// 3.88 Mbit/s of payload.
func TestLiveRateTFTP(t *testing.T) {
	nstest.RequireTool(t, "atftp")
	p, s := liveLab(t, "tftp.img", 8<<20)

	out := filepath.Join(t.TempDir(), "tftp.img")
	get := nstest.Start(t, p.Client, "atftp", "--option", "blksize 1428", "--option", "windowsize 8", "-g", "-r", "tftp.img",
		"-l", out, p.ServerIP.String())
	// atftp prints no figures: its own count is the file it writes.
	received := func() int64 {
		fi, err := os.Stat(out)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	samples := sampleActive(t, s, "tftp.img", 14, received, nil)
	if err := get.Cmd.Wait(); err != nil {
		t.Fatalf("atftp: %v\n%s", err, get.Out.String())
	}
	const want = 4.0 * 1428 / 1474
	// atftp writes each block before it ACKs a window (8 blocks, 11 KB,
	// the lag) and through stdio (a buffer behind: unwritten).
	checkLive(t, "atftp (windowsize 8) through a 4 Mbit/s link", samples, want, 16<<10, 16<<10)
	if n := received(); n != 8<<20 {
		t.Errorf("atftp wrote %d bytes, want %d", n, 8<<20)
	}
}
