package record

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

func testFetch(i int) *event.Fetch {
	return &event.Fetch{
		Start: time.Unix(1700000000, int64(i)*1000).UTC(), Proto: event.ProtoHTTP,
		Client: netip.MustParseAddrPort("10.0.0.9:40000"), File: fmt.Sprintf("f%d", i),
		Bytes: 1000, Size: 1000, Duration: time.Millisecond, Outcome: event.OutcomeOK,
	}
}

// lockStore makes another connection hold the store's write lock, as
// another process would, until the returned func runs.
func lockStore(t *testing.T, dir string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// closeSink closes s once it has written what it holds; a failure ends
// the test.
func closeSink(t *testing.T, s *Sink) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// journalOnly runs write against a sink with no store, so that what it is
// given goes to j only (as while the store is away), closes that sink and
// returns it for its Stats.
func journalOnly(t *testing.T, j *Journal, write func(*Sink)) *Sink {
	t.Helper()
	s := NewSink(nil, quiet, SinkOptions{Journal: j, Kernel: "k"})
	write(s)
	closeSink(t, s)
	return s
}

func countRecords(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM records").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func openJournal(t *testing.T, dir string) *Journal {
	t.Helper()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// TestSinkNeverBlocks: while the store is locked by another process, every
// Fetch call returns; entries past the memory bound wait in the journal and
// are read back once the store takes writes again, each stored once.
func TestSinkNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	store := openTest(t, dir, WithBusyTimeout(20*time.Millisecond))
	j := openJournal(t, dir)
	release := lockStore(t, dir)
	sink := NewSink(store, quiet, SinkOptions{Journal: j, MaxPending: 1000, Retry: 5 * time.Millisecond})

	const workers, each = 4, 1250
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				sink.Fetch(testFetch(w*each + i))
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	// Every call came back while the store had accepted nothing.
	st := sink.Stats()
	if done.Load() != workers*each || st.Written != 0 {
		t.Fatalf("%d Fetch calls returned, store wrote %d; want %d and 0", done.Load(), st.Written, workers*each)
	}
	if st.Pending != 1000 || st.JournalOnly != workers*each-1000 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 1000 pending, %d journal-only, 0 dropped", st, workers*each-1000)
	}
	// Once the store takes writes again, the sink reads back what went to
	// the journal only: every fetch is stored without a restart, once.
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if !testenv.WaitFor(30*time.Second, func() bool { return countRecords(t, store) == workers*each }) {
		t.Fatalf("store has %d records, want %d; stats %+v", countRecords(t, store), workers*each, sink.Stats())
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := sink.Stats(); st.Recovered != workers*each || st.Pending != 0 {
		t.Fatalf("after close: %+v, want %d recovered from the journal", st, workers*each)
	}
	if fi, err := os.Stat(j.Path()); err != nil || fi.Size() != 0 {
		t.Errorf("journal not emptied after everything was stored: %v %v", fi.Size(), err)
	}
	j.Close()

	// A restart imports nothing twice.
	j2 := openJournal(t, dir)
	sink2 := NewSink(store, quiet, SinkOptions{Journal: j2})
	if err := sink2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, store); n != workers*each {
		t.Fatalf("after restart: %d records, want %d", n, workers*each)
	}
	files, err := store.Query(ctx, Filter{File: "f4999"})
	if err != nil || len(files) != 1 {
		t.Errorf("last fetch: %d records, %v", len(files), err)
	}
}

// TestSinkNoJournalDrops: without a journal, entries past the bound are
// dropped and counted (the last resort), never blocking.
func TestSinkNoJournalDrops(t *testing.T) {
	dir := t.TempDir()
	store := openTest(t, dir, WithBusyTimeout(10*time.Millisecond))
	release := lockStore(t, dir)
	sink := NewSink(store, quiet, SinkOptions{MaxPending: 10, Retry: 5 * time.Millisecond})
	for i := range 100 {
		sink.Fetch(testFetch(i))
	}
	if st := sink.Stats(); st.Dropped != 90 || st.Pending != 10 || st.Written != 0 {
		t.Fatalf("stats %+v, want 90 dropped, 10 pending", st)
	}
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, store); n != 10 {
		t.Fatalf("store has %d, want 10", n)
	}
}

