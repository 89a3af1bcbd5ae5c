package dashboard

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/tftp"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func fetchN(i int) *event.Fetch {
	return &event.Fetch{Start: t0.Add(time.Duration(i) * time.Second), Proto: event.ProtoHTTP,
		Client: netip.MustParseAddrPort(fmt.Sprintf("192.168.50.%d:4000", 1+i%250)),
		MAC:    net.HardwareAddr{0x52, 0x54, 0, 0, byte(i >> 8), byte(i)}, Host: fmt.Sprintf("board-%d", i),
		File: fmt.Sprintf("file-%d.img", i), Kind: record.KindImage, Bytes: 1000, Size: 1000, Duration: time.Millisecond,
		Outcome: event.OutcomeOK}
}

func leaseN(i int) *event.Lease {
	return &event.Lease{Time: t0.Add(time.Duration(i) * time.Second), MAC: net.HardwareAddr{0x52, 0x54, 0, 1, byte(i >> 8), byte(i)},
		Addr: netip.AddrFrom4([4]byte{192, 168, 50, byte(100 + i%100)}), Arch: 7, Host: fmt.Sprintf("board-%d", i),
		BootFile: "ipxe.efi", Expiry: t0.Add(time.Hour)}
}

// TestRecentRing: the ring keeps the newest Recent fetches, newest first,
// however often it has wrapped.
func TestRecentRing(t *testing.T) {
	for _, tc := range []struct{ keep, fed int }{{5, 0}, {5, 3}, {5, 5}, {5, 6}, {5, 17}, {1, 4}, {3, 300}} {
		t.Run(fmt.Sprintf("keep %d of %d", tc.keep, tc.fed), func(t *testing.T) {
			d := New(Options{Recent: tc.keep})
			for i := 1; i <= tc.fed; i++ {
				d.Fetch(fetchN(i))
			}
			seq, got := d.Recent()
			var want, gotSeq []uint64
			var wantFiles, gotFiles []string
			for i := tc.fed; i >= 1 && i > tc.fed-tc.keep; i-- {
				want = append(want, uint64(i))
				wantFiles = append(wantFiles, fmt.Sprintf("file-%d.img", i))
			}
			for _, f := range got {
				gotSeq = append(gotSeq, f.Seq)
				gotFiles = append(gotFiles, f.File)
			}
			if seq != uint64(tc.fed) {
				t.Errorf("seq %d, want %d", seq, tc.fed)
			}
			if diff := cmp.Diff(want, gotSeq); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantFiles, gotFiles); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLeasesBounded: the leases seen as events are kept per MAC, the
// latest sighting wins, and at most 4×Recent are kept: the oldest go.
func TestLeasesBounded(t *testing.T) {
	d := New(Options{Recent: 2})
	for i := range 10 {
		d.Lease(leaseN(i))
	}
	again := leaseN(9)
	again.Host = "board-9-renamed"
	again.Time = t0.Add(time.Minute)
	d.Lease(again)
	got := d.Leases()
	var hosts []string
	for _, l := range got {
		hosts = append(hosts, l.Host)
	}
	want := []string{"board-9-renamed", "board-8", "board-7", "board-6", "board-5", "board-4", "board-3", "board-2"}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("leases, newest first (-want +got):\n%s", diff)
	}
	// With a lease list given (full mode), that list is what is shown.
	d = New(Options{Leases: func() []Lease { return []Lease{{MAC: "52:54:00:aa:bb:cc", Addr: "192.168.50.7"}} }})
	d.Lease(leaseN(1))
	if got := d.Leases(); len(got) != 1 || got[0].Addr != "192.168.50.7" {
		t.Errorf("with Options.Leases: %+v", got)
	}
}

// jsonNames are the JSON names of a struct type's fields (embedded ones
// included).
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func getJSON(t *testing.T, h http.Handler, path string) map[string]any {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", path, nil))
	if rr.Code != 200 || rr.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%s: %d %s", path, rr.Code, rr.Header().Get("Content-Type"))
	}
	var v map[string]any
	if err := json.Unmarshal(rr.Body.Bytes(), &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, rr.Body)
	}
	return v
}

