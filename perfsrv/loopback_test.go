package perfsrv

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// startIperf3 runs a server on loopback port 0 with a recorder sink.
func startIperf3(t *testing.T, l Limits) (*Iperf3, *event.Recorder, *syncLog) {
	t.Helper()
	rec := &event.Recorder{}
	lg := &syncLog{}
	s, err := NewIperf3(Config{Addr: "127.0.0.1:0", Limits: l, Sink: rec, SetupTimeout: 3 * time.Second,
		Log: slog.New(slog.NewTextHandler(lg, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, s.Serve, lg)
	return s, rec, lg
}

// serveUntilCleanup runs serve until the test ends, then checks it
// returns nil in time; the server log is shown when the test failed.
func serveUntilCleanup(t *testing.T, serve func(context.Context) error, lg *syncLog) {
	t.Helper()
	// Cleanups run last first: the log is shown after Serve has returned.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", lg.String())
		}
	})
	servetest.Run(t, "perfsrv", 15*time.Second, serve)
}

// clientJSON is the part of iperf3 -J output the tests compare.
type clientJSON struct {
	Intervals []struct {
		Sum struct {
			Bytes int64 `json:"bytes"`
		} `json:"sum"`
	} `json:"intervals"`
	End   map[string]json.RawMessage `json:"end"`
	Error string                     `json:"error"`
}

type jsonSum struct {
	Bytes       int64   `json:"bytes"`
	BPS         float64 `json:"bits_per_second"`
	Retransmits int64   `json:"retransmits"`
	Seconds     float64 `json:"seconds"`
	LostPercent float64 `json:"lost_percent"`
	Packets     int64   `json:"packets"`
}

func (c clientJSON) sum(key string) (jsonSum, bool) {
	var s jsonSum
	raw, ok := c.End[key]
	if !ok {
		return s, false
	}
	_ = json.Unmarshal(raw, &s)
	return s, true
}

func runIperf3(t *testing.T, ns string, args ...string) (clientJSON, string) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3 (apt-get install iperf3)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	name, full := "iperf3", append([]string{"-J"}, args...)
	if ns != "" {
		name, full = "ip", append([]string{"netns", "exec", ns, "iperf3"}, full...)
	}
	cmd := exec.CommandContext(ctx, name, full...)
	out, err := cmd.CombinedOutput()
	var cj clientJSON
	if jerr := json.Unmarshal(out, &cj); jerr != nil {
		t.Fatalf("iperf3 %v: %v; output:\n%s", args, err, out)
	}
	if err != nil || cj.Error != "" {
		t.Fatalf("iperf3 %v: exit %v, error %q", args, err, cj.Error)
	}
	return cj, string(out)
}

type syncLog struct {
	b  strings.Builder
	mu sync.Mutex // was a lazily made channel: its first use raced (go test -race)
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if os.Getenv("PERFSRV_LOG") != "" {
		fmt.Fprint(os.Stderr, string(p))
	}
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestIperf3Loopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf3 for seconds")
	}
	s, rec, _ := startIperf3(t, Limits{})
	port := strconv.Itoa(int(addrPort(s.Addr()).Port()))
	cj, _ := runIperf3(t, "", "-c", "127.0.0.1", "-p", port, "-t", "2", "--get-server-output")
	var fs []event.Fetch
	testenv.WaitFor(5*time.Second, func() bool { fs, _ = rec.Snapshot(); return len(fs) >= 1 })
	if len(fs) != 1 {
		t.Fatalf("%d events, want 1", len(fs))
	}
	f := fs[0]
	sent, _ := cj.sum("sum_sent")
	recv, _ := cj.sum("sum_received")
	t.Logf("pxeperf: %d bytes %.1f Mbit/s %d intervals; client sent %d (%.1f), received %d (%.1f), %d intervals",
		f.Bytes, f.Mbps(), len(f.Intervals), sent.Bytes, sent.BPS/1e6, recv.Bytes, recv.BPS/1e6, len(cj.Intervals))
}

func TestIperf3LoopbackModes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf3 for seconds")
	}
	for _, tc := range []struct {
		name string
		args []string
		dirs []string
	}{
		{"reverse", []string{"-R"}, []string{"rx"}},
		{"bidir", []string{"--bidir"}, []string{"tx", "rx"}},
		{"parallel", []string{"-P", "4"}, []string{"tx"}},
		{"udp", []string{"-u", "-b", "100M"}, []string{"tx"}},
		{"udp reverse", []string{"-u", "-b", "100M", "-R"}, []string{"rx"}},
		{"udp bidir", []string{"-u", "-b", "50M", "--bidir", "-P", "2"}, []string{"tx", "rx"}},
		{"window", []string{"-w", "16K"}, []string{"tx"}},
		{"bytes", []string{"-n", "200M"}, []string{"tx"}},
		{"bytes reverse", []string{"-n", "200M", "-R"}, []string{"rx"}},
		{"omit", []string{"-O", "1"}, []string{"tx"}},
		{"zerocopy", []string{"-Z", "-R", "-l", "64K"}, []string{"rx"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rec, _ := startIperf3(t, Limits{})
			port := strconv.Itoa(int(addrPort(s.Addr()).Port()))
			args := append([]string{"-c", "127.0.0.1", "-p", port, "--get-server-output"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "-n") {
				args = append(args, "-t", "2")
			}
			cj, out := runIperf3(t, "", args...)
			var fs []event.Fetch
			testenv.WaitFor(5*time.Second, func() bool { fs, _ = rec.Snapshot(); return len(fs) >= len(tc.dirs) })
			if len(fs) != len(tc.dirs) {
				t.Fatalf("%d events, want %d", len(fs), len(tc.dirs))
			}
			for i, f := range fs {
				if f.Direction != tc.dirs[i] {
					t.Errorf("event %d direction %q, want %q", i, f.Direction, tc.dirs[i])
				}
				t.Logf("%s: %d bytes %.1f Mbit/s %d intervals labels %v", f.Direction, f.Bytes, f.Mbps(), len(f.Intervals), f.Labels)
			}
			keys := []string{}
			for k := range cj.End {
				keys = append(keys, k)
			}
			for _, k := range keys {
				if s, ok := cj.sum(k); ok && s.Bytes > 0 {
					t.Logf("client %s: %d bytes %.1f Mbit/s lost %.2f%%", k, s.Bytes, s.BPS/1e6, s.LostPercent)
				}
			}
			t.Logf("client intervals %d", len(cj.Intervals))
			_ = out
		})
	}
}
