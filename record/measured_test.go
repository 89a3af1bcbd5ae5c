package record

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/pgtest"
)

// oldMeasured are records as pxeperf wrote them before schema 7: the
// measured figures of iperf3, iperf2 and bench records as labels, beside
// the labels the user said; and a served fetch whose user label has a
// measured figure's name.
func oldMeasured() []Record {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return []Record{
		{Time: at, Source: "iperf3", Proto: "udp", Direction: "rx", ClientIP: "10.77.0.2", File: "iperf3 -u (rx)",
			Bytes: 22565632, Duration: 2 * time.Second, Outcome: "ok", Labels: map[string]string{
				"board": "b1", "streams": "1", "test": "jq4hm5vd", "client_version": "3.12",
				"jitter_ms": "0.023", "udp_lost": "1687", "udp_packets": "17271", "udp_lost_pct": "9.768",
				"server_secs": "2.000430", "duration_from": "client", "client_bytes": "22565632",
				"client_mbps": "90.26", "server_sent": "25008408"}},
		{Time: at.Add(time.Second), Source: "iperf3", Proto: "tcp", Direction: "rx", ClientIP: "10.77.0.2", File: "iperf3 -R (rx)",
			Bytes: 1000, Duration: time.Second, Outcome: "ok", Labels: map[string]string{
				"board": "b1", "server_written": "2000", "server_acked": "990", "client_retransmits": "x1"}},
		{Time: at.Add(2 * time.Second), Source: "bench", Proto: "tftp", Direction: "rx", ClientIP: "10.99.0.2", File: "bench.img",
			Bytes: 1 << 20, Duration: time.Second, Outcome: "ok", Labels: map[string]string{
				"rate": "100mbit", "blksize": "1468", "client_duplicates": "3", "client_out_of_order": "0",
				"client_early_acks": "1", "client_timeouts": "2", "cpu_ms": "250", "rcvbuf": "425984"}},
		{Time: at.Add(3 * time.Second), Source: "bench", Proto: "udp", Direction: "tx", ClientIP: "10.99.0.2", File: "stream/udp-tx",
			Bytes: 1 << 20, Duration: time.Second, Outcome: "ok", Labels: map[string]string{
				"udp_rate": "100mbit", "sender_mbps": "100.00", "udp_lost_pct": "4.002", "jitter_ms": "0.012",
				"iperf3_mbps": "95.50", "iperf3_dev_pct": "0.11", "iperf3_udp_lost_pct": "3.900", "iperf3_err": ""}},
		{Time: at.Add(4 * time.Second), Source: "serve", Proto: "http", Direction: "rx", ClientIP: "10.77.0.3", File: "vmlinuz",
			Bytes: 10, Size: 10, Duration: time.Millisecond, Outcome: "ok", Labels: map[string]string{"jitter_ms": "mine", "board": "b1"}},
	}
}

// wantMeasured is what oldMeasured reads as once migrated: figures in
// their fields, labels only what was said.
func wantMeasured() []Record {
	rs := oldMeasured()
	rs[0].Labels = map[string]string{"board": "b1", "streams": "1", "test": "jq4hm5vd", "client_version": "3.12"}
	rs[0].JitterMs, rs[0].UDPLost, rs[0].UDPPackets, rs[0].UDPLostPct = 0.023, 1687, 17271, 9.768
	rs[0].ServerDuration, rs[0].ClientClock = 2000430*time.Microsecond, true
	rs[0].ClientBytes, rs[0].ClientMbps, rs[0].ServerBytes = 22565632, 90.26, 25008408
	// A value that does not parse stays a label.
	rs[1].Labels = map[string]string{"board": "b1", "client_retransmits": "x1"}
	rs[1].ServerWritten, rs[1].ServerBytes = 2000, 990
	rs[2].Labels = map[string]string{"rate": "100mbit", "blksize": "1468"}
	rs[2].ClientDuplicates, rs[2].ClientEarlyACKs, rs[2].ClientTimeouts = 3, 1, 2
	rs[2].CPU, rs[2].Rcvbuf = 250*time.Millisecond, 425984
	rs[3].Labels = map[string]string{"udp_rate": "100mbit"}
	rs[3].SenderMbps, rs[3].UDPLostPct, rs[3].JitterMs = 100, 4.002, 0.012
	rs[3].Iperf3Mbps, rs[3].Iperf3DevPct, rs[3].Iperf3LostPct = 95.5, 0.11, 3.9
	return rs
}

