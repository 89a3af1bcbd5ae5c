package bench

import (
	"encoding/csv"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// TestTFTPRecordFromEvent (issue 28 row 3): `bench --proto tftp
// --windowsize 16` stores what the server's event said of the adaptive
// sender (effective window least/median/largest, loss events, its RTT),
// as record.FromFetch converts it for a served fetch; before, the driver
// copied the counts by hand and stored 0 for all of these.
func TestTFTPRecordFromEvent(t *testing.T) {
	nstest.RequireRoot(t)
	var events event.Recorder
	run := runSweep(t, Flags{Proto: "tftp", BlkSize: "1468", WindowSize: "16", Size: "4MiB"}, Options{RunID: "tftpev", Events: &events})
	if len(run.results) != 1 {
		t.Fatalf("%d results, want 1", len(run.results))
	}
	recs, err := run.store.Query(t.Context(), record.Filter{Source: Source, Labels: map[string]string{LabelRun: "tftpev"}})
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records (%v), want 1", len(recs), err)
	}
	fs, _ := events.Snapshot()
	if len(fs) != 1 || fs[0].TFTP == nil {
		t.Fatalf("server events %+v, want one TFTP fetch", fs)
	}
	ev, r := fs[0].TFTP, recs[0]
	t.Logf("server event: window %d/%d/%d, %d loss events, RTT %v; stored record: %d/%d/%d, %d, %v",
		ev.WindowMin, ev.WindowMedian, ev.WindowMax, ev.LossEvents, ev.RTT, r.EffWndMin, r.EffWndMedian, r.EffWndMax, r.LossEvents, r.RTT)
	if r.EffWndMax != 16 || ev.WindowMax != 16 {
		t.Errorf("effective window max: record %d, server event %d; want 16", r.EffWndMax, ev.WindowMax)
	}
	// Stored in microseconds, as every duration of a record.
	if r.RTT <= 0 || r.RTT != ev.RTT.Truncate(time.Microsecond) {
		t.Errorf("RTT: record %v, server event %v", r.RTT, ev.RTT)
	}
	if r.EffWndMin != ev.WindowMin || r.EffWndMedian != ev.WindowMedian || r.LossEvents != ev.LossEvents ||
		r.Datagrams != ev.Datagrams || r.Retransmits != ev.Retransmits || r.Timeouts != ev.Timeouts {
		t.Errorf("record %+v\nserver event %+v", r, *ev)
	}
	// The client's side stays the bench's own: its bytes and clock, its counts.
	if r.Bytes != 4<<20 || r.Outcome != "ok" || r.CPU <= 0 || r.Rcvbuf <= 0 || r.BlkSize != 1468 || r.WindowSize != 16 {
		t.Errorf("client side of the record: %+v", r)
	}
}

// TestRunTFTPSweep runs the short TFTP sweep on a real testbed:
// pxeperf's tftp server in the server namespace, the bench's TFTP client in
// the client namespace, blksize 1468 x windowsize 1,16 under a 100mbit tbf.
func TestRunTFTPSweep(t *testing.T) {
	nstest.RequireRoot(t)
	run := runSweep(t, Flags{Proto: "tftp", BlkSize: "1468", WindowSize: "1,16", Rate: "100mbit", Size: "4MiB"}, Options{RunID: "tftp1"})
	results, progress, verbose := run.results, run.progress, run.verbose
	if len(results) != 2 || len(progress) != 3 || progress[2].Done != 2 {
		t.Fatalf("%d results, progress %+v; want 2 and done 0..2", len(results), progress)
	}
	if !strings.Contains(verbose, "datagrams") {
		t.Errorf("no per-fetch lines with Verbose:\n%s", verbose)
	}

	recs := run.stored(t, 2)
	const blocks = 4<<20/1468 + 1 // 2858 blocks of 1468 bytes (the last short)
	for _, r := range recs {
		win := r.Labels[LabelWindowSize]
		if r.Outcome != "ok" || r.Proto != "tftp" || r.Direction != "rx" || r.Bytes != 4<<20 || r.Size != 4<<20 {
			t.Errorf("record %+v", r)
		}
		if r.BlkSize != 1468 || strconv.Itoa(r.WindowSize) != win || r.Labels[LabelBlkSize] != "1468" || !r.TSize {
			t.Errorf("blksize %d windowsize %d (label %s), tsize %v", r.BlkSize, r.WindowSize, win, r.TSize)
		}
		// The server sent every block at least once; what it sent again it
		// counted, and the client's duplicates cannot exceed that.
		dup := r.ClientDuplicates
		if r.Datagrams != blocks+r.Retransmits || r.Acked != blocks || dup > r.Retransmits {
			t.Errorf("window %s: datagrams %d, retransmits %d, acked %d, client duplicates %d; want %d blocks", win, r.Datagrams, r.Retransmits, r.Acked, dup, blocks)
		}
		if r.MTU != 1500 || r.RateLimit != 100e6 || r.Labels["rate"] != "100mbit" || r.CPU <= 0 || r.Rcvbuf <= 0 {
			t.Errorf("testbed fields: mtu %d rate %d labels %v", r.MTU, r.RateLimit, r.Labels)
		}
		// Under a 100mbit tbf the fetch cannot beat the line rate by more
		// than the bucket's burst (64 KiB of a 4 MiB fetch), nor, with the
		// veth's tens of microseconds RTT, fall far below it.
		if r.Mbps <= 0 || r.Mbps > 100 {
			t.Errorf("window %s: %.1f Mbit/s under a 100mbit tbf", win, r.Mbps)
		}
	}

	var csvOut strings.Builder
	if err := report.Render(&csvOut, report.TFTP(recs), report.CSV); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(csvOut.String())).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("tftp table: one row of one setup wanted (%v):\n%s", err, csvOut.String())
	}
	cell := map[string]string{}
	for i, k := range rows[0] {
		cell[k] = rows[1][i]
	}
	if cell["blksize"] != "1468" || cell["windowsize_1_mbps"] == "" || cell["windowsize_16_mbps"] == "" ||
		cell["windowsize_1_count"] != "1" || cell["link_note"] != "tbf" {
		t.Errorf("tftp table:\n%s", csvOut.String())
	}
	sum := TFTPSummary(results)
	if len(sum.Rows) != 2 || sum.Rows[0][5] != "1" || sum.Rows[1][5] != "16" || sum.Rows[0][16] != "0" {
		t.Errorf("summary rows %v", sum.Rows)
	}
}

// TestRunTFTPCancel: a sweep stopped mid-way keeps what it measured and
// leaves no namespace behind.
func TestRunTFTPCancel(t *testing.T) {
	nstest.RequireRoot(t)
	// The first 64 MiB at 10mbit takes about 55 s.
	results, err := runInterrupted(t, Flags{Proto: "tftp", BlkSize: "512", WindowSize: "1", Rate: "10mbit", Size: "64MiB", Repeat: 3}, 2*time.Second)
	if !strings.Contains(err.Error(), "canceled") {
		t.Errorf("Run: %v, want a cancel error", err)
	}
	if len(results) != 0 {
		t.Errorf("%d results from a sweep cancelled in its first fetch", len(results))
	}
}
