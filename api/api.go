// Package api serves the measurement records and the report tables over
// HTTP as JSON, for dashboards and scripts. The admin listener
// (admin.listen, loopback by default) mounts it at /api/; with http.api
// the boot port does too:
//
//	GET /api/fetches                    records, newest first, one page (filters below)
//	GET /api/fetches/{id}               one record
//	GET /api/fetches/{id}/intervals     its interval samples
//	GET /api/report?table=NAME          a report table: window-offload, direction-mtu,
//	                                    clients, linkspeed, tftp, fetches, servers; intervals or netperf with &id=N
//
// Filters, as query parameters, are those of pxeperf report: client (MAC,
// IP or host; mac= takes a MAC alone), file (name or glob), since (2h, 7d
// or an RFC 3339 time), label=k=v (repeatable), server and site
// (server.name and server.site of the pxeperf that measured it, in a store
// many share), kind (image, boot, config, api, error, probe, stream, event;
// repeatable or a comma list; without it every kind of fetch, events, the
// milestones of package notify, only when named; a table's
// throughput counts these kinds, by default images and streams), min_size
// (bytes, or 64K, 1M). /api/report also takes merge (source, iface, mtu,
// speed, link or all; repeatable or a comma list): the split keys whose
// values may share a row (by default a row never mixes them). /api/fetches answers pages: limit (default 100,
// at most Limits.MaxPage; 0 asks for a whole page; a page ends early past
// Limits.MaxPageBytes of JSON), and when more records
// match, a Link header rel="next" (and X-Next-Cursor) whose before=CURSOR
// reads the next page. A report reads at most Limits.MaxReportRecords
// records; past that it is refused (narrow the filter).
//
// Answers are streamed: a client that reads nothing for StallTimeout, or
// takes longer than WriteTimeout in all, is dropped. Errors come back as
// {"error": "..."}: 400 for a bad parameter, 404 for an unknown record, 503
// while the record store cannot be opened.
package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// Source is where records come from: a *record.Store, or a fake in tests.
// Each, as record.Store.Each, hands over the records Query would return one
// at a time, so a page is never held whole.
type Source interface {
	Query(ctx context.Context, f record.Filter) ([]record.Record, error)
	Each(ctx context.Context, f record.Filter, fn func(*record.Record) error) error
	Get(ctx context.Context, id int64) (record.Record, error)
	Intervals(ctx context.Context, id int64) ([]record.Interval, error)
}

// ErrUnavailable marks a Source error meaning "cannot be read now" (no
// store yet, store locked): the API answers 503.
var ErrUnavailable = errors.New("record store unavailable")

// DefaultLimit is how many records /api/fetches returns without a limit
// parameter.
const DefaultLimit = 100

// Limits bound what one API request may cost. Zero fields take the
// defaults (those of the admin section of the config).
type Limits struct {
	// MaxPage caps limit= on /api/fetches. Default 1000.
	MaxPage int
	// MaxPageBytes ends a /api/fetches page early once this much of it is
	// encoded (at least one record). Default 4 MiB.
	MaxPageBytes int
	// MaxReportRecords caps the records one report table reads. Default 50000.
	MaxReportRecords int
	// StallTimeout drops an answer its client does not read. Default 10s.
	StallTimeout time.Duration
	// WriteTimeout bounds one whole answer. Default 60s.
	WriteTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxPage <= 0 {
		l.MaxPage = 1000
	}
	if l.MaxPageBytes <= 0 {
		l.MaxPageBytes = 4 << 20
	}
	if l.MaxReportRecords <= 0 {
		l.MaxReportRecords = 50000
	}
	if l.StallTimeout <= 0 {
		l.StallTimeout = 10 * time.Second
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 60 * time.Second
	}
	return l
}

// Handler is the API's http.Handler.
type Handler struct {
	src    Source
	logger *slog.Logger
	lim    Limits
	now    func() time.Time
	mux    *http.ServeMux
}

// New builds the handler over src; logger nil: discard.
func New(src Source, logger *slog.Logger, lim Limits) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{src: src, logger: logger, lim: lim.withDefaults(), now: time.Now, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /api/fetches", h.fetches)
	h.mux.HandleFunc("GET /api/fetches/{id}", h.fetch)
	h.mux.HandleFunc("GET /api/fetches/{id}/intervals", h.intervals)
	h.mux.HandleFunc("GET /api/report", h.report)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, errors.New("no such API path: use /api/fetches, /api/fetches/{id}, /api/fetches/{id}/intervals or /api/report?table=NAME"))
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.fail(w, r, http.StatusMethodNotAllowed, errors.New("the pxeperf API is read-only: use GET"))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// filter reads the filter query parameters.
func (h *Handler) filter(r *http.Request, defLimit string) (record.Filter, error) {
	q := r.URL.Query()
	limit := defLimit
	if q.Has("limit") {
		limit = q.Get("limit")
	}
	client := q.Get("client")
	if q.Has("mac") {
		mac, err := net.ParseMAC(q.Get("mac"))
		if err != nil || len(mac) != 6 {
			return record.Filter{}, fmt.Errorf("mac %q: want a MAC address, e.g. mac=52:54:00:12:34:56", q.Get("mac"))
		}
		if client != "" && client != mac.String() {
			return record.Filter{}, fmt.Errorf("mac %s and client %q: give one of them", mac, client)
		}
		client = mac.String()
	}
	return report.ParseFilter(report.FilterArgs{
		Client: client, File: q.Get("file"), Since: q.Get("since"), Labels: q["label"], Limit: limit,
		Server: q.Get("server"), Site: q.Get("site"),
		Kind: strings.Join(q["kind"], ","), MinSize: q.Get("min_size"),
	}, h.now())
}

