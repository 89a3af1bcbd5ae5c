package iperf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/stream"
)

// The testdata reports are real iperf3 3.12 runs on loopback (client -i
// 0.5, server -i 1), captured with the commands in Args.
func TestParse(t *testing.T) {
	type summary struct {
		Proto                string
		Dir                  stream.Direction
		Intervals            int
		Peer                 bool
		SentBytes, RecvBytes int64
		Retransmits          int64
		Packets, Lost        int64
		FirstCwnd            int64
		Jitter               bool
	}
	for name, want := range map[string]summary{
		"tcp.json":         {Proto: "tcp", Dir: stream.Tx, Intervals: 2, SentBytes: 3950510080, RecvBytes: 3950510080, Retransmits: 1, FirstCwnd: 916762},
		"tcp_window.json":  {Proto: "tcp", Dir: stream.Rx, Intervals: 2},
		"tcp_reverse.json": {Proto: "tcp", Dir: stream.Rx, Intervals: 2, Peer: true, FirstCwnd: 1047728},
		"udp.json":         {Proto: "udp", Dir: stream.Tx, Intervals: 2, Peer: true, Packets: 1725, Jitter: true},
		"udp_reverse.json": {Proto: "udp", Dir: stream.Rx, Intervals: 2, Peer: true, Jitter: true},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			r, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			got := summary{Proto: r.Proto, Dir: r.Direction, Intervals: len(r.Intervals), Peer: len(r.PeerIntervals) > 0,
				Retransmits: r.Sender.Retransmits, FirstCwnd: r.Intervals[0].SndCwnd, Jitter: r.Receiver.JitterMs > 0}
			if want.SentBytes != 0 {
				got.SentBytes, got.RecvBytes = r.Sender.Bytes, r.Receiver.Bytes
			}
			if want.Packets != 0 {
				got.Packets, got.Lost = r.Receiver.Packets, r.Receiver.Lost
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// Byte accounting holds for iperf3 too.
			var sum int64
			for _, iv := range r.Intervals {
				sum += iv.Bytes
			}
			local := r.Sender
			if r.Direction == stream.Rx {
				local = r.Receiver
			}
			if sum != local.Bytes {
				t.Errorf("intervals sum to %d, summary %d", sum, local.Bytes)
			}
			if r.Receiver.Bytes > r.Sender.Bytes || r.Receiver.End <= 0 || r.Intervals[0].End <= 0 {
				t.Errorf("odd summary: %+v", r)
			}
		})
	}
	b, err := os.ReadFile("testdata/refused.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); !errors.Is(err, ErrIperf) {
		t.Errorf("refused.json: %v, want ErrIperf", err)
	}
}

func TestArgs(t *testing.T) {
	c, s := Config{UDP: true, Direction: stream.Rx, Duration: 1500 * time.Millisecond, Rate: 10e6, Window: 65536}.Args("10.0.0.1")
	want := []string{"-c", "10.0.0.1", "-p", "5201", "-J", "--get-server-output", "-t", "2", "-i", "1", "-R",
		"-u", "-b", "10000000", "-l", "1448", "-w", "65536"}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("client args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-s", "-1", "-J", "-p", "5201", "-i", "1"}, s); diff != "" {
		t.Errorf("server args (-want +got):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"tcp.json", "udp_reverse.json", "refused.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"start":{"test_start":{"protocol":"TCP"}},"end":{"sum_sent":{},"sum_received":{}},"server_output_json":{"intervals":[{"streams":[{},{}]}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		Parse(b) // must not panic
	})
}
