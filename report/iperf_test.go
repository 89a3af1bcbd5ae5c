package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/record"
)

// boardSendTest is a 3 s iperf3 test the board sent in (iperf3 -c without
// -R), as perfsrv records it: the server received, so its interval
// samples have bytes only (a receiver's TCP_INFO has neither the sender's
// retransmits nor its window); the record's retransmits, 314, are the
// board's own from the result exchange.
func boardSendTest() (record.Record, []record.Interval) {
	r := record.Record{ID: 57, Time: t0, Source: "iperf3", Proto: "tcp", Direction: "tx",
		ClientIP: "10.251.3.2", Host: "board1", File: "iperf3 -t 3 (tx)",
		Bytes: 5_630_000_000, Size: -1, Duration: 3 * time.Second, Mbps: 15013.3, Outcome: "ok",
		MSS: 65483, Retransmits: 314, MTU: 65536, Iface: "veth-s"}
	ivs := []record.Interval{
		{RecordID: 57, Start: 0, End: time.Second, Bytes: 1_830_000_000},
		{RecordID: 57, Start: time.Second, End: 2 * time.Second, Bytes: 1_900_000_000},
		{RecordID: 57, Start: 2 * time.Second, End: 3 * time.Second, Bytes: 1_900_000_000},
	}
	return r, ivs
}

// TestBoardSendsLayouts: the intervals and netperf layouts of a test the
// board sent (their golden files, intervals-tx and netperf-tx, are in
// TestGolden). The netperf title names the board as the sender; the
// interval lines show Retr and Cwnd as unknown (-), never 0; the summary
// keeps the board's 314 retransmits.
func TestBoardSendsLayouts(t *testing.T) {
	r, ivs := boardSendTest()
	nl := Netperf(r).Layout
	if !strings.Contains(nl, "STREAM TEST from board1 (10.251.3.2) to pxeperf") {
		t.Errorf("netperf title of a board-send test:\n%s", nl)
	}
	noMSS := r
	noMSS.MSS = 0
	if tb := Netperf(noMSS); tb.Rows[0][2] != "" || !strings.Contains(tb.Layout, "     -      -      -    3.00") {
		t.Errorf("netperf of a record without an MSS: message %q, want - (not a made-up 0)\n%s", tb.Rows[0][2], tb.Layout)
	}
	il := Intervals(r, ivs)
	for _, line := range strings.Split(il.Layout, "\n") {
		if strings.Contains(line, " sec ") && !strings.Contains(line, "sender") && !strings.Contains(line, "receiver") {
			if f := strings.Fields(line); len(f) < 2 || f[len(f)-1] != "-" || f[len(f)-2] != "-" {
				t.Errorf("interval line %q: want Retr and Cwnd as -", line)
			}
		}
		if strings.Contains(line, "sender") && !strings.Contains(line, " 314 ") {
			t.Errorf("sender line %q: want the board's 314 retransmits", line)
		}
	}
	for _, row := range jsonRows(t, il) {
		if row["retransmits"] != nil || row["cwnd"] != nil {
			t.Errorf("row %v: want retransmits and cwnd null", row)
		}
	}
}

// jsonRows are a table's typed rows as its JSON has them.
func jsonRows(t *testing.T, tb Table) []map[string]any {
	t.Helper()
	b, err := json.Marshal(tb.Data)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestIntervalsUnknownSender: which intervals show Retr and Cwnd. A served
// fetch (the server sent) shows them, 0 retransmits included; a UDP or
// TCP_INFO-less one (cwnd 0) does not; an iperf 2 test the board sent
// has no board count for the summary either.
func TestIntervalsUnknownSender(t *testing.T) {
	served, ivs := fetchWithIntervals()
	for _, row := range jsonRows(t, Intervals(served, ivs)) {
		if row["retransmits"] == nil || row["cwnd"] == nil {
			t.Errorf("served fetch row %v: want retransmits and cwnd", row)
		}
	}
	if tb := Intervals(served, ivs); len(tb.Notes) != 0 {
		t.Errorf("served fetch notes %q, want none", tb.Notes)
	}
	noInfo := []record.Interval{{Start: 0, End: time.Second, Bytes: 1 << 20}}
	if rows := jsonRows(t, Intervals(served, noInfo)); rows[0]["cwnd"] != nil {
		t.Errorf("interval without TCP_INFO: %v, want cwnd null", rows[0])
	}
	r, ivs := boardSendTest()
	r.Source, r.Retransmits = "iperf2", 0
	for _, line := range strings.Split(Intervals(r, ivs).Layout, "\n") {
		if strings.HasSuffix(line, "sender") && !strings.Contains(line, "sec    -  ") {
			t.Errorf("iperf 2 board-send sender line %q: want Retr -", line)
		}
	}
	// The server sent (iperf3 -R): its own TCP_INFO, shown.
	r, _ = boardSendTest()
	r.Direction = "rx"
	rows := jsonRows(t, Intervals(r, []record.Interval{{Start: 0, End: time.Second, Bytes: 1 << 20, Cwnd: 1 << 20}}))
	if rows[0]["cwnd"] == nil || rows[0]["retransmits"] != float64(0) {
		t.Errorf("server-send interval %v: want retransmits 0 and the cwnd", rows[0])
	}
}
