//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/nstest"
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
	tbf(t, p)
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
