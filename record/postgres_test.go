package record

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/pgtest"
)

// backends opens one empty store per backend: SQLite in a temp folder and
// PostgreSQL in a cluster the test started (skipped without it).
func backends(t testing.TB) map[Backend]*Store {
	t.Helper()
	sq := openTest(t, t.TempDir())
	pg := openURLTest(t, pgtest.Start(t).NewDB(t))
	return map[Backend]*Store{SQLite: sq, Postgres: pg}
}

// openURLTest opens the store at url (OpenURL), closed when the test ends.
func openURLTest(t testing.TB, url string) *Store {
	t.Helper()
	loc, err := ParseLocation(url, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenURL(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mixedEntries are records of two servers with labels and intervals, and
// leases; every value a column holds is set somewhere.
func mixedEntries() []*entry {
	var es []*entry
	for i := range 40 {
		r := fullRecord()
		r.Time = r.Time.Add(time.Duration(i%17) * time.Minute) // ties in time, ordered by id
		r.File = []string{"images/vmlinuz", "images/initrd.img", "boot_100%.efi", "a_b.cfg", "[x].img"}[i%5]
		r.Server, r.Site = []string{"lab-a", "lab-b"}[i%2], []string{"north", "south", ""}[i%3]
		r.Proto = []string{"http", "tftp"}[i%2]
		r.TSize = i%3 == 0
		r.Mbps = 100 + float64(i)/3
		r.Labels = map[string]string{"fw": fmt.Sprintf("v%d", i%4), "rxcsum": []string{"on", "off"}[i%2]}
		if i%7 == 0 {
			r.Labels = nil
		}
		r.ClientMAC = fmt.Sprintf("52:54:00:00:00:%02X", i%5) // stored lower-case
		e := &entry{UID: fmt.Sprintf("uid-%03d", i), Record: &r}
		for k := range i % 4 {
			e.Intervals = append(e.Intervals, Interval{Start: time.Duration(k) * time.Second,
				End: time.Duration(k+1) * time.Second, Bytes: int64(1000 * (k + i)), Retransmits: uint32(k),
				Cwnd: 14480, SndWnd: 65535, RTT: 300 * time.Microsecond})
		}
		es = append(es, e)
		if i%10 == 0 {
			es = append(es, &entry{UID: fmt.Sprintf("lease-%03d", i), Lease: &Lease{
				Time: r.Time, MAC: r.ClientMAC, Addr: "10.0.0.9", Arch: 7, Host: "board", BootFile: "ipxe.efi",
				Expiry: r.Time.Add(time.Hour), Proxy: i%20 == 0, Server: r.Server, Site: r.Site}})
		}
	}
	return es
}

// TestBackendsAgree: the same entries written to SQLite and PostgreSQL
// (twice: the second write is a replay and adds nothing) read back the
// same through every filter, Get, Intervals and Leases, ids included.
func TestBackendsAgree(t *testing.T) {
	ctx := context.Background()
	stores := backends(t)
	for _, st := range stores {
		es := mixedEntries()
		if err := st.addBatch(ctx, es[:25]); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if err := st.addBatch(ctx, es); err != nil { // the first 25 again
			t.Fatalf("%s: replay: %v", st, err)
		}
		if err := st.addBatch(ctx, mixedEntries()[30:]); err != nil {
			t.Fatalf("%s: replay: %v", st, err)
		}
		for _, e := range es {
			if e.Record != nil && e.Record.ID == 0 {
				t.Errorf("%s: %s has no id after a replay", st, e.UID)
			}
		}
	}
	since := fullRecord().Time.Add(5 * time.Minute)
	filters := map[string]Filter{
		"all":         {},
		"client mac":  {Client: "52-54-00-00-00-0A"},
		"client ip":   {Client: "10.0.0.7"},
		"file":        {File: "a_b.cfg"},
		"glob star":   {File: "images/*"},
		"glob %":      {File: "boot_100%.*"},
		"glob _":      {File: "a?b.cfg"},
		"glob [":      {File: "[x]*"},
		"glob case":   {File: "IMAGES/*"},
		"since":       {Since: since},
		"labels":      {Labels: map[string]string{"fw": "v1", "rxcsum": "off"}},
		"proto":       {Proto: "tftp"},
		"server":      {Server: "lab-b"},
		"site":        {Site: "south"},
		"server+site": {Server: "lab-a", Site: "north", Source: "serve"},
		"limit":       {Limit: 7},
		"page":        {Limit: 5, Before: Position{Time: since, ID: 20}},
	}
	for name, f := range filters {
		got := map[Backend][]Record{}
		for k, st := range stores {
			recs, err := st.Query(ctx, f)
			if err != nil {
				t.Fatalf("%s %s: %v", k, name, err)
			}
			got[k] = recs
		}
		if d := cmp.Diff(got[SQLite], got[Postgres]); d != "" {
			t.Errorf("%s: sqlite -> postgres (-+):\n%s", name, d)
		}
		if name == "all" && len(got[SQLite]) != 40 {
			t.Errorf("all: %d records, want 40 (a replay doubled or lost some)", len(got[SQLite]))
		}
		if strings.HasPrefix(name, "glob") && name != "glob case" && len(got[SQLite]) == 0 {
			t.Errorf("%s matched nothing", name)
		}
	}
	for _, id := range []int64{1, 6, 40} {
		var recs [2]Record
		var ivs [2][]Interval
		for i, k := range []Backend{SQLite, Postgres} {
			var err error
			if recs[i], err = stores[k].Get(ctx, id); err != nil {
				t.Fatal(err)
			}
			if ivs[i], err = stores[k].Intervals(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if d := cmp.Diff(recs[0], recs[1]); d != "" {
			t.Errorf("Get(%d) (-sqlite +postgres):\n%s", id, d)
		}
		if d := cmp.Diff(ivs[0], ivs[1]); d != "" {
			t.Errorf("Intervals(%d) (-sqlite +postgres):\n%s", id, d)
		}
	}
	if _, err := stores[Postgres].Get(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(999) on postgres: %v, want ErrNotFound", err)
	}
	var ls [2][]Lease
	for i, k := range []Backend{SQLite, Postgres} {
		var err error
		if ls[i], err = stores[k].Leases(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(ls[0], ls[1]); d != "" || len(ls[0]) != 4 {
		t.Errorf("Leases (%d) (-sqlite +postgres):\n%s", len(ls[0]), d)
	}

	// Copy moves everything, twice without doubling, both ways.
	dst, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	for range 2 {
		if st, err := Copy(ctx, stores[Postgres], dst, 7, nil); err != nil || st.Records != 40 || st.Leases != 4 {
			t.Fatalf("copy postgres -> sqlite: %+v %v", st, err)
		}
	}
	a, _ := stores[SQLite].Query(ctx, Filter{})
	b, _ := dst.Query(ctx, Filter{})
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("sqlite -> postgres -> sqlite (-+):\n%s", d)
	}
}

// TestPostgresSchema: servers starting at once on an empty database
// migrate it once; a newer schema is refused by readers and writers, an
// empty database by readers, with the command that fixes it.
func TestPostgresSchema(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Start(t)
	loc, _ := ParseLocation(c.NewDB(t), "")
	if _, err := OpenURLReadOnly(ctx, loc); err == nil || !strings.Contains(err.Error(), "pxeperf store migrate") {
		t.Errorf("read-only open of an empty database: %v, want the migrate hint", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			var st *Store
			st, errs[i] = OpenURL(ctx, loc)
			if st != nil {
				st.Close()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	if n := pgtest.Count(t, loc.URL, "SELECT count(*) FROM schema_migrations"); n != SchemaVersion {
		t.Errorf("%d migrations recorded, want %d", n, SchemaVersion)
	}
	st, err := OpenURLReadOnly(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	pgtest.Exec(t, loc.URL, "INSERT INTO schema_migrations VALUES ($1, 'future', 0)", SchemaVersion+1)
	if _, err := OpenURL(ctx, loc); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("OpenURL of a newer schema: %v, want ErrNewerSchema", err)
	}
	if _, err := OpenURLReadOnly(ctx, loc); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("OpenURLReadOnly of a newer schema: %v, want ErrNewerSchema", err)
	}
}

// TestShipperDatabaseAway: the sink ships to PostgreSQL; the database stops
// while fetches go on and starts again: every fetch is stored exactly once,
// and a server that starts while the database is down ships its journal
// once it is up.
func TestShipperDatabaseAway(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Start(t)
	url := c.NewDB(t)
	loc, _ := ParseLocation(url, "")
	dir := t.TempDir()
	st, err := OpenURL(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSink(st, quiet, SinkOptions{Journal: j, Interface: "lo", BatchSize: 1000, Retry: 50 * time.Millisecond,
		Server: "lab-a", Site: "north"})
	count := func() int {
		return pgtest.Count(t, url, "SELECT count(DISTINCT uid) FROM records WHERE server = 'lab-a' AND site = 'north'")
	}
	for i := range 200 {
		s.Fetch(testFetch(i))
	}
	waitCount(t, count, 200)
	c.Stop()
	for i := 200; i < 500; i++ {
		s.Fetch(testFetch(i))
	}
	time.Sleep(300 * time.Millisecond) // the writer fails and backs off
	if s.Stats().StoreErrors == 0 {
		t.Errorf("no store error while the database was down: %+v", s.Stats())
	}
	c.StartAgain()
	waitCount(t, count, 500)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Close(cctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// Start with the database down: the store opens (ErrUnreachable), the
	// journal keeps what comes, and it is shipped once the database is up.
	c.Stop()
	st, err = OpenURL(ctx, loc)
	if !errors.Is(err, ErrUnreachable) || st == nil {
		t.Fatalf("OpenURL with the database down: %v (store %v), want ErrUnreachable and a store", err, st)
	}
	defer st.Close()
	s = NewSink(st, quiet, SinkOptions{Journal: j, Interface: "lo", Retry: 50 * time.Millisecond, Server: "lab-a", Site: "north"})
	for i := 500; i < 600; i++ {
		s.Fetch(testFetch(i))
	}
	c.StartAgain()
	waitCount(t, count, 600)
	if err := s.Close(cctx); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if n := pgtest.Count(t, url, "SELECT count(*) FROM records"); n != 600 {
		t.Errorf("%d rows, want 600", n)
	}
}

func waitCount(t *testing.T, count func() int, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		if n = count(); n >= want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != want {
		t.Fatalf("%d records stored, want %d", n, want)
	}
}

// BenchmarkShip is the writer's throughput per backend: batches of 1000
// records (each with one interval and one label), as the sink writes them
// (store.batch). records/s is the figure the README quotes; cpu-ns/record
// is this process's CPU per record (PostgreSQL's server is not counted).
func BenchmarkShip(b *testing.B) {
	for kind, st := range backends(b) {
		b.Run(string(kind), func(b *testing.B) {
			s := &Sink{opt: SinkOptions{Interface: "lo", Server: "lab-a"}}
			f := testFetch(1)
			f.TCP = &event.TCPInfo{RTT: time.Millisecond, MaxSndWnd: 65535}
			f.Intervals = []event.Interval{{End: time.Second, Bytes: 1000}}
			f.Labels = map[string]string{"fw": "ipxe"}
			batch := make([]*entry, 1000)
			cpu0 := cpuTime(b)
			for b.Loop() {
				storeBatch(b, st, s, f, batch)
			}
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*len(batch)), "cpu-ns/record")
		})
	}
}