// writeBefore writes recs into a store at schema 6 (the migrations before
// this one, the old columns), as pxeperf did before schema 7.
func writeBefore(t *testing.T, db *sql.DB, rebind func(string) string, translate func(string) string) {
	t.Helper()
	ctx := context.Background()
	stmts := []string{`CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_ns BIGINT NOT NULL)`}
	for i := range len(migrations) - 1 {
		stmts = append(stmts, translate(migrations[i].sql), fmt.Sprintf(`INSERT INTO schema_migrations VALUES (%d, 'v%d', 0)`, i+1, i+1))
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cols := strings.TrimSuffix(recordInsertColumns, ", "+measuredColumns)
	n := strings.Count(cols, ",") + 1
	for i, r := range oldMeasured() {
		labels, _ := json.Marshal(r.Labels)
		e := &entry{UID: fmt.Sprint("old-", i), Record: &r}
		args, err := recordArgs(e)
		if err != nil {
			t.Fatal(err)
		}
		args = args[:n]
		args[16] = string(labels) // recordArgs lifted them; an old pxeperf did not
		var id int64
		if err := db.QueryRowContext(ctx, rebind(`INSERT INTO records (`+cols+`) VALUES `+placeholders(1, n)+` RETURNING id`),
			args...).Scan(&id); err != nil {
			t.Fatal(err)
		}
		for k, v := range oldMeasured()[i].Labels {
			if _, err := db.ExecContext(ctx, rebind(`INSERT INTO labels(record_id, key, value) VALUES (?,?,?)`), id, k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMigrateMeasuredLabels: a store written before schema 7 (iperf3,
// iperf2 and bench records with jitter_ms, client_mbps, server_secs,
// cpu_ms, ... as labels) is migrated on both backends: the figures read
// back in their fields, the labels (read back, and --label filters) are
// only what the user said, and a served fetch's own label of such a name
// stays.
func TestMigrateMeasuredLabels(t *testing.T) {
	open := map[Backend]func(t *testing.T) *Store{
		SQLite: func(t *testing.T) *Store {
			dir := t.TempDir()
			db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			writeBefore(t, db, func(q string) string { return q }, func(q string) string { return q })
			if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations)-1)); err != nil {
				t.Fatal(err)
			}
			db.Close()
			return openTest(t, dir)
		},
		Postgres: func(t *testing.T) *Store {
			c := pgtest.Start(t)
			url := c.NewDB(t)
			db, err := sql.Open("pgx", url)
			if err != nil {
				t.Fatal(err)
			}
			writeBefore(t, db, (&pgBackend{}).rebind, pgSchema)
			db.Close()
			return openURLTest(t, url)
		},
	}
	for be, openV4 := range open {
		t.Run(string(be), func(t *testing.T) {
			s := openV4(t)
			ctx := context.Background()
			got, err := s.Query(ctx, Filter{})
			if err != nil {
				t.Fatal(err)
			}
			ignore := func(r Record) Record { r.ID, r.Kind = 0, ""; return r }
			var g []Record
			for _, r := range got {
				g = append(g, ignore(r))
			}
			if d := cmp.Diff(wantMeasured(), g); d != "" {
				t.Errorf("records after the migration (-want +got):\n%s", d)
			}
			for _, c := range []struct {
				labels map[string]string
				want   int
			}{
				{map[string]string{"board": "b1"}, 3},
				{map[string]string{"jitter_ms": "0.023"}, 0},
				{map[string]string{"cpu_ms": "250"}, 0},
				{map[string]string{"jitter_ms": "mine"}, 1},
			} {
				rs, err := s.Query(ctx, Filter{Labels: c.labels})
				if err != nil || len(rs) != c.want {
					t.Errorf("Query %v: %d records (%v), want %d", c.labels, len(rs), err, c.want)
				}
			}
		})
	}
}

// TestFromFetchMeasured: a perfsrv event's measured figures land in the
// record's fields, and its labels and host (the host entry's, stamped on
// the event: hosts.Table.Stamp) are the record's.
func TestFromFetchMeasured(t *testing.T) {
	f := &event.Fetch{Start: time.Unix(5, 0), Proto: event.ProtoUDP, Source: "iperf3", Direction: "rx", Bytes: 900,
		Duration: time.Second, Outcome: event.OutcomeOK, Host: "b1-host",
		Labels: map[string]string{"streams": "1", "board": "from-query", "rack": "3"},
		UDP:    &event.UDPInfo{JitterMs: 0.5, Lost: 25, Packets: 1000},
		Test: &event.TestInfo{ServerBytes: 1000, ServerDuration: 1001 * time.Millisecond, ClientClock: true,
			ClientReported: true, ClientBytes: 900, ClientMbps: 7.2}}
	r, _ := FromFetch(f, Conditions{})
	want := map[string]string{"streams": "1", "board": "from-query", "rack": "3"}
	if d := cmp.Diff(want, r.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if r.JitterMs != 0.5 || r.UDPLost != 25 || r.UDPPackets != 1000 || r.UDPLostPct != 2.5 || r.ServerBytes != 1000 ||
		r.ServerDuration != 1001*time.Millisecond || !r.ClientClock || r.ClientBytes != 900 || r.ClientMbps != 7.2 || r.Host != "b1-host" {
		t.Errorf("record %+v", r)
	}
}
