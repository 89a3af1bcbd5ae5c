// Package api serves the measurement records and the report tables over
// HTTP as JSON, for dashboards and scripts. httpboot mounts it at /api/:
//
//	GET /api/fetches                    records, newest first (filters below; limit default 100, 0 all)
//	GET /api/fetches/{id}               one record
//	GET /api/fetches/{id}/intervals     its interval samples
//	GET /api/report?table=NAME          a report table: window-offload, direction-mtu,
//	                                    clients, linkspeed, tftp, fetches; intervals or netperf with &id=N
//
// Filters, as query parameters, are those of pxeperf report: client (MAC,
// IP or host), file (name or glob), since (2h, 7d or an RFC 3339 time),
// label=k=v (repeatable), limit. Errors come back as {"error": "..."}: 400
// for a bad parameter, 404 for an unknown record, 503 while the record
// store cannot be opened.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// Source is where records come from: a *record.Store, or a fake in tests.
type Source interface {
	Query(ctx context.Context, f record.Filter) ([]record.Record, error)
	Get(ctx context.Context, id int64) (record.Record, error)
	Intervals(ctx context.Context, id int64) ([]record.Interval, error)
}

// ErrUnavailable marks a Source error meaning "cannot be read now" (no
// store yet, store locked): the API answers 503.
var ErrUnavailable = errors.New("record store unavailable")

// DefaultLimit is how many records /api/fetches returns without a limit
// parameter.
const DefaultLimit = 100

// Handler is the API's http.Handler.
type Handler struct {
	src    Source
	logger *slog.Logger
	now    func() time.Time
	mux    *http.ServeMux
}

// New builds the handler over src; logger nil: discard.
func New(src Source, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{src: src, logger: logger, now: time.Now, mux: http.NewServeMux()}
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
	return report.ParseFilter(report.FilterArgs{
		Client: q.Get("client"), File: q.Get("file"), Since: q.Get("since"), Labels: q["label"], Limit: limit,
	}, h.now())
}

func (h *Handler) fetches(w http.ResponseWriter, r *http.Request) {
	f, err := h.filter(r, strconv.Itoa(DefaultLimit))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	recs, err := h.src.Query(r.Context(), f)
	if err != nil {
		h.sourceError(w, r, err)
		return
	}
	if recs == nil {
		recs = []record.Record{}
	}
	h.json(w, recs)
}

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

func (h *Handler) fetch(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	rec, err := h.src.Get(r.Context(), id)
	if err != nil {
		h.sourceError(w, r, err)
		return
	}
	h.json(w, rec)
}

func (h *Handler) intervals(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	if _, err := h.src.Get(r.Context(), id); err != nil {
		h.sourceError(w, r, err)
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
	h.json(w, ivs)
}

func (h *Handler) report(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("table")
	var t report.Table
	switch name {
	case "intervals", "netperf":
		id, ok := h.id(w, r)
		if !ok {
			return
		}
		rec, err := h.src.Get(r.Context(), id)
		if err != nil {
			h.sourceError(w, r, err)
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
			h.fail(w, r, http.StatusBadRequest, errors.New("missing table: use table=window-offload, direction-mtu, clients, linkspeed, tftp, fetches, intervals&id=N or netperf&id=N"))
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
		recs, err := h.src.Query(r.Context(), f)
		if err != nil {
			h.sourceError(w, r, err)
			return
		}
		t, _ = report.Build(name, recs)
	}
	var b bytes.Buffer
	if err := report.Render(&b, t, report.JSON); err != nil {
		h.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
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

func (h *Handler) json(w http.ResponseWriter, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
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