// TestSinkJournalOnly: with no store (it could not be opened), fetches go
// to the journal; a torn last line is skipped; the next start with a store
// imports the rest, with every field.
func TestSinkJournalOnly(t *testing.T) {
	dir := t.TempDir()
	j := openJournal(t, dir)
	var want []Record
	sink := journalOnly(t, j, func(s *Sink) {
		for i := range 3 {
			f := testFetch(i)
			f.Labels = map[string]string{"i": fmt.Sprint(i)}
			f.Intervals = []event.Interval{{End: time.Second, Bytes: 1000}}
			s.Fetch(f)
			r, _ := s.convert(f)
			want = append(want, *r)
		}
		s.Lease(&event.Lease{Time: time.Unix(9, 0), MAC: net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}, Arch: 7})
	})
	if st := sink.Stats(); st.JournalOnly != 4 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 4 journal-only", st)
	}
	// A crash mid-write leaves a torn line.
	if _, err := j.f.WriteString(`{"uid":"torn","record":{"file":"x"`); err != nil {
		t.Fatal(err)
	}
	j.Close()

	// A second server on the same data folder is refused.
	j2 := openJournal(t, dir)
	if _, err := OpenJournal(dir); err == nil {
		t.Fatal("a second OpenJournal on the same folder succeeded")
	}
	store := openTest(t, dir)
	sink2 := NewSink(store, quiet, SinkOptions{Journal: j2})
	closeSink(t, sink2)
	got, err := store.Query(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(Record{}, "ID")); d != "" {
		t.Errorf("imported records (-want +got):\n%s", d)
	}
	if ivs, _ := store.Intervals(context.Background(), got[0].ID); len(ivs) != 1 || ivs[0].Bytes != 1000 {
		t.Errorf("intervals of the first record: %+v", ivs)
	}
	if ls, _ := store.Leases(context.Background(), time.Time{}); len(ls) != 1 || ls[0].Arch != 7 {
		t.Errorf("leases: %+v", ls)
	}
}