// TestAPIShapes: /api/active, /api/recent and /api/leases answer the
// shapes the page reads, with record.Record's and record.Lease's names.
func TestAPIShapes(t *testing.T) {
	act := event.NewActive()
	f := fetchN(1)
	f.Start = time.Now().Add(-10 * time.Second)
	tr := act.Begin(f)
	tr.Add(1_250_000_000) // 1.25 GB in 10 s or a little more
	d := New(Options{Active: act})
	f = fetchN(2)
	f.Err, f.Labels = "reset", map[string]string{"rx_offload": "off"}
	d.Fetch(f)
	d.Lease(leaseN(3))
	mux := http.NewServeMux()
	d.Register(mux)

	a := getJSON(t, mux, "/api/active")
	if diff := cmp.Diff([]string{"recent_seq", "time", "transfers"}, keys(a)); diff != "" {
		t.Errorf("/api/active keys (-want +got):\n%s", diff)
	}
	trs := a["transfers"].([]any)
	if len(trs) != 1 {
		t.Fatalf("/api/active: %d transfers, want 1", len(trs))
	}
	tj := trs[0].(map[string]any)
	wantT := append(jsonNames(reflect.TypeFor[event.TransferInfo]()), "avg_mbps")
	sort.Strings(wantT)
	if diff := cmp.Diff(wantT, keys(tj)); diff != "" {
		t.Errorf("transfer keys (-want +got):\n%s", diff)
	}
	if tj["bytes"].(float64) != 1.25e9 || tj["file"] != "file-1.img" || tj["client_mac"] != "52:54:00:00:00:01" {
		t.Errorf("transfer %v", tj)
	}
	if avg := tj["avg_mbps"].(float64); avg <= 100 || avg > 1000 {
		t.Errorf("avg_mbps %v: 10 Gbit over 10 s or a little more is at most 1000 Mbit/s", avg)
	}
	if a["recent_seq"].(float64) != 1 {
		t.Errorf("recent_seq %v, want 1", a["recent_seq"])
	}

	r := getJSON(t, mux, "/api/recent")
	if diff := cmp.Diff([]string{"fetches", "seq"}, keys(r)); diff != "" {
		t.Errorf("/api/recent keys (-want +got):\n%s", diff)
	}
	fj := r["fetches"].([]any)[0].(map[string]any)
	wantF := jsonNames(reflect.TypeFor[Fetch]())
	sort.Strings(wantF)
	if diff := cmp.Diff(wantF, keys(fj)); diff != "" {
		t.Errorf("fetch keys (-want +got):\n%s", diff)
	}
	recNames := jsonNames(reflect.TypeFor[record.Record]())
	for _, k := range wantF {
		if k != "seq" && !slices.Contains(recNames, k) {
			t.Errorf("/api/recent key %q is not a record.Record name", k)
		}
	}
	if fj["duration_ns"].(float64) != 1e6 || fj["labels"].(map[string]any)["rx_offload"] != "off" || fj["err"] != "reset" {
		t.Errorf("fetch %v", fj)
	}

	l := getJSON(t, mux, "/api/leases")
	if diff := cmp.Diff([]string{"leases"}, keys(l)); diff != "" {
		t.Errorf("/api/leases keys (-want +got):\n%s", diff)
	}
	lj := l["leases"].([]any)[0].(map[string]any)
	leaseNames := jsonNames(reflect.TypeFor[record.Lease]())
	for _, k := range keys(lj) {
		if !slices.Contains(leaseNames, k) {
			t.Errorf("/api/leases key %q is not a record.Lease name", k)
		}
	}
	for _, k := range []string{"client_mac", "addr", "arch", "host", "boot_file", "time", "expiry"} {
		if _, ok := lj[k]; !ok {
			t.Errorf("/api/leases entry lacks %q: %v", k, lj)
		}
	}
	if lj["client_mac"] != "52:54:00:01:00:03" || lj["addr"] != "192.168.50.103" {
		t.Errorf("lease %v", lj)
	}
	// Nothing yet: empty lists, not null.
	d = New(Options{})
	mux = http.NewServeMux()
	d.Register(mux)
	for path, key := range map[string]string{"/api/active": "transfers", "/api/recent": "fetches", "/api/leases": "leases"} {
		if v, ok := getJSON(t, mux, path)[key].([]any); !ok || len(v) != 0 {
			t.Errorf("%s with nothing: %s = %v, want []", path, key, v)
		}
	}
}

