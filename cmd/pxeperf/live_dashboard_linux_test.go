//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// TestDashboardInChromium runs the real binary on loopback (unique ports)
// and opens its dashboard in a real headless Chromium driven by chromedp,
// while a slow reader fetches a 64 MiB image: the transfer must appear in
// "In progress" with a growing byte count, then finish in "Latest fetches"
// as ok, and the window x offload chart must render. The screenshot must
// not be blank; with PXEPERF_SCREENSHOT=FILE it is also written there (how
// docs/dashboard.png is made).
func TestDashboardInChromium(t *testing.T) {
	nstest.RequireRoot(t)
	chrome := findChromium(t)
	bin := nstest.Binary(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	const big = 64 << 20
	nstest.RandomFile(t, filepath.Join(img, "big.img"), big, 7)
	nstest.RandomFile(t, filepath.Join(img, "initrd.img"), 2<<20, 8)
	httpAddr, adminAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t, "tcp")), fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t, "tcp"))

	startLoopbackServe(t, bin, dir, "admin listener serving", "--tftp-addr", "off",
		"--http-addr", httpAddr, "--admin-addr", adminAddr, "--root", img, "--data", filepath.Join(dir, "data"))
	// A few quick fetches, so the tables and the chart have data.
	for range 3 {
		if n, err := slowGet("http://"+httpAddr+"/initrd.img", 0); err != nil || n != 2<<20 {
			t.Fatalf("initrd.img: %d bytes, %v", n, err)
		}
	}

	ctx := openDashboard(t, chrome, dir, "http://"+adminAddr+"/")

	// The slow reader: about 8 MiB/s, so 64 MiB take some 8 s.
	done := make(chan error, 1)
	go func() {
		n, err := slowGet("http://"+httpAddr+"/big.img", 8<<20)
		if err == nil && n != big {
			err = fmt.Errorf("got %d bytes, want %d", n, big)
		}
		done <- err
	}()
	eval := evaluator(t, ctx)
	const bytesSoFar = `(() => { const c = document.querySelector('#active tr[data-file="big.img"] td.bytes'); return c ? Number(c.dataset.bytes) : -1 })()`
	var seen []int64
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && len(seen) < 3 {
		if b := eval(bytesSoFar); b > 0 && (len(seen) == 0 || b > seen[len(seen)-1]) {
			seen = append(seen, b)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if len(seen) < 3 {
		t.Fatalf("the 64 MiB transfer did not show a growing byte count in the dashboard: %v", seen)
	}
	t.Logf("bytes so far, as the dashboard showed them: %v", seen)
	if err := <-done; err != nil {
		t.Fatalf("slow fetch: %v", err)
	}
	const finished = `document.querySelectorAll('#recent tr[data-file="big.img"][data-outcome="ok"]').length`
	if !waitEval(eval, finished, 20*time.Second) {
		t.Fatal("the finished fetch did not appear in Latest fetches as ok")
	}
	if !waitEval(eval, `document.querySelectorAll('#active tr[data-file="big.img"]').length === 0 ? 1 : 0`, 10*time.Second) {
		t.Error("the finished transfer is still listed in progress")
	}
	const chart = `(() => { const i = document.getElementById('window-chart'); return i.complete && i.naturalWidth >= 400 ? i.naturalWidth : 0 })()`
	if !waitEval(eval, chart, 20*time.Second) {
		t.Error("the window x offload chart did not render")
	}
	if !waitEval(eval, `document.querySelectorAll('.report[data-table="window-offload"] .tbl table tr').length`, 20*time.Second) {
		t.Error("the window x offload table did not render")
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := checkNotBlank(shot); err != nil {
		t.Error(err)
	}
	if f := os.Getenv("PXEPERF_SCREENSHOT"); f != "" {
		if err := os.WriteFile(f, shot, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// findChromium is the Chromium in PATH; the test is skipped without one.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("needs chromium in PATH (Debian package chromium; see .ci/run's apt-get line)")
	return ""
}

// openDashboard opens url (a dashboard) in a headless Chromium whose
// profile lives in dir, waits until the page shows, and returns its
// context (ended with the test, three minutes at most).
func openDashboard(t *testing.T, chrome, dir, url string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome),
		chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "chrome")), chromedp.WindowSize(1280, 1500))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(cancelC)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible("#active")); err != nil {
		t.Fatalf("opening the dashboard: %v", err)
	}
	return ctx
}

// evaluator runs JavaScript on the page of ctx, for a number.
func evaluator(t *testing.T, ctx context.Context) func(js string) int64 {
	return func(js string) int64 {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[int64](js))
		if err != nil {
			t.Fatalf("evaluating %s: %v", js, err)
		}
		return v
	}
}

func waitEval(eval func(string) int64, js string, d time.Duration) bool {
	return nstest.WaitFor(d, func() bool { return eval(js) > 0 })
}

// checkNotBlank decodes a PNG and wants many colours over a good share of
// it: a page that did not render is one or two flat colours.
func checkNotBlank(b []byte) error {
	im, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("screenshot is not a PNG: %w", err)
	}
	r := im.Bounds()
	colours := map[[3]uint32]int{}
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, _ := im.At(x, y).RGBA()
			colours[[3]uint32{cr >> 8, cg >> 8, cb >> 8}]++
		}
	}
	if len(colours) < 20 || r.Dx() < 600 || r.Dy() < 400 {
		return fmt.Errorf("screenshot looks blank: %dx%d with %d colours", r.Dx(), r.Dy(), len(colours))
	}
	return nil
}

// startLoopbackServe starts `pxeperf serve` on lo without DHCP, with
// args, in dir (nstest.StartCmd: killed at the end of the test, its
// output's tail logged when the test failed), and waits for ready in its
// log. It returns the process and its output.
func startLoopbackServe(t *testing.T, bin, dir, ready string, args ...string) (*exec.Cmd, *nstest.SyncBuffer) {
	t.Helper()
	cmd := nstest.Command(context.Background(), "", bin, append([]string{"serve", "--iface", "lo", "--addr", "127.0.0.1", "--dhcp", "off"}, args...)...)
	cmd.Dir = dir
	p := nstest.StartCmd(t, cmd)
	if !nstest.WaitFor(20*time.Second, func() bool { return strings.Contains(p.Out.String(), ready) }) {
		t.Fatalf("serve %v did not start:\n%s", args, p.Out.String())
	}
	return p.Cmd, p.Out
}

// slowGet fetches url reading at most rate bytes/s (0: as fast as it can)
// through a small receive buffer, and returns the bytes read.
func slowGet(url string, rate int64) (int64, error) {
	tr := &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if rate > 0 {
			_ = c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 128<<10)
			})
		}
		return serr
	}}).DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Minute}).Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if rate == 0 {
		return io.Copy(io.Discard, resp.Body)
	}
	const chunk = 256 << 10
	var n int64
	start := time.Now()
	for {
		m, err := io.CopyN(io.Discard, resp.Body, chunk)
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if ahead := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
}
