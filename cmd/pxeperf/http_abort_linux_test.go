//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/record"
)

// TestHTTPAbortedRecordBytes (issue 28, the follow-up to rows 4/5): an
// aborted HTTP fetch's record counts the bytes the board acknowledged, not
// the bytes written into a send buffer of up to 16 MiB. On main (f170c5b)
// a 24 s `curl --limit-rate 500K` of a 64 MiB image was recorded at
// 29.9 MB while curl had 13.05 MB.
//
// Two real curl runs against the real binary in a namespace pair, each
// aborted by --max-time mid-file:
//
//   - "shaped": through a 4 Mbit/s link (tbf) curl reads as the data
//     comes, so its receive buffer is near empty when it quits: the
//     record's bytes must be curl's own %{size_download} within 1%.
//   - "limit-rate": curl 7.88's --limit-rate reads ~10 MB at once and
//     then sleeps; its kernel keeps acknowledging into the receive buffer
//     (several MB) that curl never reads. TCP cannot see past the board's
//     kernel: the acknowledged count is the honest figure of what the
//     board received, so the record must be the client kernel's own
//     bytes_received (ss in the client's namespace, less the response
//     header) within 1%, and at least curl's size_download; the gap is
//     logged (the bytes acked but not read).
func TestHTTPAbortedRecordBytes(t *testing.T) {
	nstest.RequireTool(t, "curl", "ss", "tc")
	if testing.Short() {
		t.Skip("two aborted downloads of 8 s (-short)")
	}
	p := nstest.NewPair(t, nstest.Options{})
	s := nstest.Serve(t, p.Server, liveYAML, func(root string) {
		nstest.RandomFile(t, filepath.Join(root, "big.img"), 64<<20, 28)
	}, "--iface", p.ServerIf, "--addr", p.ServerIP.String())
	url := "http://" + p.ServerIP.String() + "/big.img"

	// curlAborted runs curl until its --max-time, sampling the client
	// kernel's bytes_received every 100 ms; it returns curl's
	// size_download and the last count seen.
	curlAborted := func(args ...string) (got, kernel int64) {
		args = append([]string{"-s", "-o", "/dev/null", "--max-time", "8", "-w", "%{size_download}\n"}, args...)
		c := nstest.Start(t, p.Client, "curl", append(args, url)...)
		done := make(chan struct{})
		go func() { _ = c.Cmd.Wait(); close(done) }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-tick.C:
				if n := clientReceived(t, p.Client); n > 0 {
					kernel = n
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("curl did not end at its --max-time")
			}
		}
		m := regexp.MustCompile(`^(\d+)`).FindStringSubmatch(c.Out.String())
		if m == nil {
			t.Fatalf("curl printed no size: %q", c.Out.String())
		}
		got, _ = strconv.ParseInt(m[1], 10, 64)
		if got <= 0 || got >= 64<<20 {
			t.Fatalf("curl took %d B: not aborted mid-file", got)
		}
		return got, kernel
	}
	check := func(n int, what string, want int64, curl int64) record.Record {
		recs := sourceRecords(t, s.Data, "serve", n)
		r := recs[n-1]
		off := pctOff(float64(r.Bytes), float64(want))
		t.Logf("%s: record %d B (%s, %.3f Mbit/s over %s), want %d B: %.2f%% off; curl read %d B (acked but unread: %d B)",
			what, r.Bytes, r.Outcome, r.Mbps, r.Duration, want, off, curl, r.Bytes-curl)
		if off > 1 {
			t.Errorf("%s: the record says %d B, the board received %d B (%.1f%% off)", what, r.Bytes, want, off)
		}
		if r.Outcome == "ok" {
			t.Errorf("%s: outcome %q for a fetch curl aborted", what, r.Outcome)
		}
		if mbps := float64(r.Bytes) * 8 / r.Duration.Seconds() / 1e6; pctOff(r.Mbps, mbps) > 2 {
			t.Errorf("%s: record Mbit/s %.3f, its bytes over its time %.3f", what, r.Mbps, mbps)
		}
		return r
	}

	got, kernel := curlAborted("--limit-rate", "500K")
	// The response header (status line and a few fields) is in the
	// kernel's count, not in the body's: under 400 B.
	hdr := int64(len(fmt.Sprintf("HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\nContent-Length: %d\r\n"+
		"Content-Type: application/octet-stream\r\nLast-Modified: Mon, 02 Jan 2006 15:04:05 GMT\r\n"+
		"Date: Mon, 02 Jan 2006 15:04:05 GMT\r\n\r\n", 64<<20)))
	r := check(1, "curl --limit-rate 500K --max-time 8", kernel-hdr, got)
	if r.Bytes < got {
		t.Errorf("the record's %d B are fewer than curl read (%d B)", r.Bytes, got)
	}

	shape(t, p)
	got, kernel = curlAborted()
	t.Logf("shaped: curl %d B, its kernel %d B", got, kernel)
	check(2, "curl --max-time 8 through 4 Mbit/s", got, got)
}