func TestSinkConvert(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	tbl := hosts.New([]configs.Host{{MAC: configs.MAC{HardwareAddr: mac}, Name: "from-config", Labels: map[string]string{"board": "b1"}}})
	tbl.Observe(hosts.Client{MAC: mac, Addr: netip.MustParseAddr("10.0.0.7"), Arch: 7})
	x64, _ := configs.ArchByCode(7)
	start := time.Date(2026, 11, 30, 1, 0, 0, 0, time.FixedZone("x", 3600))
	tests := map[string]struct {
		f    event.Fetch
		want Record
		ivs  []Interval
	}{
		"http with tcp info, mac from the lease table": {
			f: event.Fetch{
				Start: start, Proto: event.ProtoHTTP, Client: netip.MustParseAddrPort("10.0.0.7:5000"),
				Host: "board", File: "vmlinuz", Bytes: 125000000, Size: 125000000, Duration: time.Second,
				Outcome: event.OutcomeOK, Labels: map[string]string{"rx": "off"},
				TCP: &event.TCPInfo{RTT: time.Millisecond, MinRTT: 100 * time.Microsecond, Retransmits: 3,
					MaxSndWnd: 65535, MedSndWnd: 32768, MSS: 1448, PMTU: 1500, DeliveryRate: 9,
					RWndLimited: 2 * time.Millisecond, SndBufLimited: 3 * time.Millisecond},
				Intervals: []event.Interval{{Start: 0, End: time.Second, Bytes: 125000000, Retransmits: 3, Cwnd: 10, SndWnd: 65535, RTT: time.Millisecond}},
			},
			want: Record{Time: start.UTC(), Source: "serve", Proto: "http", Direction: "rx",
				ClientMAC: mac.String(), ClientIP: "10.0.0.7", Host: "board", Arch: x64.Name, File: "vmlinuz", Kind: KindImage,
				Bytes: 125000000, Size: 125000000, Duration: time.Second, Mbps: 1000, Outcome: "ok",
				Labels: map[string]string{"rx": "off", "board": "b1"}, WndMax: 65535, WndMedian: 32768, RTT: time.Millisecond,
				MinRTT: 100 * time.Microsecond, Retransmits: 3, DeliveryRate: 9, RwndLimited: 2 * time.Millisecond,
				SndbufLimited: 3 * time.Millisecond, MSS: 1448, PMTU: 1500, MTU: 1500, Iface: "eth9", Kernel: "k"},
			ivs: []Interval{{Start: 0, End: time.Second, Bytes: 125000000, Retransmits: 3, Cwnd: 10, SndWnd: 65535, RTT: time.Millisecond}},
		},
		"tftp ok, own interface, mapped client address": {
			f: event.Fetch{
				Start: start, Proto: event.ProtoTFTP, Client: netip.MustParseAddrPort("[::ffff:10.0.0.8]:69"),
				MAC: mac, File: "ipxe.efi", Bytes: 1000, Size: 1000, Duration: time.Millisecond,
				Outcome: event.OutcomeOK, Interface: "veth1",
				TFTP: &event.TFTPInfo{BlockSize: 1468, WindowSize: 4, TSize: true, Datagrams: 12, Retransmits: 2, Timeouts: 1},
			},
			want: Record{Time: start.UTC(), Source: "serve", Proto: "tftp", Direction: "rx",
				ClientMAC: mac.String(), ClientIP: "10.0.0.8", Host: "from-config", Arch: x64.Name, File: "ipxe.efi", Kind: KindBoot, Bytes: 1000,
				Labels: map[string]string{"board": "b1"},
				Size:   1000, Duration: time.Millisecond, Mbps: 8, Outcome: "ok", BlkSize: 1468, WindowSize: 4,
				TSize: true, Datagrams: 12, Acked: 10, Retransmits: 2, Timeouts: 1, Iface: "veth1", Kernel: "k"},
		},
		// Issue 28 row 2: an iperf test knows only the board's address (DHCP
		// saw it there); its record has the host entry's name and labels, and
		// its measured figures in fields, not labels.
		"iperf3 udp by address: the host entry's labels": {
			f: event.Fetch{
				Start: start, Proto: event.ProtoUDP, Source: "iperf3", Direction: "rx", Client: netip.MustParseAddrPort("10.0.0.7:40000"),
				File: "iperf3 -u -R (rx)", Bytes: 900, Size: -1, Duration: time.Second, Outcome: event.OutcomeOK,
				Labels: map[string]string{"streams": "1"},
				UDP:    &event.UDPInfo{JitterMs: 0.023, Lost: 1, Packets: 100},
				Test:   &event.TestInfo{ServerBytes: 1000, ServerDuration: time.Second, ClientClock: true, ClientReported: true, ClientBytes: 900, ClientMbps: 0.0072},
			},
			want: Record{Time: start.UTC(), Source: "iperf3", Proto: "udp", Direction: "rx", ClientMAC: mac.String(), ClientIP: "10.0.0.7",
				Host: "from-config", Arch: x64.Name, File: "iperf3 -u -R (rx)", Kind: KindStream, Bytes: 900, Size: -1, Duration: time.Second,
				Mbps: 0.0072, Outcome: "ok", Labels: map[string]string{"streams": "1", "board": "b1"}, Iface: "eth9", Kernel: "k",
				JitterMs: 0.023, UDPLost: 1, UDPPackets: 100, UDPLostPct: 1, ServerBytes: 1000, ServerDuration: time.Second,
				ClientClock: true, ClientBytes: 900, ClientMbps: 0.0072},
		},
		"over loopback: the interface of the local address, not the configured one": {
			f: event.Fetch{
				Start: start, Proto: event.ProtoHTTP, Client: netip.MustParseAddrPort("127.0.0.1:5000"),
				File: "big.img", Outcome: event.OutcomeOK, Interface: "eth9", Local: netip.MustParseAddr("127.0.0.1"),
			},
			want: Record{Time: start.UTC(), Source: "serve", Proto: "http", Direction: "rx", ClientIP: "127.0.0.1",
				File: "big.img", Kind: KindImage, Outcome: "ok", Iface: loopbackName(t), Kernel: "k"},
		},
		"tftp aborted: acks unknown, unknown client": {
			f: event.Fetch{
				Start: start, Proto: event.ProtoTFTP, Client: netip.MustParseAddrPort("10.9.9.9:69"),
				File: "x", Size: -1, Outcome: event.OutcomeAborted, Err: "gone",
				TFTP: &event.TFTPInfo{BlockSize: 512, WindowSize: 1, Datagrams: 5},
			},
			want: Record{Time: start.UTC(), Source: "serve", Proto: "tftp", Direction: "rx", ClientIP: "10.9.9.9",
				File: "x", Kind: KindError, Size: -1, Outcome: "aborted", Err: "gone", BlkSize: 512, WindowSize: 1, Datagrams: 5,
				Iface: "eth9", Kernel: "k"},
		},
	}
	s := NewSink(nil, quiet, SinkOptions{Interface: "eth9", Kernel: "k", Hosts: tbl})
	defer s.Close(context.Background())
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tbl.Stamp(&tt.f) // what serve does before any sink (hosts.Stamping)
			got, ivs := s.convert(&tt.f)
			if d := cmp.Diff(tt.want, *got); d != "" {
				t.Errorf("record (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.ivs, ivs); d != "" {
				t.Errorf("intervals (-want +got):\n%s", d)
			}
		})
	}
}

// loopbackName is this host's loopback interface ("lo" on Linux).
func loopbackName(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			return ifc.Name
		}
	}
	t.Skip("no loopback interface")
	return ""
}

