//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/record"
)

// TestIperf3BoardSendReport: Debian's iperf3 client sends (no -R) to the
// real binary over a veth with a 1 Gbit/s tbf, and `report` lays the
// record out. The server received, so its interval samples hold bytes
// only: `--intervals` prints each of the client's interval lines with
// Retr and Cwnd as "-" (a receiver sees neither, and iperf3's own
// receiving side prints no such columns), never "0 ... 0.00 Bytes", and
// its sender summary has the retransmits of the client's own sum_sent;
// `--netperf` names the board as the sender (issue 28 row 6 a, b).
func TestIperf3BoardSendReport(t *testing.T) {
	p := nstest.NewPair(t, nstest.Options{})
	peers.ShapeBoth(t, p, true)
	data, _ := iperfServe(t, p, "")
	out, err := nstest.Output(p.Client, 60*time.Second, "iperf3", "-J", "-c", p.ServerIP.String(), "-t", "3")
	var j struct {
		Intervals []struct {
			Sum struct {
				Omitted bool `json:"omitted"`
			} `json:"sum"`
		} `json:"intervals"`
		End struct {
			SumSent struct {
				Bytes       int64 `json:"bytes"`
				Retransmits int64 `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal([]byte(out), &j); jerr != nil || err != nil || j.Error != "" {
		t.Fatalf("iperf3: exit %v, error %q\n%s", err, j.Error, out)
	}
	lines := 0
	for _, iv := range j.Intervals {
		if !iv.Sum.Omitted {
			lines++
		}
	}
	r := iperfRecords(t, data, 1)[0]
	if r.Direction != "tx" {
		t.Fatalf("record direction %q, want tx (the board sent)", r.Direction)
	}
	report := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(nstest.Binary(t), append([]string{"report", "--data", data}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("report %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	iv := report("--intervals", fmt.Sprint(r.ID))
	t.Logf("client: %d interval lines, sum_sent %d B, %d retransmits\n%s", lines, j.End.SumSent.Bytes, j.End.SumSent.Retransmits, iv)
	n := 0
	for _, line := range strings.Split(iv, "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasSuffix(line, "sender"):
			if len(f) < 2 || f[len(f)-2] != fmt.Sprint(j.End.SumSent.Retransmits) {
				t.Errorf("sender line %q: want the client's %d retransmits", line, j.End.SumSent.Retransmits)
			}
		case strings.Contains(line, " sec ") && !strings.HasSuffix(line, "receiver"):
			n++
			if len(f) < 2 || f[len(f)-1] != "-" || f[len(f)-2] != "-" {
				t.Errorf("interval line %q: want Retr and Cwnd as - (the server received)", line)
			}
		}
	}
	if n != lines {
		t.Errorf("report --intervals printed %d interval lines, the client %d", n, lines)
	}
	np := report("--netperf", fmt.Sprint(r.ID))
	if want := "STREAM TEST from " + r.ClientIP + " to pxeperf"; !strings.Contains(np, want) {
		t.Errorf("report --netperf of a board-send test: want %q\n%s", want, np)
	}
}

// TestIperf3BoardSendUnknownRetransmits: a board-send iperf3 test (no -R)
// whose board never sends its results (the real client killed mid-test)
// has no known retransmit count: the server received, and a receiver's
// TCP_INFO holds none of the sender's. Its record says so
// (record.RetransmitsUnknown), `report --intervals` prints "-" in the
// sender summary, not 0, and serve's log line leaves retrans, rtt and
// max_wnd out. A test that ended with the board's results logs the
// board's retrans and still no rtt=0s or max_wnd=0 (figures of the
// sender's socket the server cannot read).
func TestIperf3BoardSendUnknownRetransmits(t *testing.T) {
	p := nstest.NewPair(t, nstest.Options{})
	peers.ShapeBoth(t, p, true)
	data, log := iperfServe(t, p, "")
	var sent struct {
		Retransmits int64 `json:"retransmits"`
	}
	_ = json.Unmarshal(iperf3(t, p.Client, "-c", p.ServerIP.String(), "-t", "2").End["sum_sent"], &sent)
	c := nstest.Start(t, p.Client, "iperf3", "-c", p.ServerIP.String(), "-t", "30", "-i", "1", "--forceflush")
	if !nstest.WaitFor(20*time.Second, func() bool { return strings.Count(c.Out.String(), "bits/sec") >= 2 }) {
		t.Fatalf("iperf3 printed no intervals:\n%s", c.Out.String())
	}
	c.Kill() // SIGKILL: no TEST_END, no results
	recs := iperfRecords(t, data, 2)
	done, killed := recs[0], recs[1]
	t.Logf("completed: retransmits %d (client's sum_sent %d), outcome %s; killed: retransmits %d, outcome %s %q",
		done.Retransmits, sent.Retransmits, done.Outcome, killed.Retransmits, killed.Outcome, killed.Err)
	if done.Retransmits != sent.Retransmits {
		t.Errorf("completed test: record retransmits %d, the client's own %d", done.Retransmits, sent.Retransmits)
	}
	if killed.Retransmits >= 0 {
		t.Errorf("killed test: record retransmits %d; the board's count never came (want unknown, %d)", killed.Retransmits, record.RetransmitsUnknown)
	}
	b, err := exec.Command(nstest.Binary(t), "report", "--data", data, "--intervals", fmt.Sprint(killed.ID)).CombinedOutput()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	t.Logf("report --intervals %d:\n%s", killed.ID, b)
	sender := false
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); strings.HasSuffix(line, "sender") {
			sender = true
			if len(f) < 2 || f[len(f)-2] != "-" {
				t.Errorf("sender line %q: want Retr - (unknown, not 0)", line)
			}
		}
	}
	if !sender {
		t.Errorf("report --intervals printed no sender summary")
	}
	var lines []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "msg=fetch") && strings.Contains(line, "proto=tcp") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("serve logged %d tcp fetch lines, want 2:\n%s", len(lines), log.String())
	}
	t.Logf("serve's log:\n%s\n%s", lines[0], lines[1])
	for i, line := range lines {
		if strings.Contains(line, "rtt=0s") || strings.Contains(line, "max_wnd=0") {
			t.Errorf("log line %d prints figures the receiving server cannot know: %s", i, line)
		}
	}
	if want := fmt.Sprintf("retrans=%d", sent.Retransmits); !strings.Contains(lines[0], want) {
		t.Errorf("completed test's log line lacks the board's %s: %s", want, lines[0])
	}
	if strings.Contains(lines[1], "retrans=") {
		t.Errorf("killed test's log line prints a retransmit count nobody told the server: %s", lines[1])
	}
}
