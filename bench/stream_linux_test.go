package bench

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/stream"
)

// TestRunStreams runs a short real stream sweep with --cross-check iperf3:
// TCP tx and rx and UDP tx and rx at 50mbit, 2 s each, MTU 1500, a 1gbit
// tbf both ways, pxeperf's stream server in one namespace and its clients
// (then iperf3's) in the other.
func TestRunStreams(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "iperf3")
	run := runSweep(t, Flags{Proto: "tcp,udp", Direction: "tx,rx", Duration: "2s", UDPRate: "50mbit", Rate: "1gbit", MTU: "1500"},
		Options{RunID: "s1", CrossCheck: true})
	results, progress, verbose, st, ctx := run.results, run.progress, run.verbose, run.store, t.Context()
	if len(results) != 4 || len(progress) != 5 || progress[4].Done != 4 {
		t.Fatalf("%d results, %d progress calls; want 4 and 5", len(results), len(progress))
	}
	for _, want := range []string{"receiver", "UDP: sent", "iperf3:"} {
		if !strings.Contains(verbose, want) {
			t.Errorf("verbose output lacks %q:\n%s", want, verbose)
		}
	}

	recs := run.stored(t, 4)
	kinds := map[string]bool{}
	for _, r := range recs {
		kind := r.Proto + " " + r.Direction
		kinds[kind] = true
		if r.Outcome != "ok" || r.Bytes <= 0 || r.MTU != 1500 || r.RateLimit != 1e9 || r.RxCsum == record.OffloadUnknown {
			t.Errorf("%s: outcome %s (%s), %d bytes, MTU %d, rate %d, rx csum %q", kind, r.Outcome, r.Err, r.Bytes, r.MTU, r.RateLimit, r.RxCsum)
		}
		if d := r.Duration; d < 1900*time.Millisecond || d > 2500*time.Millisecond {
			t.Errorf("%s: duration %v for a 2 s run", kind, d)
		}
		ivs, err := st.Intervals(ctx, r.ID)
		if err != nil || len(ivs) < 2 {
			t.Errorf("%s: %d intervals (%v), want 2", kind, len(ivs), err)
		}
		switch r.Proto {
		case ProtoTCP:
			// Under a 1gbit tbf: at most the line rate, and well above 100.
			if r.Mbps > 1000 || r.Mbps < 300 {
				t.Errorf("%s: %.1f Mbit/s under a 1gbit tbf", kind, r.Mbps)
			}
			if r.Labels["window"] != "auto" || r.RTT <= 0 {
				t.Errorf("%s: window label %q, RTT %v", kind, r.Labels["window"], r.RTT)
			}
		case ProtoUDP:
			if r.Mbps < 40 || r.Mbps > 55 {
				t.Errorf("%s: %.1f Mbit/s at 50mbit asked", kind, r.Mbps)
			}
			lost, jit := r.UDPLostPct, r.JitterMs
			if lost < 0 || lost > 5 || jit < 0 || r.Datagrams == 0 || r.UDPPackets == 0 {
				t.Errorf("%s: lost %.3f%%, jitter %.3f ms, %d datagrams, %d expected", kind, lost, jit, r.Datagrams, r.UDPPackets)
			}
		}
	}
	if len(kinds) != 4 {
		t.Errorf("records of %v, want tcp and udp both ways", kinds)
	}

	// The direction-mtu table has all four rows filled.
	var b strings.Builder
	if err := report.Render(&b, report.DirectionMTU(recs), report.Text); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"TCP Tx", "TCP Rx", "UDP Tx", "UDP Rx"} {
		line := ""
		for l := range strings.SplitSeq(b.String(), "\n") {
			if strings.Contains(l, "  "+row+"  ") { // after the Source, Iface and Link columns
				line = l
			}
		}
		if line == "" || strings.HasSuffix(strings.TrimSpace(line), "-") {
			t.Errorf("direction-mtu row %q empty:\n%s", row, b.String())
		}
	}

	// Cross-check: every run has iperf3's figure next to it, within a
	// generous band (the 5% bound is for quiet machines; this one is shared).
	tab, flagged, n := CrossCheck(results)
	if n != 4 {
		t.Fatalf("%d cross-check pairs, want 4:\n%+v", n, tab.Rows)
	}
	for _, r := range results {
		if rec := r.Record; rec.Iperf3Mbps == 0 || rec.Iperf3DevPct > 25 {
			t.Errorf("%s: pxeperf %.1f vs iperf3 %.1f Mbit/s (deviation %.2f%%, err %q)", r.Point.Key(), rec.Mbps,
				rec.Iperf3Mbps, rec.Iperf3DevPct, rec.Iperf3Err)
		}
	}
	t.Logf("cross-check: %d of %d over 5%%", flagged, n)
	b.Reset()
	if err := report.Render(&b, StreamSummary(results), report.Text); err != nil || !strings.Contains(b.String(), "udp_rate=50mbit") {
		t.Errorf("stream summary (%v):\n%s", err, b.String())
	}
}

