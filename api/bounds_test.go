package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/record"
)

// manyRecords is a fake with n records, each carrying pad bytes of labels.
func manyRecords(n, pad int) *fake {
	f := &fake{}
	for i := range n {
		f.recs = append(f.recs, record.Record{ID: int64(i + 1), Time: now.Add(time.Duration(i/3) * time.Second),
			Proto: "http", File: "big.img", Outcome: "ok",
			Labels: map[string]string{"pad": strings.Repeat("x", pad)}})
	}
	return f
}

// TestPaging: limit=0 used to return every record, built in memory at
// once (238 records: 19.9 MB, +260 MB RSS). Now no request reads more than
// a page from the store, and the Link header's cursor walks the rest, each
// record once.
func TestPaging(t *testing.T) {
	src := manyRecords(250, 0)
	h := New(src, nil, Limits{MaxPage: 100})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	seen := map[int64]bool{}
	var order []int64
	path := "/api/fetches?limit=0"
	pages := 0
	for path != "" && pages < 10 {
		pages++
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var recs []record.Record
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := jsonUnmarshal(body, &recs); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v\n%s", path, resp.StatusCode, err, body)
		}
		for _, r := range recs {
			if seen[r.ID] {
				t.Errorf("record %d on two pages", r.ID)
			}
			seen[r.ID] = true
			order = append(order, r.ID)
		}
		path = ""
		if l := resp.Header.Get("Link"); l != "" {
			path = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
		}
	}
	if len(seen) != 250 || pages != 3 {
		t.Errorf("read %d records in %d pages, want 250 in 3", len(seen), pages)
	}
	if order[0] != 250 || order[len(order)-1] != 1 {
		t.Errorf("order %d..%d, want newest first (250..1)", order[0], order[len(order)-1])
	}
	for _, f := range src.filters {
		if f.Limit > 100 {
			t.Errorf("a request read %d records from the store; the page is 100", f.Limit)
		}
	}
	if status, body := get(t, srv, "/api/fetches?before=nonsense", nil); status != 400 || !strings.Contains(body, "cursor") {
		t.Errorf("bad cursor: %d %s", status, body)
	}
}

// TestReportCap: a table over more records than admin.max_report_records
// is refused with advice, not built.
func TestReportCap(t *testing.T) {
	srv := httptest.NewServer(New(manyRecords(10, 0), nil, Limits{MaxReportRecords: 5}))
	t.Cleanup(srv.Close)
	status, body := get(t, srv, "/api/report?table=fetches", nil)
	if status != 400 || !strings.Contains(body, "narrow") || !strings.Contains(body, "admin.max_report_records") {
		t.Errorf("report over the cap: %d %s", status, body)
	}
	if status, _ := get(t, srv, "/api/report?table=fetches&limit=4", nil); status != 200 {
		t.Errorf("report under the cap: %d", status)
	}
}

// TestStalledReaderDropped: a client that asks for a big answer and reads
// nothing used to hold the handler (and the answer) for as long as it
// liked (150 s and more). Now it is dropped after the stall timeout.
func TestStalledReaderDropped(t *testing.T) {
	src := manyRecords(1000, 4096) // ~4 MB: far more than the socket buffers hold
	h := New(src, nil, Limits{StallTimeout: 300 * time.Millisecond, WriteTimeout: 30 * time.Second})
	done := make(chan time.Duration, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		done <- time.Since(start)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET /api/fetches?limit=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case took := <-done:
		t.Logf("handler returned %s after the request, the client having read nothing", took.Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatal("handler still writing to a client that reads nothing, 15 s on (stall timeout 300 ms)")
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
