package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/record"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fake is an in-memory Source that remembers the filters it was asked.
type fake struct {
	mu      sync.Mutex
	recs    []record.Record
	ivs     map[int64][]record.Interval
	filters []record.Filter
}

func (f *fake) Query(_ context.Context, flt record.Filter) ([]record.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = append(f.filters, flt)
	var out []record.Record
	for _, r := range f.recs {
		if flt.Client != "" && flt.Client != r.ClientMAC && flt.Client != r.ClientIP && flt.Client != r.Host {
			continue
		}
		if r.Time.Before(flt.Since) {
			continue
		}
		ok := true
		for k, v := range flt.Labels {
			ok = ok && r.Labels[k] == v
		}
		if ok {
			out = append(out, r)
		}
	}
	if flt.Limit > 0 {
		// As the store: newest first (time, then id), from the cursor on.
		slices.Reverse(out)
		out = slices.DeleteFunc(out, func(r record.Record) bool {
			b := flt.Before
			return !b.IsZero() && !(r.Time.Before(b.Time) || r.Time.Equal(b.Time) && r.ID < b.ID)
		})
		if len(out) > flt.Limit {
			out = out[:flt.Limit]
		}
	}
	return out, nil
}

func (f *fake) Get(_ context.Context, id int64) (record.Record, error) {
	for _, r := range f.recs {
		if r.ID == id {
			return r, nil
		}
	}
	return record.Record{}, fmt.Errorf("record %d: %w", id, record.ErrNotFound)
}

func (f *fake) Intervals(_ context.Context, id int64) ([]record.Interval, error) {
	return f.ivs[id], nil
}

func newFake() *fake {
	var recs []record.Record
	for i, c := range []struct {
		wnd  uint32
		off  string
		mbps float64
	}{{16384, "off", 528}, {16384, "on", 696}, {65532, "off", 536}, {65532, "on", 896}} {
		recs = append(recs, record.Record{
			ID: int64(i + 1), Time: now.Add(-time.Duration(4-i) * time.Hour), Proto: "http", Direction: "rx",
			ClientMAC: "52:54:00:12:34:56", ClientIP: "192.168.50.101", Host: "zynq1", File: "big.img",
			Bytes: 500e6, Duration: time.Second, Mbps: c.mbps, Outcome: "ok", WndMax: c.wnd, MTU: 1500,
			Labels: map[string]string{"rx_offload": c.off},
		})
	}
	return &fake{recs: recs, ivs: map[int64][]record.Interval{
		1: {{RecordID: 1, Start: 0, End: time.Second, Bytes: 66e6, Cwnd: 14480}},
	}}
}

func newServer(t *testing.T, src Source) *httptest.Server {
	t.Helper()
	h := New(src, nil, Limits{})
	h.now = func() time.Time { return now }
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string, v any) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, body)
		}
	}
	return resp.StatusCode, string(body)
}