type fakeTFTP struct{ st tftp.Stats }

func (f *fakeTFTP) Stats() tftp.Stats { return f.st }

// TestTFTPCounters: /api/active (and so the stream, and `pxeperf status`)
// carries every counter of the TFTP server's Stats as Stats reads them at
// that moment (Busy as its two refusal reasons), the refusals by reason and
// summed; without a TFTP server there is no tftp key; and the page reads
// every field by its JSON name.
func TestTFTPCounters(t *testing.T) {
	src := &fakeTFTP{st: tftp.Stats{Requests: 99, Malformed: 7, Duplicates: 2, Busy: 4, Replaced: 6, Stray: 11, PassedOn: 8, Unsent: 23,
		Threaded: 21, Polled: 22, ThreadRecvs: 2300, Pinned: 19, ThreadsBusy: 3, ThreadsCap: 16,
		Refused: map[string]uint64{tftp.RefuseBusy: 3, tftp.RefuseClientBusy: 1, tftp.RefuseClientTimeout: 1}}}
	d := New(Options{Active: event.NewActive()})
	d.SetSources(nil, nil, src)
	mux := http.NewServeMux()
	d.Register(mux)
	want := map[string]any{"requests": 99.0, "threads_busy": 3.0, "threads_cap": 16.0,
		"threaded": 21.0, "polled": 22.0, "thread_recvs": 2300.0, "pinned": 19.0, "malformed": 7.0,
		"repeated_requests": 2.0, "stray": 11.0, "replaced": 6.0, "passed_on": 8.0, "unsent_errors": 23.0, "refused": 5.0,
		"refused_by": map[string]any{tftp.RefuseBusy: 3.0, tftp.RefuseClientBusy: 1.0, tftp.RefuseClientTimeout: 1.0}}
	got := getJSON(t, mux, "/api/active")["tftp"]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/api/active tftp (-want +got):\n%s", diff)
	}
	// A counter added to tftp.Stats later fails here until it is shown:
	// every one is set above, each to a value of its own, and each value
	// is in the answer (Busy is the "too many transfers" refusals).
	shown := map[float64]bool{}
	if m, ok := got.(map[string]any); ok {
		for _, v := range m {
			if f, ok := v.(float64); ok {
				shown[f] = true
			}
		}
	}
	sv := reflect.ValueOf(src.st)
	for i := range sv.NumField() {
		f, name := sv.Field(i), sv.Type().Field(i).Name
		switch {
		case f.IsZero():
			t.Errorf("tftp.Stats.%s is not set in this test: set it, and show it in TFTPCounters", name)
		case name == "Busy":
			if n := src.st.Refused[tftp.RefuseBusy] + src.st.Refused[tftp.RefuseClientBusy]; uint64(f.Int()) != n {
				t.Errorf("Busy %d is not the two busy refusals (%d) in this test", f.Int(), n)
			}
		case f.Kind() == reflect.Int64 && !shown[float64(f.Int())]:
			t.Errorf("tftp.Stats.%s (%d) is not in /api/active's tftp counters", name, f.Int())
		}
	}
	// Read when asked, not when built.
	src.st.ThreadsBusy, src.st.Stray = 0, 12
	want["threads_busy"], want["stray"] = 0.0, 12.0
	if diff := cmp.Diff(want, getJSON(t, mux, "/api/active")["tftp"]); diff != "" {
		t.Errorf("second read (-want +got):\n%s", diff)
	}

	d.SetSources(nil, nil, nil)
	if v, ok := getJSON(t, mux, "/api/active")["tftp"]; ok {
		t.Errorf("no TFTP server, yet /api/active carries tftp: %v", v)
	}

	page, err := ui.ReadFile("ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	index, err := ui.ReadFile("ui/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range jsonNames(reflect.TypeFor[TFTPCounters]()) {
		if !strings.Contains(string(page), "c."+name) {
			t.Errorf("app.js never shows the TFTP counter %q", name)
		}
	}
	if !strings.Contains(string(index), `id="tftp-counters"`) || !strings.Contains(string(page), `"#tftp-counters"`) {
		t.Error("the page has no #tftp-counters line, or app.js does not fill it")
	}
}

