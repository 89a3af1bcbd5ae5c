package perfsrv

import (
	"context"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

func TestIperf2Loopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf for seconds")
	}
	if _, err := exec.LookPath("iperf"); err != nil {
		t.Skip("needs iperf (apt-get install iperf)")
	}
	for _, tc := range []struct {
		name  string
		args  []string
		proto string
	}{
		{"tcp", nil, "tcp"},
		{"udp", []string{"-u", "-b", "50M"}, "udp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &event.Recorder{}
			lg := &syncLog{}
			s, err := NewIperf2(Config{Addr: "127.0.0.1:0", Sink: rec, Log: slog.New(slog.NewTextHandler(lg, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx) }()
			t.Cleanup(func() {
				cancel()
				<-done
				if t.Failed() {
					t.Logf("server log:\n%s", lg.String())
				}
			})
			port := strconv.Itoa(int(addrPort(s.Addr()).Port()))
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			out, err := exec.CommandContext(cctx, "iperf", append([]string{"-c", "127.0.0.1", "-p", port, "-t", "2", "-f", "k"}, tc.args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("iperf: %v\n%s", err, out)
			}
			if tc.proto == "udp" && !strings.Contains(string(out), "Server Report") {
				t.Errorf("no server report in the client's output:\n%s", out)
			}
			var fs []event.Fetch
			nsWait(5*time.Second, func() bool { fs, _ = rec.Snapshot(); return len(fs) == 1 })
			if len(fs) != 1 {
				t.Fatalf("%d events, want 1\n%s", len(fs), out)
			}
			f := fs[0]
			if f.Proto != tc.proto || f.Source != SourceIperf2 || f.Direction != "tx" || f.Outcome != "ok" {
				t.Errorf("event %+v", f)
			}
			t.Logf("pxeperf: %d bytes %.1f Mbit/s %d intervals %v\nclient:\n%s", f.Bytes, f.Mbps(), len(f.Intervals), f.Labels, out)
		})
	}
}

func nsWait(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}