// cursor is a page boundary: the last record's time (ns) and id.
func cursor(r record.Record) string {
	return strconv.FormatInt(r.Time.UnixNano(), 10) + "." + strconv.FormatInt(r.ID, 10)
}

func parseCursor(s string) (record.Position, error) {
	ns, id, ok := strings.Cut(s, ".")
	t, err1 := strconv.ParseInt(ns, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || n < 0 {
		return record.Position{}, fmt.Errorf("before %q: use the cursor the Link header (rel=\"next\") of the previous page names", s)
	}
	return record.Position{Time: time.Unix(0, t).UTC(), ID: n}, nil
}

func (h *Handler) fetches(w http.ResponseWriter, r *http.Request) {
	f, err := h.filter(r, strconv.Itoa(DefaultLimit))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	// limit=0 (or one past MaxPage) is a whole page, and the rest comes by
	// cursor: no answer holds every record in memory at once.
	if f.Limit <= 0 || f.Limit > h.lim.MaxPage {
		f.Limit = h.lim.MaxPage
	}
	if b := r.URL.Query().Get("before"); b != "" {
		if f.Before, err = parseCursor(b); err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
	}
	// The page is read row by row and encoded as it comes; it ends at
	// f.Limit records or once MaxPageBytes are encoded, so an old record
	// with megabytes of labels costs its own size, not a page of them.
	// What is encoded is held until the last row: the Link header that
	// names the next page goes before the body.
	var (
		page bytes.Buffer
		n    int
		last string
		full bool // ended by MaxPageBytes, a record left over
	)
	enc := json.NewEncoder(&page)
	page.WriteString("[")
	err = h.src.Each(r.Context(), f, func(rec *record.Record) error {
		if n > 0 && page.Len() >= h.lim.MaxPageBytes {
			full = true
			return errPageFull
		}
		if n > 0 {
			page.WriteString(",")
		}
		page.WriteString("\n")
		n++
		last = cursor(*rec)
		return enc.Encode(rec)
	})
	if err != nil && !errors.Is(err, errPageFull) {
		h.sourceError(w, r, err)
		return
	}
	page.WriteString("]\n")
	if full || n == f.Limit && n > 0 {
		q := r.URL.Query()
		q.Set("before", last)
		q.Set("limit", strconv.Itoa(f.Limit))
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		w.Header().Set("Link", "<"+u.String()+`>; rel="next"`)
		w.Header().Set("X-Next-Cursor", last)
	}
	h.stream(w, r, func(bw io.Writer) error {
		_, err := page.WriteTo(bw)
		return err
	})
}

// errPageFull stops reading a page at Limits.MaxPageBytes.
var errPageFull = errors.New("page full")

func (h *Handler) id(w http.ResponseWriter, r *http.Request) (int64, bool) {
	s := r.PathValue("id")
	if s == "" {
		s = r.URL.Query().Get("id")
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, http.StatusBadRequest, errors.New("record id "+strconv.Quote(s)+": want a positive number, as /api/fetches lists them"))
		return 0, false
	}
	return id, true
}

// named is the record the request names by id, with its id; ok is false
// when there is none to answer with, and the error is answered already.
func (h *Handler) named(w http.ResponseWriter, r *http.Request) (id int64, rec record.Record, ok bool) {
	if id, ok = h.id(w, r); !ok {
		return 0, rec, false
	}
	rec, err := h.src.Get(r.Context(), id)
	if err != nil {
		h.sourceError(w, r, err)
		return 0, rec, false
	}
	return id, rec, true
}

func (h *Handler) fetch(w http.ResponseWriter, r *http.Request) {
	if _, rec, ok := h.named(w, r); ok {
		h.json(w, r, rec)
	}
}

func (h *Handler) intervals(w http.ResponseWriter, r *http.Request) {
	id, _, ok := h.named(w, r)
	if !ok {
		return
	}
	ivs, err := h.src.Intervals(r.Context(), id)
	if err != nil {
		h.sourceError(w, r, err)
		return
	}
	if ivs == nil {
		ivs = []record.Interval{}
	}
	h.json(w, r, ivs)
}