// TestStream: the SSE stream pushes "active" events as transfers move,
// and the handler ends when the client goes.
func TestStream(t *testing.T) {
	act := event.NewActive()
	tr := act.Begin(fetchN(1))
	d := New(Options{Active: act, Interval: 10 * time.Millisecond})
	mux := http.NewServeMux()
	d.Register(mux)
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		if r.URL.Path == "/api/active/stream" {
			close(ended)
		}
	}))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/active/stream", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	read := sseReader(t, resp.Body)
	next := func() activeAnswer {
		t.Helper()
		ev, data := read()
		if ev != "active" {
			t.Fatalf("event %q, want active", ev)
		}
		var a activeAnswer
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		return a
	}
	first := next()
	if len(first.Transfers) != 1 || first.Transfers[0].Bytes != 0 || first.RecentSeq != 0 {
		t.Fatalf("first event %+v", first)
	}
	// The transfer moves and a fetch ends: a later event says so.
	tr.Add(4096)
	d.Fetch(fetchN(2))
	var a activeAnswer
	for range 500 {
		if a = next(); len(a.Transfers) == 1 && a.Transfers[0].Bytes == 4096 && a.RecentSeq == 1 {
			break
		}
	}
	if len(a.Transfers) != 1 || a.Transfers[0].Bytes != 4096 || a.RecentSeq != 1 {
		t.Errorf("no event showed the progress: last %+v", a)
	}
	tr.End()
	for range 500 {
		if a = next(); len(a.Transfers) == 0 {
			break
		}
	}
	if len(a.Transfers) != 0 {
		t.Errorf("the ended transfer is still streamed: %+v", a)
	}

	// The client goes: the handler returns.
	cancel()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream handler still runs 10 s after its client went")
	}
}

// hostileText is what a label, a host name or a file name may hold.
const hostileText = `</text><script>alert("x")</script><text a='1' onload="alert(1)">&amp; ]]>`

// TestSVGEscape: the text the chart's message carries is escaped for an
// SVG document: it parses back as the same text and makes no markup.
func TestSVGEscape(t *testing.T) {
	for _, s := range []string{hostileText, "plain", "a < b & c > d", `"quoted" 'single'`, "ü ✓"} {
		doc := `<svg xmlns="http://www.w3.org/2000/svg"><text>` + svgEscape(s) + `</text></svg>`
		elems, text, err := parseSVG(doc)
		if err != nil {
			t.Errorf("%q: escaped text does not parse: %v\n%s", s, err, doc)
			continue
		}
		if diff := cmp.Diff([]string{"svg", "text"}, elems); diff != "" || text != s {
			t.Errorf("%q: elements %v, text %q", s, elems, text)
		}
	}
}

// parseSVG returns the elements a document holds, in order, and its text.
func parseSVG(doc string) (elems []string, text string, err error) {
	dec := xml.NewDecoder(strings.NewReader(doc))
	var b strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return elems, b.String(), nil
		}
		if err != nil {
			return elems, b.String(), err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elems = append(elems, tok.Name.Local)
			for _, a := range tok.Attr {
				if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
					return elems, b.String(), fmt.Errorf("attribute %s on <%s>", a.Name.Local, tok.Name.Local)
				}
			}
		case xml.CharData:
			b.Write(tok)
		}
	}
}

// records is a Source of fixed records for the chart.
type records []record.Record

func (rs records) Query(context.Context, record.Filter) ([]record.Record, error) {
	return slices.Clone(rs), nil
}

