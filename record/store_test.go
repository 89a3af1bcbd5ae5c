package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fullRecord sets every field (durations at microsecond precision, as
// stored).
func fullRecord() Record {
	return Record{
		Time: time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC), Source: "serve", Proto: "http",
		Direction: "rx", ClientMAC: "52:54:00:12:34:56", ClientIP: "10.0.0.7", Host: "board1", Arch: "efi-x64",
		File: "images/vmlinuz", Kind: "config", Bytes: 123456789, Size: 123456789, Duration: 1234567 * time.Microsecond,
		Mbps: 800.25, Outcome: "ok", Err: "none really",
		Labels: map[string]string{"rxcsum": "off", "fw": "ipxe-1.21"},
		WndMax: 65535, WndMedian: 32768, WndRequested: 16384, RTT: 250 * time.Microsecond,
		MinRTT: 90 * time.Microsecond, Retransmits: 7, DeliveryRate: 125000000,
		RwndLimited: 3 * time.Millisecond, SndbufLimited: 4 * time.Millisecond, MSS: 1448, PMTU: 1500,
		BlkSize: 1468, WindowSize: 8, TSize: true, Datagrams: 1000, Acked: 990, Timeouts: 3,
		Iface: "eth0", MTU: 9000, LinkMbps: 1000, LinkDriver: "igb", RateLimit: 100e6,
		RxCsum: OffloadOff, TxCsum: OffloadOn, TSO: OffloadOn, GSO: OffloadUnknown, GRO: OffloadOff,
		Kernel:     "6.1.0-test",
		DelayAsked: 120 * time.Microsecond, DelayP50: 123 * time.Microsecond, DelayP99: 410 * time.Microsecond,
		DelayMax: 2 * time.Millisecond, DelayFrames: 5000, DelayLate: 75, DelayBehind: true,
		JitterMs: 0.0125, UDPLost: 12, UDPPackets: 1000, UDPLostPct: 1.2,
		ServerBytes: 123400000, ServerWritten: 123500000, ServerDuration: 3000123 * time.Microsecond, ClientClock: true,
		ClientBytes: 123456789, ClientMbps: 799.5, ClientRetransmits: 5,
		SenderMbps: 801.5, Rcvbuf: 425984, CPU: 1500 * time.Millisecond,
		ClientDuplicates: 1, ClientOutOfOrder: 2, ClientEarlyACKs: 3, ClientTimeouts: 4,
		Iperf3Mbps: 805.25, Iperf3DevPct: 0.6, Iperf3LostPct: 1.25, Iperf3Err: "none either",
	}
}

