//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/record"
)

// TestIperfHostLabels (issue 28 row 2): a board with a host entry
// (labels {board: b1}, known by its address: iperf tests carry no MAC)
// runs Debian's iperf3 and iperf 2.1.8 clients against the real binary.
// `report --table fetches --label board=b1` lists every one of its iperf
// records, each labelled only with what the host entry and the board
// said; UDP jitter and loss are record fields equal to the client's own
// figures (2%: jitter is a float both print to 3 decimals), never labels.
func TestIperfHostLabels(t *testing.T) {
	nstest.RequireTool(t, "iperf")
	p := nstest.NewPair(t, nstest.Options{})
	peers.ShapeBoth(t, p, true)
	const mac = "52:54:00:28:00:01"
	nstest.Run(t, p.Client, "ip", "link", "set", p.ClientIf, "address", mac)
	data, _ := iperfServe(t, p, fmt.Sprintf("hosts:\n  - mac: %q\n    name: b1-host\n    address: %s\n    labels: {board: b1}\n", mac, p.ClientIP))
	srv := p.ServerIP.String()

	tcp3 := iperf3(t, p.Client, "-c", srv, "-t", "2")
	udp3 := iperf3(t, p.Client, "-c", srv, "-t", "2", "-u", "-b", "50M", "-R")
	out, err := nstest.Output(p.Client, 60*time.Second, "iperf", "-c", srv, "-t", "2")
	if err != nil {
		t.Fatalf("iperf -c: %v\n%s", err, out)
	}
	udp2, err := nstest.Output(p.Client, 60*time.Second, "iperf", "-c", srv, "-t", "2", "-u", "-b", "50M")
	if err != nil {
		t.Fatalf("iperf -c -u: %v\n%s", err, udp2)
	}
	sourceRecords(t, data, "iperf3", 2)
	sourceRecords(t, data, "iperf2", 2)

	rep, err := exec.Command(nstest.Binary(t), "report", "--data", data, "--table", "fetches", "--label", "board=b1",
		"--format", "json").Output() // stdout: the table; stderr says when nothing matches
	if err != nil {
		t.Fatalf("report: %v\n%s", err, rep)
	}
	var tab struct {
		Rows []record.Record `json:"rows"`
	}
	if err := json.Unmarshal(rep, &tab); err != nil {
		t.Fatalf("report --format json: %v\n%s", err, rep)
	}
	var got []string
	byFile := map[string]record.Record{}
	for _, r := range tab.Rows {
		got = append(got, r.Source+" "+r.Proto+" "+r.Direction)
		byFile[r.Source+" "+r.Proto] = r
		// Labels: the host entry's and what the board asked; no figure.
		if r.Labels["board"] != "b1" {
			t.Errorf("record %d (%s): labels %v", r.ID, r.File, r.Labels)
		}
		for k := range r.Labels {
			if regexp.MustCompile(`jitter|lost|packets|secs|client_(bytes|mbps|retr)|server_|duration_from`).MatchString(k) {
				t.Errorf("record %d (%s): measured label %s=%s", r.ID, r.File, k, r.Labels[k])
			}
		}
		if r.Host != "b1-host" || r.ClientMAC != mac {
			t.Errorf("record %d (%s): host %q MAC %q", r.ID, r.File, r.Host, r.ClientMAC)
		}
	}
	sort.Strings(got)
	if want := "iperf2 tcp tx,iperf2 udp tx,iperf3 tcp tx,iperf3 udp rx"; strings.Join(got, ",") != want {
		t.Fatalf("report --label board=b1 lists %v, want %s\n%s", got, want, rep)
	}
	// The dashboard's recent fetches (fed by the events, not the store)
	// name the same host, MAC and labels as the records: serve stamps the
	// host entry on each event before any sink (hosts.Stamping).
	body, err := (&nstest.Served{NS: p.Server, Admin: "127.0.0.1:9069"}).Get("/api/recent")
	if err != nil {
		t.Fatalf("/api/recent: %v\n%s", err, body)
	}
	var recent struct {
		Fetches []struct {
			File      string            `json:"file"`
			Host      string            `json:"host"`
			ClientMAC string            `json:"client_mac"`
			Labels    map[string]string `json:"labels"`
		} `json:"fetches"`
	}
	if err := json.Unmarshal([]byte(body), &recent); err != nil {
		t.Fatalf("/api/recent: %v\n%s", err, body)
	}
	seen := 0
	for _, f := range recent.Fetches {
		for _, r := range tab.Rows {
			if r.File != f.File {
				continue
			}
			seen++
			if f.Host != r.Host || f.ClientMAC != r.ClientMAC || fmt.Sprint(f.Labels) != fmt.Sprint(r.Labels) {
				t.Errorf("dashboard %q: host %q MAC %q labels %v; its record: host %q MAC %q labels %v",
					f.File, f.Host, f.ClientMAC, f.Labels, r.Host, r.ClientMAC, r.Labels)
			}
		}
	}
	if seen != len(tab.Rows) {
		t.Errorf("the dashboard lists %d of the %d iperf records:\n%s", seen, len(tab.Rows), body)
	}

	// iperf3 -u -R: the board received, its own loss and jitter are the
	// record's (from the result exchange: its streams' packets, which its
	// JSON sum counts a few datagrams apart, 1%).
	var sum struct {
		Jitter  float64 `json:"jitter_ms"`
		Lost    int64   `json:"lost_packets"`
		Packets int64   `json:"packets"`
	}
	if err := json.Unmarshal(udp3.End["sum"], &sum); err != nil || sum.Packets == 0 {
		t.Fatalf("iperf3 -J end.sum: %v %+v", err, sum)
	}
	r := byFile["iperf3 udp"]
	t.Logf("iperf3 -u -R: record jitter %.4f ms lost %d/%d (%.3f%%), client %.4f ms %d/%d", r.JitterMs, r.UDPLost, r.UDPPackets,
		r.UDPLostPct, sum.Jitter, sum.Lost, sum.Packets)
	if pctOff(r.JitterMs, sum.Jitter) > 2 || pctOff(float64(r.UDPPackets), float64(sum.Packets)) > 1 ||
		math.Abs(float64(r.UDPLost-sum.Lost)) > float64(sum.Packets)/100 {
		t.Errorf("iperf3 -u -R: record jitter %.4f ms lost %d/%d, the client's %.4f ms %d/%d", r.JitterMs, r.UDPLost, r.UDPPackets,
			sum.Jitter, sum.Lost, sum.Packets)
	}
	// iperf3 -c: the board's own rate is on the record, beside the server's window.
	r = byFile["iperf3 tcp"]
	if c := tcp3.sum("sum_sent"); pctOff(r.ClientMbps, c.BPS/1e6) > 2 || r.ServerDuration <= 0 || !r.ClientClock {
		t.Errorf("iperf3 -c: record client_mbps %.2f clock %v server %v, the client's %.2f", r.ClientMbps, r.ClientClock,
			r.ServerDuration, c.BPS/1e6)
	}
	// iperf -u: pxeperf measured what arrived; the client counts what it
	// sent (its last datagrams are the FIN, outside the sequence counted).
	sent := regexp.MustCompile(`Sent (\d+) datagrams`).FindStringSubmatch(udp2)
	var n int64
	if sent == nil {
		t.Fatalf("iperf -c -u: no datagram count\n%s", udp2)
	}
	fmt.Sscan(sent[1], &n)
	r = byFile["iperf2 udp"]
	t.Logf("iperf -u: record jitter %.4f ms lost %d/%d, the client sent %d\n%s", r.JitterMs, r.UDPLost, r.UDPPackets, n, udp2)
	if r.UDPPackets == 0 || pctOff(float64(r.UDPPackets), float64(n)) > 1 || r.JitterMs <= 0 {
		t.Errorf("iperf -u: record %d datagrams jitter %.4f, the client sent %d", r.UDPPackets, r.JitterMs, n)
	}
}