func (rs records) Each(_ context.Context, _ record.Filter, fn func(*record.Record) error) error {
	for i := range rs {
		if err := fn(&rs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (rs records) Get(context.Context, int64) (record.Record, error) {
	return record.Record{}, record.ErrNotFound
}
func (rs records) Intervals(context.Context, int64) ([]record.Interval, error) {
	return nil, nil
}

// TestChartHostileRecords: records whose labels, host, file and offload
// fields hold markup give a well-formed SVG chart with none of it as
// markup; with no records, the message chart is well-formed too.
func TestChartHostileRecords(t *testing.T) {
	var rs records
	for i, wnd := range []uint32{16384, 65535, 131072} {
		for j, off := range []string{"off", "on", hostileText} {
			rs = append(rs, record.Record{ID: int64(3*i + j + 1), Time: t0.Add(time.Duration(i) * time.Minute), Source: "serve",
				Proto: "http", Direction: "rx", ClientIP: "192.168.50.101", Host: hostileText, File: hostileText + ".img",
				Kind: record.KindImage, Bytes: 500e6, Size: 500e6, Duration: time.Second, Mbps: 400 + float64(100*j),
				Outcome: "ok", WndMax: wnd, RxCsum: record.Offload(hostileText), Kernel: hostileText,
				Labels: map[string]string{"rx_offload": off, hostileText: hostileText}})
		}
	}
	for name, src := range map[string]records{"records": rs, "no records": nil} {
		t.Run(name, func(t *testing.T) {
			d := New(Options{Records: src})
			mux := http.NewServeMux()
			d.Register(mux)
			rr := httptest.NewRecorder()
			mux.ServeHTTP(rr, httptest.NewRequest("GET", "/api/chart/window-offload.svg?since=3650d", nil))
			body := rr.Body.String()
			if rr.Code != 200 || rr.Header().Get("Content-Type") != "image/svg+xml" {
				t.Fatalf("status %d, %s: %s", rr.Code, rr.Header().Get("Content-Type"), body)
			}
			elems, text, err := parseSVG(body)
			if err != nil {
				t.Fatalf("not well-formed SVG: %v\n%s", err, body)
			}
			for _, e := range elems {
				if !slices.Contains([]string{"svg", "title", "rect", "line", "polyline", "circle", "text", "g"}, e) {
					t.Errorf("element <%s> in the chart", e)
				}
			}
			if strings.Contains(body, "<script") || strings.Contains(body, "onload=") {
				t.Errorf("markup from the records in the chart:\n%s", body)
			}
			if name == "records" && !strings.Contains(text, "RX csum off") {
				t.Errorf("chart without its series: %q", text)
			}
		})
	}
	// No record store: 503, not a broken chart.
	rr := httptest.NewRecorder()
	New(Options{}).chart(rr, httptest.NewRequest("GET", "/api/chart/window-offload.svg", nil))
	if rr.Code != http.StatusServiceUnavailable {
		t.Errorf("no store: %d", rr.Code)
	}
}

// TestConcurrent: fetches and leases arrive from many goroutines while the
// page's JSON is read; run with -race. Nothing is lost from the count, the
// ring holds its newest Recent, the leases stay bounded.
func TestConcurrent(t *testing.T) {
	const writers, each, keep = 8, 300, 50
	act := event.NewActive()
	d := New(Options{Active: act, Recent: keep})
	mux := http.NewServeMux()
	d.Register(mux)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				tr := act.Begin(fetchN(n))
				tr.Add(100)
				d.Fetch(fetchN(n))
				d.Lease(leaseN(n % 1000))
				tr.End()
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for _, path := range []string{"/api/recent", "/api/active", "/api/leases"} {
		readers.Go(func() {
			for k := 0; k < 10000; k++ {
				select {
				case <-stop:
					return
				default:
				}
				rr := httptest.NewRecorder()
				mux.ServeHTTP(rr, httptest.NewRequest("GET", path, nil))
				if rr.Code != 200 {
					t.Errorf("%s: %d", path, rr.Code)
					return
				}
				d.Recent()
				d.Active()
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	seq, got := d.Recent()
	if seq != writers*each || len(got) != keep {
		t.Fatalf("seq %d with %d kept, want %d with %d", seq, len(got), writers*each, keep)
	}
	for i := range got {
		if got[i].Seq != seq-uint64(i) {
			t.Fatalf("ring out of order: position %d has seq %d, want %d", i, got[i].Seq, seq-uint64(i))
		}
	}
	if n := len(d.Leases()); n != 4*keep {
		t.Errorf("%d leases kept, want the bound %d", n, 4*keep)
	}
	if n := len(d.Active()); n != 0 {
		t.Errorf("%d transfers still active", n)
	}
}