// The journal is emptied once it holds journalKeep bytes of stored entries
// and when the sink closes, not after every batch; reading back deferred
// entries starts past the stored ones, so none is read back twice.
func TestJournalKeptSmall(t *testing.T) {
	dir := t.TempDir()
	store := openTest(t, dir, WithBusyTimeout(20*time.Millisecond))
	j := openJournal(t, dir)
	sink := NewSink(store, quiet, SinkOptions{Journal: j, MaxPending: 5, Retry: 5 * time.Millisecond, Linger: time.Millisecond})
	size := func() int64 {
		fi, err := os.Stat(j.Path())
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for i := range 5 {
		sink.Fetch(testFetch(i))
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return sink.Stats().Written == 5 }) {
		t.Fatalf("stats %+v, want 5 written", sink.Stats())
	}
	if size() == 0 {
		t.Fatal("journal emptied after a small batch; it is kept until journalKeep")
	}
	release := lockStore(t, dir)
	for i := range 20 {
		sink.Fetch(testFetch(100 + i))
	}
	release()
	if !testenv.WaitFor(30*time.Second, func() bool { return countRecords(t, store) == 25 }) {
		t.Fatalf("%d records, want 25; stats %+v", countRecords(t, store), sink.Stats())
	}
	// 20 went in while the store was locked: 5 queued, 15 journal only.
	// Reading back starts past the 5 stored first: 20 read, not 25.
	if st := sink.Stats(); st.JournalOnly != 15 || st.Recovered != 20 {
		t.Errorf("stats %+v: want 15 journal-only and 20 read back", st)
	}

	closeSink(t, sink)
	if n := size(); n != 0 {
		t.Errorf("journal holds %d bytes after close with everything stored", n)
	}

	// A steady flow: the journal stays near journalKeep.
	sink = NewSink(store, quiet, SinkOptions{Journal: j, Linger: time.Millisecond})
	big := strings.Repeat("v", 4<<10)
	var most int64
	for w := range 60 { // 60 × 20 × 4 KiB: about 5 MiB through the journal
		for i := range 20 {
			f := testFetch(1000 + 20*w + i)
			f.Labels = map[string]string{"big": big}
			sink.Fetch(f)
		}
		want := int64(20 + 20*w)
		if !testenv.WaitFor(30*time.Second, func() bool { return sink.Stats().Written >= want }) {
			t.Fatalf("stats %+v, want %d written", sink.Stats(), want)
		}
		most = max(most, size())
	}
	if most > journalKeep+200<<10 {
		t.Errorf("journal grew to %d bytes, want it emptied past %d", most, journalKeep)
	}
	closeSink(t, sink)
	if n := size(); n != 0 {
		t.Errorf("journal holds %d bytes after close with everything stored", n)
	}
	if n := countRecords(t, store); n != 25+60*20 {
		t.Errorf("%d records, want %d", n, 25+60*20)
	}
}

// TestSinkLingers: entries that keep coming within a Linger of each other
// share one transaction, up to MaxLinger; a steady flow past MaxLinger is
// cut into transactions of about MaxLinger each, and every entry is
// written.
func TestSinkLingers(t *testing.T) {
	dir := t.TempDir()
	store := openTest(t, dir)
	sink := NewSink(store, quiet, SinkOptions{Journal: openJournal(t, dir), Linger: 150 * time.Millisecond,
		MaxLinger: 2 * time.Second})
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	// 10 fetches 20 ms apart: 200 ms in all, past one Linger.
	for i := range 10 {
		sink.Fetch(testFetch(i))
		time.Sleep(20 * time.Millisecond)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return sink.Stats().Written == 10 }) {
		t.Fatalf("stats %+v, want 10 written", sink.Stats())
	}
	if st := sink.Stats(); st.Batches != 1 {
		t.Errorf("10 fetches 20 ms apart took %d transactions, want 1 (Linger 150 ms)", st.Batches)
	}

	// A steady flow for 1 s against a MaxLinger of 200 ms.
	dir = t.TempDir()
	store = openTest(t, dir)
	sink = NewSink(store, quiet, SinkOptions{Journal: openJournal(t, dir), Linger: 50 * time.Millisecond,
		MaxLinger: 200 * time.Millisecond})
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	const n = 100
	for i := range n {
		sink.Fetch(testFetch(i))
		time.Sleep(10 * time.Millisecond)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return sink.Stats().Written == n }) {
		t.Fatalf("stats %+v, want %d written", sink.Stats(), n)
	}
	if b := sink.Stats().Batches; b < 3 || b > n/2 {
		t.Errorf("a steady flow of %d fetches over 1 s took %d transactions; want one per ~200 ms (MaxLinger)", n, b)
	}
}