func openTest(t testing.TB, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	want := fullRecord()
	ivs := []Interval{
		{Start: 0, End: time.Second, Bytes: 100e6, Retransmits: 2, Cwnd: 1 << 20, SndWnd: 65535, RTT: 200 * time.Microsecond},
		{Start: time.Second, End: 1234567 * time.Microsecond, Bytes: 23456789, Retransmits: 0, Cwnd: 1 << 19, SndWnd: 32768, RTT: 300 * time.Microsecond},
	}
	in := want
	id, err := s.Add(ctx, &in, ivs)
	if err != nil {
		t.Fatal(err)
	}
	if id <= 0 || in.ID != id {
		t.Fatalf("Add returned id %d, record ID %d", id, in.ID)
	}
	want.ID = id
	got, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	all, err := s.Query(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Record{want}, all); d != "" {
		t.Errorf("Query (-want +got):\n%s", d)
	}
	gotIvs, err := s.Intervals(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ivs {
		ivs[i].RecordID = id
	}
	if d := cmp.Diff(ivs, gotIvs); d != "" {
		t.Errorf("Intervals (-want +got):\n%s", d)
	}
	if _, err := s.Get(ctx, id+100); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}

	// A record with nothing optional set comes back the same (nil labels).
	bare := Record{Time: time.Unix(1, 0).UTC(), Source: "serve", Proto: "tftp", Direction: "rx", ClientIP: "10.0.0.8", File: "x", Outcome: "ok"}
	bid, err := s.Add(ctx, &bare, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotBare, _ := s.Get(ctx, bid)
	if d := cmp.Diff(bare, gotBare); d != "" {
		t.Errorf("bare record (-want +got):\n%s", d)
	}

	// Leases.
	l := Lease{Time: time.Unix(5, 0).UTC(), MAC: "52:54:00:12:34:56", Addr: "10.0.0.7", Arch: 7, Host: "board1",
		BootFile: "ipxe.efi", Expiry: time.Unix(3605, 0).UTC()}
	if err := s.AddLease(ctx, &l); err != nil {
		t.Fatal(err)
	}
	ls, err := s.Leases(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Lease{l}, ls); d != "" {
		t.Errorf("Leases (-want +got):\n%s", d)
	}
}

func TestQueryFilters(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(i int, mac, ip, host, file, proto, source string, labels map[string]string) Record {
		return Record{Time: t0.Add(time.Duration(i) * time.Minute), Source: source, Proto: proto, Direction: "rx",
			ClientMAC: mac, ClientIP: ip, Host: host, File: file, Outcome: "ok", Labels: labels}
	}
	recs := []Record{
		mk(0, "52:54:00:00:00:01", "10.0.0.1", "a", "vmlinuz", "http", "serve", map[string]string{"rx": "off", "fw": "1"}),
		mk(1, "52:54:00:00:00:02", "10.0.0.2", "b", "initrd.img", "http", "serve", map[string]string{"rx": "on", "fw": "1"}),
		mk(2, "52:54:00:00:00:01", "10.0.0.1", "a", "boot/ipxe.efi", "tftp", "serve", nil),
		mk(3, "", "10.0.0.3", "", "bench", "tcp", "bench", map[string]string{"rx": "off", "fw": "2"}),
		mk(4, "52:54:00:00:00:02", "10.0.0.2", "b", "a[1].img", "http", "serve", nil),
	}
	for i := range recs {
		if _, err := s.Add(ctx, &recs[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(idx ...int) []int64 {
		var out []int64
		for _, i := range idx {
			out = append(out, recs[i].ID)
		}
		return out
	}
	tests := map[string]struct {
		f    Filter
		want []int64
	}{
		"all oldest first":       {Filter{}, ids(0, 1, 2, 3, 4)},
		"client mac upper case":  {Filter{Client: "52:54:00:00:00:01"}, ids(0, 2)},
		"client mac other form":  {Filter{Client: "52-54-00-00-00-02"}, ids(1, 4)},
		"client ip":              {Filter{Client: "10.0.0.3"}, ids(3)},
		"client host":            {Filter{Client: "b"}, ids(1, 4)},
		"file exact":             {Filter{File: "vmlinuz"}, ids(0)},
		"file glob star":         {Filter{File: "*.img"}, ids(1, 4)},
		"file glob question":     {Filter{File: "boot/ipxe.ef?"}, ids(2)},
		"file bracket is plain":  {Filter{File: "a[1].*"}, ids(4)},
		"file exact no match":    {Filter{File: "vmlinu"}, nil},
		"since":                  {Filter{Since: t0.Add(2 * time.Minute)}, ids(2, 3, 4)},
		"one label":              {Filter{Labels: map[string]string{"rx": "off"}}, ids(0, 3)},
		"two labels":             {Filter{Labels: map[string]string{"rx": "off", "fw": "1"}}, ids(0)},
		"label missing":          {Filter{Labels: map[string]string{"nope": "x"}}, nil},
		"source":                 {Filter{Source: "bench"}, ids(3)},
		"proto":                  {Filter{Proto: "http"}, ids(0, 1, 4)},
		"limit newest first":     {Filter{Limit: 2}, ids(4, 3)},
		"combined with limit":    {Filter{Proto: "http", Client: "b", Limit: 1}, ids(4)},
		"client unknown mac":     {Filter{Client: "52:54:00:00:00:0A"}, nil},
		"client mac case folded": {Filter{Client: strings.ToUpper("52:54:00:00:00:01")}, ids(0, 2)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.Query(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var gotIDs []int64
			for _, r := range got {
				gotIDs = append(gotIDs, r.ID)
			}
			if d := cmp.Diff(tt.want, gotIDs, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("ids (-want +got):\n%s", d)
			}
		})
	}
}

func TestSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM schema_migrations WHERE version = ?`, SchemaVersion).Scan(&n); err != nil || n != 1 {
		t.Fatalf("schema_migrations has %d rows for version %d (err %v)", n, SchemaVersion, err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for name, open := range map[string]func(string, ...Option) (*Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		_, err := open(dir)
		if !errors.Is(err, ErrNewerSchema) {
			t.Errorf("%s on a newer schema: %v, want ErrNewerSchema", name, err)
			continue
		}
		if !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
			t.Errorf("%s error does not name the file: %v", name, err)
		}
	}
	// Reopening at the current version is a no-op.
	dir2 := t.TempDir()
	for range 2 {
		s, err := Open(dir2)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte(strings.Repeat("this is not sqlite ", 400)), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string, ...Option) (*Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		_, err := open(dir)
		if err == nil {
			t.Fatalf("%s on a corrupt file succeeded", name)
		}
		for _, want := range []string{path, "mv " + path, "corrupt"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s error %q lacks %q", name, err, want)
			}
		}
	}
}

func TestLockedFile(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, WithBusyTimeout(50*time.Millisecond))
	// Another connection (as another process would) holds the write lock.
	other, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	r := fullRecord()
	_, err = s.Add(context.Background(), &r, nil)
	if err == nil {
		t.Fatal("Add succeeded while another connection held the write lock")
	}
	for _, want := range []string{filepath.Join(dir, FileName), "locked", "another --data"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(context.Background(), &r, nil); err != nil {
		t.Fatalf("Add after the lock was released: %v", err)
	}
}

// TestDiskFull fills a tiny tmpfs (root only) and checks the error names
// the file and the fix.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "pxeperf-test", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var lastErr error
	for i := range 10000 {
		r := fullRecord()
		r.Err = strings.Repeat("x", 4000) + fmt.Sprint(i)
		if _, lastErr = s.Add(ctx, &r, nil); lastErr != nil {
			break
		}
	}
	if lastErr == nil {
		t.Fatal("256 KiB filesystem never filled up")
	}
	for _, want := range []string{filepath.Join(dir, FileName), "disk full", "free space"} {
		if !strings.Contains(lastErr.Error(), want) {
			t.Errorf("error %q lacks %q", lastErr, want)
		}
	}
}

// TestReadWhileWriting reads through OpenReadOnly while another Store
// writes, as report does while serve runs.
func TestReadWhileWriting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := openTest(t, dir)
	const n = 200
	var wg sync.WaitGroup
	wg.Add(1)
	werr := make(chan error, 1)
	go func() {
		defer wg.Done()
		for i := range n {
			r := fullRecord()
			r.File = fmt.Sprintf("f%d", i)
			if _, err := w.Add(ctx, &r, []Interval{{End: time.Second, Bytes: int64(i)}}); err != nil {
				werr <- err
				return
			}
		}
	}()
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	last := 0
	for i := 0; i < 10000 && last < n; i++ {
		got, err := ro.Query(ctx, Filter{})
		if err != nil {
			t.Fatalf("read while writing: %v", err)
		}
		if len(got) < last {
			t.Fatalf("reader saw %d records after %d", len(got), last)
		}
		last = len(got)
		if last > 0 {
			if _, err := ro.Intervals(ctx, got[last-1].ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	select {
	case err := <-werr:
		t.Fatal(err)
	default:
	}
	got, err := ro.Query(ctx, Filter{})
	if err != nil || len(got) != n {
		t.Fatalf("after writing: %d records, err %v; want %d", len(got), err, n)
	}
	r := fullRecord()
	if _, err := ro.Add(ctx, &r, nil); err == nil {
		t.Error("Add on a read-only store succeeded")
	}
	// After the writer closes (WAL checkpointed and removed), a reader
	// still opens the file.
	w.Close()
	ro2, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("OpenReadOnly after the writer closed: %v", err)
	}
	defer ro2.Close()
	if got, err := ro2.Query(ctx, Filter{Limit: 1}); err != nil || len(got) != 1 {
		t.Fatalf("query after close: %d, %v", len(got), err)
	}
	if _, err := OpenReadOnly(t.TempDir()); err == nil || !strings.Contains(err.Error(), "--data") {
		t.Errorf("OpenReadOnly of an empty folder: %v, want an error naming --data", err)
	}
}

// TestMigrateV1 opens a store written at schema 1 (before records.kind):
// its records stay, read back with an empty kind, and new ones keep theirs.
func TestMigrateV1(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0].sql,
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ns INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, 'v1', 0)`,
		`INSERT INTO records (uid, time_ns, source, proto, direction, client_mac, client_ip, host, arch, file, bytes, size,
		duration_us, mbps, outcome, err, labels, wnd_max, wnd_median, wnd_requested, rtt_us, min_rtt_us,
		retransmits, delivery_rate, rwnd_limited_us, sndbuf_limited_us, mss, pmtu, blksize, windowsize,
		tsize, datagrams, acked, timeouts, iface, mtu, link_mbps, rate_limit_bps, rx_csum, tx_csum, tso,
		gso, gro, kernel) VALUES ('old', 1, 'serve', 'tftp', 'rx', '', '10.0.0.9', '', '', 'vmlinuz', 10, 10,
		1, 0.08, 'ok', '', '{}', 0,0,0,0,0,0,0,0,0,0,0,512,1,0,1,1,0,'',0,0,0,'','','','','','')`,
		`PRAGMA user_version = 1`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Add(context.Background(), &Record{Time: time.Unix(2, 0), Source: "serve", Proto: "tftp",
		Direction: "rx", File: "pxelinux.cfg/default", Kind: "config", Outcome: "ok"}, nil); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Query(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.File+":"+r.Kind)
	}
	if d := cmp.Diff([]string{"vmlinuz:image", "pxelinux.cfg/default:config"}, got); d != "" {
		t.Errorf("records after migration (-want +got):\n%s", d)
	}
}

// Intervals go in as multi-row INSERTs of 16, 8, 4, 2 and 1 rows: every
// count (none, fewer than one chunk, several chunks) comes back whole and
// in order, several records to a batch, and a batch replayed (the journal
// imported again after kill -9) adds nothing.
func TestIntervalChunks(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	counts := []int{0, 1, 2, 3, 7, 9, 15, 16, 17, 31, 33, 100}
	var batch []*entry
	for _, n := range counts {
		r := fullRecord()
		r.File = fmt.Sprintf("n%d", n)
		ivs := make([]Interval, n)
		for i := range ivs {
			ivs[i] = Interval{Start: time.Duration(i) * time.Second, End: time.Duration(i+1) * time.Second,
				Bytes: int64(1000*n + i), Retransmits: uint32(i), Cwnd: uint32(n), SndWnd: 7, RTT: time.Duration(i) * time.Millisecond}
		}
		batch = append(batch, &entry{UID: newUID(), Record: &r, Intervals: ivs})
	}
	for round := range 2 {
		if err := s.addBatch(ctx, batch); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if n := countRows(t, s, "records"); n != len(counts) {
		t.Errorf("%d records after the batch went in twice, want %d", n, len(counts))
	}
	for i, n := range counts {
		e := batch[i]
		got, err := s.Intervals(ctx, e.Record.ID)
		if err != nil {
			t.Fatal(err)
		}
		for k := range e.Intervals {
			e.Intervals[k].RecordID = e.Record.ID
		}
		want := e.Intervals
		if n == 0 {
			want = nil
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%d intervals (-want +got):\n%s", n, d)
		}
	}
}
