//go:build linux

package dhcp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestVersusKea runs pxeperf (full mode, the real binary, every lease
// fsynced before its ACK) and kea-dhcp4 (memfile, which never fsyncs), with
// one thread and multi-threaded, in one alternating run against Kea's
// perfdhcp with 1000 clients, and prints per server, as medians over the
// rounds and as same-round ratios pxeperf/kea:
//
//   - the highest offered rate with < 1% loss (loss = 1 - ACKs/DISCOVERs),
//   - the peak completed 4-way exchanges/s at any offered rate,
//   - server CPU per exchange at 1000/s offered (its cgroup's CPU over the
//     run, divided by the ACKs perfdhcp received),
//   - syscalls per ACK at 100/s (strace -c -f on the server).
//
// It asserts nothing about the figures. Opt in with PXEPERF_BENCH=1 (about
// 3 minutes a round). PXEPERF_BENCH_RATES (default "1000 2000 3000 4000
// 5000 6000 8000 12000"), PXEPERF_BENCH_ROUNDS (3) and PXEPERF_BENCH_PERIOD
// (seconds per perfdhcp run, 6) shape it; PXEPERF_BENCH_PERF=DIR records
// `perf record -g` of each server's 1000/s run there, and
// PXEPERF_BENCH_SERVERS="pxeperf kea" runs those only;
// PXEPERF_BENCH_BEFORE=BINARY adds another pxeperf binary (built from
// main, say) to the same alternating run, as "before". bench/peers's
// TestPeers runs the same sweep as part of the whole peers table.
func TestVersusKea(t *testing.T) {
	peers.Require(t, "benchmark: set PXEPERF_BENCH=1 to run pxeperf and kea side by side")
	nstest.RequireRoot(t)
	rates := peers.EnvInts(t, "PXEPERF_BENCH_RATES", "1000 2000 3000 4000 5000 6000 8000 12000")
	rounds := peers.Rounds(3)
	period := peers.EnvInt("PXEPERF_BENCH_PERIOD", 6)
	p := nstest.NewPair(t, nstest.Options{})
	lab := peers.NewDHCPLab(t, p, nstest.Binary(t), JournalName, rates, period)

	names := []string{"pxeperf", "kea", "kea-mt"}
	if before := peers.Env("PXEPERF_BENCH_BEFORE"); before != "" {
		names = []string{"pxeperf", "before=" + before, "kea", "kea-mt"}
	}
	if only := peers.Env("PXEPERF_BENCH_SERVERS"); only != "" {
		names = strings.Fields(only) // for profiling one of them
	}
	results := map[string][]peers.DHCPResult{}
	for round := range rounds {
		order := names
		if round%2 == 1 {
			order = slices.Clone(names)
			slices.Reverse(order)
		}
		for _, name := range order {
			s := lab.Start(t, name)
			results[name] = append(results[name], lab.Sweep(t, s, round+1, peers.Env("PXEPERF_BENCH_PERF")))
			s.Proc.Kill()
		}
	}
	fmt.Printf("pxeperf vs kea-dhcp4 %s (memfile; kea-mt: multi-threading, 2 threads), perfdhcp -R 1000, "+
		"%d rounds alternating, %ds per run; medians; X/kea = median of same-round ratios\n%s",
		peers.KeaVersion(), rounds, period, peers.DHCPTable(results, names, rates))
}
