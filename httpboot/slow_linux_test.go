package httpboot

import (
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"golang.org/x/sys/unix"
)

// TestConnsReclaimIdle: at http.max_conns a new connection takes the
// place of the keep-alive connection idle longest (closed, counted),
// where it was answered 503 for as long as the idle ones stayed; a
// connection still in a request, or that never sent one, is not taken.
func TestConnsReclaimIdle(t *testing.T) {
	e, addr := capEnv(t, 4)
	var kept []net.Conn
	for i := range 3 {
		c := dialFrom(t, addr, 2)
		if resp, _, err := answer(c, getHealthz); err != nil || resp.StatusCode != 200 {
			t.Fatalf("keep-alive %d: %v %v", i, resp, err)
		}
		kept = append(kept, c)
		time.Sleep(10 * time.Millisecond) // idle since in order
	}
	dialFrom(t, addr, 2) // never sends a request
	c := dialFrom(t, addr, 3)
	if resp, _, err := answer(c, getHealthz); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a new client at the cap: %v %v, want 200", resp, err)
	}
	_ = kept[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := kept[0].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the oldest idle keep-alive: %v, want closed (EOF)", err)
	}
	for _, k := range kept[1:] {
		if resp, _, err := answer(k, getHealthz); err != nil || resp.StatusCode != 200 {
			t.Errorf("a younger keep-alive: %v %v, want still served", resp, err)
		}
	}
	if n := e.srv.Refused().Counts()[refuseIdleReclaim]; n != 1 {
		t.Errorf("idle connections reclaimed: %d, want 1", n)
	}
	if n := e.srv.conns.count(); n != 4 {
		t.Errorf("%d connections counted, want 4", n)
	}
}

// TestMinRateEnds: a download whose client takes in less than
// http.min_rate_kib over min_rate_window is ended, recorded as an error
// that names the settings, and counted; one at full speed is not.
func TestMinRateEnds(t *testing.T) {
	h := defaultHTTP()
	h.MinRateKiB, h.MinRateWindow = 256, 500*time.Millisecond
	e := newTestEnv(t, envOpts{http: h, files: map[string][]byte{"big": pattern(8<<20, 1)}})
	addr := strings.TrimPrefix(e.url, "http://")
	resp, body := rawGet(t, addr, "/big")
	if resp.StatusCode != 200 || len(body) != 8<<20 {
		t.Fatalf("full-speed fetch: %d, %d bytes", resp.StatusCode, len(body))
	}
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, _ = io.WriteString(c, "GET /big HTTP/1.1\r\nHost: pxeperf\r\n\r\n")
	// 16 KiB/s: 1 KiB every 62 ms, for at most 10 s.
	var got int
	buf := make([]byte, 1024)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var rerr error
	for rerr == nil {
		var n int
		n, rerr = c.Read(buf)
		got += n
		time.Sleep(62 * time.Millisecond)
	}
	t.Logf("trickle ended after %v with %d bytes: %v", time.Since(start).Round(time.Millisecond), got, rerr)
	if isTimeout(rerr) {
		t.Errorf("the trickle was still served after 10 s (want ended: http.min_rate_kib)")
	}
	fs := e.waitFetches(t, 2)
	f := fs[1]
	if f.Outcome != event.OutcomeError || !strings.Contains(f.Err, "http.min_rate_kib") {
		t.Errorf("trickle's record: %s %q, want an error naming http.min_rate_kib", f.Outcome, f.Err)
	}
	if got >= 8<<20 {
		t.Errorf("the trickle got the whole file")
	}
	if fs[0].Outcome != event.OutcomeOK {
		t.Errorf("full-speed fetch's record: %s %q", fs[0].Outcome, fs[0].Err)
	}
	if n := e.srv.Refused().Counts()[refuseSlow]; n != 1 {
		t.Errorf("slow downloads counted: %d, want 1", n)
	}
}
