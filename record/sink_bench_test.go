package record

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/netstate"
)

// benchStore opens a store and a journal in a temporary data folder, both
// closed when b ends.
func benchStore(b *testing.B) (*Store, *Journal) {
	dir := b.TempDir()
	st, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	j, err := OpenJournal(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	return st, j
}

// BenchmarkSinkFetch is the cost a fetch's handler pays to record it:
// convert, encode, one journal write, queue. The writer runs meanwhile.
func BenchmarkSinkFetch(b *testing.B) {
	st, j := benchStore(b)
	s := NewSink(st, quiet, SinkOptions{Journal: j, Interface: "lo", MaxPending: 1 << 22})
	f := testFetch(1)
	f.TCP = &event.TCPInfo{RTT: time.Millisecond, MaxSndWnd: 65535}
	f.Intervals = []event.Interval{{End: time.Second, Bytes: 1000}}
	b.ReportAllocs()
	for b.Loop() {
		s.Fetch(f)
	}
	b.StopTimer()
	_ = s.Close(context.Background())
}

// BenchmarkStoreBatch is the writer's cost per record, in batches of 256.
func BenchmarkStoreBatch(b *testing.B) {
	st, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := &Sink{opt: SinkOptions{Interface: "lo"}}
	f := testFetch(1)
	f.TCP = &event.TCPInfo{RTT: time.Millisecond, MaxSndWnd: 65535}
	f.Intervals = []event.Interval{{End: time.Second, Bytes: 1000}}
	batch := make([]*entry, 256)
	b.ReportAllocs()
	for b.Loop() {
		storeBatch(b, st, s, f, batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
}

// storeBatch fills batch with new records of f, converted as s converts
// a fetch, and writes it to st in one transaction.
func storeBatch(b *testing.B, st *Store, s *Sink, f *event.Fetch, batch []*entry) {
	for i := range batch {
		r, ivs := s.convert(f)
		batch[i] = &entry{UID: newUID(), Record: r, Intervals: ivs}
	}
	if err := st.addBatch(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
}

// httpFetch is a served HTTP fetch as httpboot reports it: TCP_INFO, nine
// per-second intervals (a 32 MiB image at ~30 Mbit/s, or 1 GiB at 1
// Gbit/s), a client MAC and a label.
func httpFetch(i int) *event.Fetch {
	f := &event.Fetch{
		Start: time.Unix(1700000000, 0).Add(time.Duration(i) * time.Millisecond).UTC(), Proto: event.ProtoHTTP,
		Client: netip.MustParseAddrPort("10.0.0.9:40000"), Local: netip.MustParseAddr("127.0.0.1"),
		MAC: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, byte(i)}, File: "images/debian-netinst.iso",
		Bytes: 32 << 20, Size: 32 << 20, Duration: 8900 * time.Millisecond, Outcome: event.OutcomeOK,
		Labels: map[string]string{"fw": "ipxe-1.21"},
		TCP: &event.TCPInfo{RTT: 2100 * time.Microsecond, MinRTT: 180 * time.Microsecond, Retransmits: 12,
			MaxSndWnd: 3 << 20, MedSndWnd: 2 << 20, MSS: 1448, PMTU: 1500, DeliveryRate: 3_900_000,
			RWndLimited: 12 * time.Millisecond, SndBufLimited: 340 * time.Millisecond},
	}
	for s := range 9 {
		f.Intervals = append(f.Intervals, event.Interval{Start: time.Duration(s) * time.Second,
			End: time.Duration(s+1) * time.Second, Bytes: 3_700_000 + int64(s), Retransmits: uint32(s % 3),
			Cwnd: 90 * 1448, SndWnd: 2 << 20, RTT: 2 * time.Millisecond})
	}
	return f
}

// BenchmarkRecordHTTP is the whole CPU cost of recording one served HTTP
// fetch (httpFetch) as serve does: convert, journal line, one write, and
// the writer's SQLite insert of the record, its label and its nine
// intervals; it reports process CPU per fetch (cpu-µs/fetch, from
// getrusage, all threads) once every fetch is in the store.
//
//	go test ./record -run '^$' -bench RecordHTTP -benchmem -count 5
//
// burst: fetches arrive back to back and share transactions (many short
// fetches). close: one fetch every 20 ms, as when boards that booted
// together finish over a second: the writer lingers on while they keep
// coming (MaxLinger), so they share transactions too. paced: one fetch
// every 60 ms, past the writer's 50 ms linger, so each gets a transaction
// of its own; keep -benchtime small (e.g. 100x). idle and close-idle: the
// same waits without fetches, the process's CPU while it waits, to
// subtract.
func BenchmarkRecordHTTP(b *testing.B) {
	for _, mode := range []struct {
		name string
		gap  time.Duration
		idle bool // the control: the same waits, no fetch
	}{{"burst", 0, false}, {"close", 20 * time.Millisecond, false}, {"close-idle", 20 * time.Millisecond, true},
		{"paced", 60 * time.Millisecond, false}, {"idle", 60 * time.Millisecond, true}} {
		b.Run(mode.name, func(b *testing.B) {
			if mode.gap > 0 && b.N > 1 && b.N*int(mode.gap) > int(time.Minute) {
				b.Skipf("paced: %d fetches take over a minute; run with -benchtime 100x", b.N)
			}
			st, j := benchStore(b)
			ns, err := netstate.New(netstate.DefaultTTL)
			if err != nil {
				b.Fatal(err)
			}
			defer ns.Close()
			s := NewSink(st, quiet, SinkOptions{Journal: j, Interface: "lo", Net: ns, Server: "bench", Site: "lab",
				MaxPending: 1 << 22, MaxPendingBytes: 1 << 30})
			fs := make([]*event.Fetch, b.N)
			for i := range fs {
				fs[i] = httpFetch(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			want := int64(b.N)
			if mode.idle {
				want = 0
			}
			for i := range b.N {
				if !mode.idle {
					s.Fetch(fs[i])
				}
				if mode.gap > 0 {
					time.Sleep(mode.gap)
				}
			}
			for s.Stats().Written < want {
				time.Sleep(time.Millisecond)
			}
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/fetch")
			b.ReportMetric(float64(s.Stats().Batches)/float64(b.N), "commits/fetch")
			if err := s.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			if st := s.Stats(); st.Dropped+st.JournalOnly > 0 {
				b.Fatalf("recording lost or deferred entries: %+v", st)
			}
			if n := countRows(b, st, "intervals"); n != 9*int(want) {
				b.Fatalf("%d intervals stored, want %d", n, 9*want)
			}
		})
	}
}

func countRows(tb testing.TB, st *Store, table string) int {
	var n int
	if err := st.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
