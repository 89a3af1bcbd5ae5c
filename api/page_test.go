package api

import (
	"context"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/record"
)

// generated is a Source of n records made as they are read (ids n..1,
// newest first), each with pad bytes of labels, so the Source itself holds
// none of them. After each record made it collects garbage and notes the
// live heap above what it was when the request began: peak is the most
// the request held at once while the store was being read.
type generated struct {
	n, pad int
	base   uint64
	peak   uint64
	rows   int
}

func (g *generated) record(id int) record.Record {
	return record.Record{ID: int64(id), Time: now.Add(time.Duration(id) * time.Second), Proto: "http",
		Direction: "rx", ClientMAC: "52:54:00:12:34:56", ClientIP: "192.168.50.101", File: "big.img",
		Outcome: "ok", Labels: map[string]string{"pad": strings.Repeat("x", g.pad), "n": strconv.Itoa(id)}}
}

// each makes the records flt selects (Before and Limit, as the store does).
func (g *generated) each(flt record.Filter, fn func(*record.Record) error) error {
	sent := 0
	for id := g.n; id >= 1 && (flt.Limit <= 0 || sent < flt.Limit); id-- {
		r := g.record(id)
		if b := flt.Before; !b.IsZero() && !(r.Time.Before(b.Time) || r.Time.Equal(b.Time) && r.ID < b.ID) {
			continue
		}
		sent++
		g.rows++
		if err := fn(&r); err != nil {
			return err
		}
		g.sample()
	}
	return nil
}

func (g *generated) sample() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > g.base && ms.HeapAlloc-g.base > g.peak {
		g.peak = ms.HeapAlloc - g.base
	}
}

func (g *generated) start() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g.base = ms.HeapAlloc
}

func (g *generated) Query(_ context.Context, flt record.Filter) ([]record.Record, error) {
	var out []record.Record
	err := g.each(flt, func(r *record.Record) error { out = append(out, *r); return nil })
	return out, err
}

func (g *generated) Each(_ context.Context, flt record.Filter, fn func(*record.Record) error) error {
	return g.each(flt, fn)
}

func (g *generated) Get(context.Context, int64) (record.Record, error) {
	return record.Record{}, record.ErrNotFound
}

func (g *generated) Intervals(context.Context, int64) ([]record.Interval, error) { return nil, nil }

// discard is a ResponseWriter that keeps nothing of the body, so what the
// test measures is the handler's own memory.
type discard struct {
	h      http.Header
	status int
	n      int64
	head   []byte // the first bytes, to check the answer's shape
	tail   []byte
}

func (d *discard) Header() http.Header { return d.h }
func (d *discard) WriteHeader(s int)   { d.status = s }
func (d *discard) Write(p []byte) (int, error) {
	if len(d.head) < 64 {
		d.head = append(d.head, p[:min(len(p), 64)]...)
	}
	d.tail = append(d.tail[:0], p[max(0, len(p)-64):]...)
	d.n += int64(len(p))
	return len(p), nil
}

// readAll walks every page of /api/fetches?limit=0 over g, returning the
// pages read, the bytes sent and the records per page.
func readAll(t *testing.T, h *Handler, g *generated) (pages int, sent int64, perPage []int) {
	t.Helper()
	path := "/api/fetches?limit=0"
	for path != "" && pages < 1000 {
		pages++
		req, err := http.NewRequest("GET", path, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := &discard{h: http.Header{}, status: 200}
		rows := g.rows
		h.ServeHTTP(d, req)
		if d.status != 200 || d.head[0] != '[' || !strings.HasSuffix(string(d.tail), "]\n") {
			t.Fatalf("%s: status %d, answer %q...%q", path, d.status, d.head, d.tail)
		}
		sent += d.n
		perPage = append(perPage, g.rows-rows)
		path = ""
		if l := d.h.Get("Link"); l != "" {
			u, err := url.Parse(strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`))
			if err != nil {
				t.Fatal(err)
			}
			path = u.String()
		}
	}
	return pages, sent, perPage
}

// TestPageMemoryBounded: a page of old, oversized records (written before
// label budgets: 128 KiB of labels each) used to be read whole from the
// store before the first byte went out, so one request held max_page of
// them at once (here 300: ~38 MiB live for an answer a small-record page
// answers in well under one). Now a page is read row by row and ends once
// admin.max_page_mib of answer is encoded; the next page goes on from
// there. The test compares the most the request holds at once with that of
// a page of small records in the same process, as a ratio.
func TestPageMemoryBounded(t *testing.T) {
	lim := Limits{MaxPage: 1000, MaxPageBytes: 1 << 20}

	small := &generated{n: 1000, pad: 64}
	h := New(small, nil, lim)
	small.start()
	pages, sent, _ := readAll(t, h, small)
	t.Logf("small records: %d page(s), %d bytes, %d rows read, peak %.2f MiB held", pages, sent, small.rows,
		float64(small.peak)/(1<<20))

	big := &generated{n: 300, pad: 128 << 10}
	h = New(big, nil, lim)
	big.start()
	pages, sent, per := readAll(t, h, big)
	t.Logf("oversized records: %d page(s) of %v records, %.1f MiB, %d rows read, peak %.2f MiB held",
		pages, per, float64(sent)/(1<<20), big.rows, float64(big.peak)/(1<<20))

	// Every record was sent, once: the pages' rows add up (a page that
	// ends early reads one row past its end, which the next page sends).
	sum := 0
	for _, n := range per {
		sum += n
	}
	if want := big.n + pages - 1; sum != want {
		t.Errorf("rows read %d over %d pages, want %d (each record once, plus one look-ahead per page)", sum, pages, want)
	}
	if sent < int64(big.n)*int64(big.pad) {
		t.Errorf("sent %d bytes, less than the %d of the records' labels", sent, big.n*big.pad)
	}
	ratio := float64(big.peak) / float64(max(small.peak, 1))
	t.Logf("peak held, oversized / small: %.1f (records are %dx larger)", ratio, big.pad/small.pad)
	if ratio > 8 {
		t.Errorf("a page of oversized records held %.1f MiB at once, %.1fx a page of small records (%.2f MiB): the page is not bounded",
			float64(big.peak)/(1<<20), ratio, float64(small.peak)/(1<<20))
	}
}