func (h *Handler) report(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("table")
	var t report.Table
	switch name {
	case "intervals", "netperf":
		id, rec, ok := h.named(w, r)
		if !ok {
			return
		}
		if name == "netperf" {
			t = report.Netperf(rec)
			break
		}
		ivs, err := h.src.Intervals(r.Context(), id)
		if err != nil {
			h.sourceError(w, r, err)
			return
		}
		t = report.Intervals(rec, ivs)
	default:
		if name == "" {
			h.fail(w, r, http.StatusBadRequest, errors.New("missing table: use table=window-offload, direction-mtu, clients, linkspeed, tftp, fetches, servers, intervals&id=N or netperf&id=N"))
			return
		}
		if _, err := report.Build(name, nil); err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		f, err := h.filter(r, "")
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		// A table needs every matching record in memory: bounded. One
		// more than the cap tells whether the cap was reached.
		want := f.Limit
		if want <= 0 || want > h.lim.MaxReportRecords {
			f.Limit = h.lim.MaxReportRecords + 1
		}
		recs, err := h.src.Query(r.Context(), f)
		if err != nil {
			h.sourceError(w, r, err)
			return
		}
		if len(recs) > h.lim.MaxReportRecords {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("more than %d records match: narrow the table with since=, client=, file= or label= (or raise admin.max_report_records)", h.lim.MaxReportRecords))
			return
		}
		merge, err := report.ParseMerge(strings.Join(r.URL.Query()["merge"], ","))
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		slices.Reverse(recs) // a limited query is newest first; tables read oldest first
		t, _ = report.BuildWith(name, recs, report.Options{Kinds: f.Kinds, Merge: merge})
	}
	h.stream(w, r, func(bw io.Writer) error { return report.Render(bw, t, report.JSON) })
}

func (h *Handler) sourceError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, record.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, err)
	case errors.Is(err, ErrUnavailable):
		h.fail(w, r, http.StatusServiceUnavailable, err)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
	default:
		h.logger.Warn("api: reading records failed", "path", r.URL.Path, "err", err)
		h.fail(w, r, http.StatusInternalServerError, err)
	}
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	h.logger.Debug("api request failed", "path", r.URL.Path, "status", status, "err", err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func (h *Handler) json(w http.ResponseWriter, r *http.Request, v any) {
	h.stream(w, r, func(bw io.Writer) error {
		enc := json.NewEncoder(bw)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

// stream writes a JSON answer through a buffer whose every flush must
// reach the client within StallTimeout, and the whole answer within
// WriteTimeout (write deadlines on the connection); a client that stops
// reading is dropped, and its answer is never held whole in memory.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, write func(io.Writer) error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	sw := &stallWriter{w: w, rc: http.NewResponseController(w), stall: h.lim.StallTimeout,
		end: time.Now().Add(h.lim.WriteTimeout)}
	bw := bufio.NewWriterSize(sw, 32<<10)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	// Clear the deadline: the connection may carry the next request.
	_ = sw.rc.SetWriteDeadline(time.Time{})
	if err != nil && !errors.Is(err, context.Canceled) {
		h.logger.Info("api: answer dropped", "path", r.URL.Path, "client", r.RemoteAddr, "sent", sw.n, "err", err,
			"stall_timeout", h.lim.StallTimeout, "write_timeout", h.lim.WriteTimeout)
	}
}

// stallWriter moves the write deadline before each write.
type stallWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	end   time.Time
	n     int64
	err   error
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	d := time.Now().Add(s.stall)
	if d.After(s.end) {
		d = s.end
	}
	_ = s.rc.SetWriteDeadline(d) // unsupported writers (tests): no deadline
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err == nil {
		err = s.rc.Flush()
		if errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	s.err = err
	return n, err
}

// Lazy is a Source that opens the real one on first use, and again after
// a failed open, so the API works as soon as the store exists (serve may
// start before its first record). Errors opening are wrapped in
// ErrUnavailable.
type Lazy struct {
	open func() (Source, error)
	mu   sync.Mutex
	src  Source
}

// NewLazy returns a Lazy Source over open.
func NewLazy(open func() (Source, error)) *Lazy { return &Lazy{open: open} }

func (l *Lazy) get() (Source, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.src != nil {
		return l.src, nil
	}
	src, err := l.open()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	l.src = src
	return src, nil
}

// Each implements Source.
func (l *Lazy) Each(ctx context.Context, f record.Filter, fn func(*record.Record) error) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.Each(ctx, f, fn)
}

// Query implements Source.
func (l *Lazy) Query(ctx context.Context, f record.Filter) ([]record.Record, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.Query(ctx, f)
}

// Get implements Source.
func (l *Lazy) Get(ctx context.Context, id int64) (record.Record, error) {
	s, err := l.get()
	if err != nil {
		return record.Record{}, err
	}
	return s.Get(ctx, id)
}

// Intervals implements Source.
func (l *Lazy) Intervals(ctx context.Context, id int64) ([]record.Interval, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.Intervals(ctx, id)
}

// Close closes the opened Source when it has a Close method.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.src.(interface{ Close() error }); ok {
		l.src = nil
		return c.Close()
	}
	return nil
}
