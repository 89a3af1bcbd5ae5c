//go:build linux

package record_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/netstate"
	"github.com/pxeperf/pxeperf/record"
)

// benchServers starts two HTTP boot servers on loopback over the same root:
// "off" discards events, "on" records them as serve does (journal, SQLite
// store, interface state).
func benchServers(tb testing.TB, root string) (off, on string, sink *record.Sink) {
	quiet := slog.New(slog.DiscardHandler)
	start := func(s event.Sink) string {
		store, err := images.Open(root, tb.TempDir(), quiet)
		if err != nil {
			tb.Fatal(err)
		}
		h := configs.HTTP{Enabled: true, Listen: "127.0.0.1:0", ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout: time.Minute, StallTimeout: time.Minute, ShutdownGrace: time.Second}
		srv, err := httpboot.New(httpboot.Options{HTTP: h, Images: store, Sink: s, Logger: quiet, Interface: "lo"})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { store.Close() }) // after Serve has returned
		servetest.Run(tb, "http", 30*time.Second, srv.Serve)
		return "http://" + srv.Addr().String()
	}
	data := tb.TempDir()
	st, err := record.Open(data)
	if err != nil {
		tb.Fatal(err)
	}
	j, err := record.OpenJournal(data)
	if err != nil {
		tb.Fatal(err)
	}
	ns, err := netstate.New(netstate.DefaultTTL)
	if err != nil {
		tb.Fatal(err)
	}
	sink = record.NewSink(st, quiet, record.SinkOptions{Journal: j, Interface: "lo", Net: ns})
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = sink.Close(ctx)
		st.Close()
		j.Close()
		ns.Close()
	})
	if peers.Env("PXEPERF_BENCH_AA") == "1" {
		// Control run: both servers discard, to see the noise floor.
		return start(event.Discard{}), start(event.Discard{}), sink
	}
	return start(event.Discard{}), start(sink), sink
}

func benchFile(tb testing.TB, dir, name string, size int64) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), size-off)]); err != nil {
			tb.Fatal(err)
		}
	}
}

// fetchN has clients goroutines fetch url each times times.
func fetchN(c *http.Client, url string, size int64, clients, times int) error {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for range times {
				resp, err := c.Get(url)
				if err != nil {
					errs <- err
					return
				}
				n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, buf)
				resp.Body.Close()
				if err != nil || n != size {
					errs <- fmt.Errorf("GET %s: %d of %d bytes, %v", url, n, size, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestRecordingOverhead (PXEPERF_BENCH=1, -v) measures HTTP throughput with
// recording off and on in interleaved rounds (PXEPERF_BENCH_ROUNDS, default
// 5) on loopback: a PXEPERF_BENCH_MB (default 256) MiB image with 1 and 32
// clients, and 64 KiB files (32 clients x 64 fetches) where the per-fetch
// cost of recording weighs most. It logs medians and the on/off ratio.
//
//	PXEPERF_BENCH=1 go test ./record -run TestRecordingOverhead -v -timeout 30m
//
// PXEPERF_BENCH_AA=1 makes both servers discard (an A/A run): its ratios
// show how far apart two identical servers measure on this machine.
func TestRecordingOverhead(t *testing.T) {
	peers.Require(t, "benchmark: set PXEPERF_BENCH=1 (and -v) to run")
	rounds := peers.Rounds(5)
	mb := int64(peers.EnvInt("PXEPERF_BENCH_MB", 256))
	root := t.TempDir()
	big, small := mb<<20, int64(64<<10)
	benchFile(t, root, "big.img", big)
	benchFile(t, root, "small.img", small)
	off, on, sink := benchServers(t, root)
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Minute}

	type row struct {
		name          string
		file          string
		size          int64
		clients, each int
	}
	rows := []row{
		{fmt.Sprintf("%d MiB, 1 client x 4", mb), "big.img", big, 1, 4},
		{fmt.Sprintf("%d MiB, 32 clients", mb), "big.img", big, 32, 1},
		{"64 KiB, 32 clients x 64", "small.img", small, 32, 64},
	}
	res := map[string][]float64{}    // row name + "/off" or "/on" -> MB/s
	ratios := map[string][]float64{} // row name -> on/off of each round
	for round := range rounds {
		for _, r := range rows {
			order := []string{"off", "on"}
			if round%2 == 1 {
				order = []string{"on", "off"}
			}
			for _, mode := range order {
				url := off
				if mode == "on" {
					url = on
				}
				begin := time.Now()
				if err := fetchN(client, url+"/"+r.file, r.size, r.clients, r.each); err != nil {
					t.Fatal(err)
				}
				mbps := float64(r.size) * float64(r.clients*r.each) / time.Since(begin).Seconds() / 1e6
				res[r.name+"/"+mode] = append(res[r.name+"/"+mode], mbps)
			}
			on, off := res[r.name+"/on"], res[r.name+"/off"]
			ratios[r.name] = append(ratios[r.name], on[len(on)-1]/off[len(off)-1])
		}
	}
	med := measure.Median[float64]
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nrecording off vs on, loopback, %d interleaved rounds, MB/s (10^6 B/s) median;\n", rounds)
	fmt.Fprintf(&sb, "on/off: median of each round's ratio, and its range\n")
	fmt.Fprintf(&sb, "%-26s %10s %10s %8s %16s\n", "", "off", "on", "on/off", "min..max")
	for _, r := range rows {
		o, n := med(res[r.name+"/off"]), med(res[r.name+"/on"])
		rs := append([]float64(nil), ratios[r.name]...)
		sort.Float64s(rs)
		fmt.Fprintf(&sb, "%-26s %10.0f %10.0f %8.3f %7.3f..%.3f\n", r.name, o, n, med(rs), rs[0], rs[len(rs)-1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = sink.Close(ctx)
	st := sink.Stats()
	fmt.Fprintf(&sb, "records written %d, dropped %d, journal-only %d\n", st.Written, st.Dropped, st.JournalOnly)
	t.Log(sb.String())
	if peers.Env("PXEPERF_BENCH_AA") != "1" && (st.Dropped != 0 || st.JournalOnly != 0) {
		t.Errorf("recording lost or deferred entries: %+v", st)
	}
}