func TestFetches(t *testing.T) {
	src := newFake()
	srv := newServer(t, src)
	q := url.Values{"client": {"zynq1"}, "since": {"3h"}, "label": {"rx_offload=off"}, "limit": {"5"}, "file": {"*.img"}}
	var got []record.Record
	if status, body := get(t, srv, "/api/fetches?"+q.Encode(), &got); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	want := record.Filter{Client: "zynq1", File: "*.img", Since: now.Add(-3 * time.Hour),
		Labels: map[string]string{"rx_offload": "off"}, Limit: 5}
	if diff := cmp.Diff(want, src.filters[0]); diff != "" {
		t.Errorf("filter (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]record.Record{src.recs[2]}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}

	// No limit: DefaultLimit; limit=0: a whole page (no longer everything).
	get(t, srv, "/api/fetches", &got)
	get(t, srv, "/api/fetches?limit=0", &got)
	if src.filters[1].Limit != DefaultLimit || src.filters[2].Limit != 1000 || len(got) != 4 {
		t.Errorf("limits %d, %d (%d records)", src.filters[1].Limit, src.filters[2].Limit, len(got))
	}
	// Nothing matches: [], not null.
	if _, body := get(t, srv, "/api/fetches?client=nobody", nil); strings.TrimSpace(body) != "[]" {
		t.Errorf("empty answer %q, want []", body)
	}
}

func TestErrors(t *testing.T) {
	srv := newServer(t, newFake())
	tests := map[string]struct {
		path   string
		status int
		want   string
	}{
		"label without =":  {"/api/fetches?label=rx_offload", 400, "write key=value"},
		"bad since":        {"/api/fetches?since=yesterday", 400, "duration back from now"},
		"bad limit":        {"/api/fetches?limit=-1", 400, "limit"},
		"unknown table":    {"/api/report?table=windows", 400, "unknown table"},
		"no table":         {"/api/report", 400, "missing table"},
		"report bad label": {"/api/report?table=clients&label==x", 400, "key=value"},
		"unknown record":   {"/api/fetches/99", 404, "no such record"},
		"bad id":           {"/api/fetches/abc", 400, "positive number"},
		"netperf no id":    {"/api/report?table=netperf", 400, "positive number"},
		"intervals of 99":  {"/api/fetches/99/intervals", 404, "no such record"},
		"unknown path":     {"/api/nope", 404, "no such API path"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			status, body := get(t, srv, tc.path, nil)
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("error body is not JSON: %v: %s", err, body)
			}
			if status != tc.status || !strings.Contains(e.Error, tc.want) {
				t.Errorf("status %d, error %q; want %d and %q", status, e.Error, tc.status, tc.want)
			}
		})
	}
	resp, err := srv.Client().Post(srv.URL+"/api/fetches", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestReport(t *testing.T) {
	src := newFake()
	srv := newServer(t, src)
	var got struct {
		Table string `json:"table"`
		Rows  []struct {
			Window uint32 `json:"window"`
			Cells  map[string]struct {
				Median float64 `json:"median_mbps"`
				Count  int     `json:"count"`
			} `json:"cells"`
		} `json:"rows"`
	}
	if status, body := get(t, srv, "/api/report?table=window-offload&client=52:54:00:12:34:56", &got); status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if got.Table != "window-offload" || len(got.Rows) != 2 || got.Rows[1].Window != 65536 ||
		got.Rows[1].Cells["off"].Median != 536 || got.Rows[1].Cells["on"].Median != 896 {
		t.Errorf("window-offload: %+v", got)
	}
	if f := src.filters[0]; f.Client != "52:54:00:12:34:56" || f.Limit != 50001 {
		t.Errorf("filter %+v: want the client and max_report_records+1", f)
	}
	// The filters narrow the table.
	got.Rows = nil
	get(t, srv, "/api/report?table=window-offload&label=rx_offload=on", &got)
	if len(got.Rows) != 2 || got.Rows[0].Cells["off"].Count != 0 || got.Rows[0].Cells["on"].Count != 1 {
		t.Errorf("with rx_offload=on: %+v", got)
	}
	for _, table := range []string{"direction-mtu", "clients", "linkspeed", "fetches", "intervals&id=1", "netperf&id=1"} {
		var v map[string]any
		if status, body := get(t, srv, "/api/report?table="+table, &v); status != 200 || v["rows"] == nil {
			t.Errorf("%s: %d %s", table, status, body)
		}
	}
	var ivs []record.Interval
	if status, _ := get(t, srv, "/api/fetches/1/intervals", &ivs); status != 200 || len(ivs) != 1 || ivs[0].Bytes != 66e6 {
		t.Errorf("intervals: %d %+v", status, ivs)
	}
	var rec record.Record
	if status, _ := get(t, srv, "/api/fetches/2", &rec); status != 200 || rec.Mbps != 696 {
		t.Errorf("fetch 2: %d %+v", status, rec)
	}
}

// TestLazy: 503 with the reason while the store cannot be opened, then
// answers once it can; opened once.
func TestLazy(t *testing.T) {
	var opens int
	ready := false
	src := NewLazy(func() (Source, error) {
		opens++
		if !ready {
			return nil, errors.New("record store pxeperf-data/pxeperf.db: no such file (run pxeperf serve first)")
		}
		return newFake(), nil
	})
	srv := newServer(t, src)
	status, body := get(t, srv, "/api/fetches", nil)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "record store unavailable") || !strings.Contains(body, "run pxeperf serve first") {
		t.Errorf("before the store exists: %d %s", status, body)
	}
	ready = true
	var got []record.Record
	for range 2 {
		if status, body := get(t, srv, "/api/fetches", &got); status != 200 || len(got) != 4 {
			t.Errorf("once the store exists: %d %s", status, body)
		}
	}
	if opens != 2 {
		t.Errorf("opened %d times, want 2 (one failure, then once)", opens)
	}
	if err := src.Close(); err != nil {
		t.Error(err)
	}
}

// kind and min_size reach the store's filter, and a table's throughput
// counts the kinds asked for.
func TestKindFilter(t *testing.T) {
	src := newFake()
	srv := newServer(t, src)
	if status, body := get(t, srv, "/api/fetches?kind=image&kind=boot,config&min_size=64K", nil); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	f := src.filters[len(src.filters)-1]
	if d := cmp.Diff([]string{"image", "boot", "config"}, f.Kinds); d != "" || f.MinSize != 64<<10 {
		t.Errorf("filter kinds (-want +got):\n%s; min size %d", d, f.MinSize)
	}
	if status, body := get(t, srv, "/api/report?table=clients&kind=scripts", nil); status != http.StatusBadRequest ||
		!strings.Contains(body, `kind \"scripts\"`) {
		t.Errorf("bad kind: status %d: %s", status, body)
	}
	if status, body := get(t, srv, "/api/fetches?min_size=lots", nil); status != http.StatusBadRequest {
		t.Errorf("bad min_size: status %d: %s", status, body)
	}
}

// Each implements Source over Query's answer.
func (f *fake) Each(ctx context.Context, flt record.Filter, fn func(*record.Record) error) error {
	recs, err := f.Query(ctx, flt)
	if err != nil {
		return err
	}
	for i := range recs {
		if err := fn(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}