// TestRunRemoteStreams runs remote mode's streams on loopback against a
// stream server (cmd/pxeperf's test runs the real serve, HTTP included).
func TestRunRemoteStreams(t *testing.T) {
	srv, err := stream.NewServer("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "stream", 20*time.Second, srv.Serve)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	spec, err := ParseSpec(Flags{Proto: "tcp,udp", Direction: "tx,rx", Duration: "1s", UDPRate: "20mbit", Window: "64K"})
	if err != nil {
		t.Fatal(err)
	}
	st := testStore(t)
	results, err := RunRemote(ctx, RemoteOptions{Spec: spec, Server: srv.Addr().String(), Store: st, RunID: "r1"})
	if err != nil {
		t.Fatalf("RunRemote: %v", err)
	}
	if len(results) != 4 {
		t.Fatalf("%d results, want 4", len(results))
	}
	host, _, _ := net.SplitHostPort(srv.Addr().String())
	for _, r := range results {
		rec := r.Record
		if rec.Outcome != "ok" || rec.Mbps <= 0 || rec.Labels[LabelRemote] != host || rec.Labels[LabelRun] != "r1" || rec.ID == 0 {
			t.Errorf("%s: outcome %s (%s), %.1f Mbit/s, labels %v", r.Point.Key(), rec.Outcome, rec.Err, rec.Mbps, rec.Labels)
		}
		if rec.MTU != 0 || rec.RateLimit != 0 {
			t.Errorf("%s: MTU %d, rate %d on a remote run (unknown: 0)", r.Point.Key(), rec.MTU, rec.RateLimit)
		}
		if rec.Proto == ProtoTCP && rec.WndRequested != 64<<10 {
			t.Errorf("%s: window asked %d", r.Point.Key(), rec.WndRequested)
		}
	}

	// What remote mode cannot do.
	for name, f := range map[string]Flags{
		"mtu list": {Proto: "tcp", MTU: "1500,9000"},
		"rate":     {Proto: "tcp", Rate: "1gbit"},
		"tftp":     {Proto: "tftp"},
	} {
		s, err := ParseSpec(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := RemoteSpec(s); err == nil {
			t.Errorf("%s: RemoteSpec accepted %+v", name, f)
		}
	}
}

// TestRunStreamsCancel: Ctrl-C during a 10 s stream run stops the sweep at
// once and leaves no namespace behind.
func TestRunStreamsCancel(t *testing.T) {
	nstest.RequireRoot(t)
	results, _ := runInterrupted(t, Flags{Proto: "tcp", Direction: "rx", Duration: "10s", Repeat: 3}, 500*time.Millisecond)
	if len(results) > 0 {
		t.Errorf("%d runs completed after the interrupt (a run should stop with it)", len(results))
	}
}
