package record

import (
	"context"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// BenchmarkSinkFetch is the cost a fetch's handler pays to record it:
// convert, encode, one journal write, queue. The writer runs meanwhile.
func BenchmarkSinkFetch(b *testing.B) {
	dir := b.TempDir()
	st, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	j, err := OpenJournal(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
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
		for i := range batch {
			r, ivs := s.convert(f)
			batch[i] = &entry{UID: newUID(), Record: r, Intervals: ivs}
		}
		if err := st.addBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
}
