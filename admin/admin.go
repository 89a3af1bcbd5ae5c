// Package admin is pxeperf's admin listener: an HTTP server of its own,
// apart from the boot port every board can reach, for what only the lab's
// people should read (the record API at /api/, the dashboard at /, the
// Prometheus metrics at /metrics, all mounted by serve). It
// listens on loopback by default (admin.listen 127.0.0.1:9069) and can
// require a bearer token (admin.token_file), compared in constant time.
//
// Like every service: New validates and binds, Serve(ctx) returns nil
// when ctx ends.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/internal/refuse"
)

// Options are what a Server is built from.
type Options struct {
	// Listen is HOST:PORT. Default 127.0.0.1:9069.
	Listen string
	// Token, when set, is required on every request as
	// "Authorization: Bearer TOKEN".
	Token string
	// WriteTimeout bounds one answer (handlers may enforce shorter stall
	// timeouts of their own). Default 60s.
	WriteTimeout time.Duration
	// ShutdownGrace lets answers in flight finish at shutdown. Default 5s.
	ShutdownGrace time.Duration
	Logger        *slog.Logger
	// Refused counts refused requests (bad token); nil: a log of its own.
	Refused *refuse.Log
}

// DefaultListen is the admin listener's address when none is set.
const DefaultListen = "127.0.0.1:9069"

// refuseToken is the refusal reason for a missing or wrong token.
const refuseToken = "admin: missing or wrong token"

// Server is the admin listener. Add handlers with Handle before Serve.
type Server struct {
	opt     Options
	ln      net.Listener
	srv     *http.Server
	mux     *http.ServeMux
	token   [sha256.Size]byte
	started time.Time
}

// New checks the options and binds the listener.
func New(opt Options) (*Server, error) {
	if opt.Listen == "" {
		opt.Listen = DefaultListen
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Refused == nil {
		opt.Refused = refuse.New(opt.Logger, 0)
	}
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = 60 * time.Second
	}
	if opt.ShutdownGrace <= 0 {
		opt.ShutdownGrace = 5 * time.Second
	}
	ln, err := net.Listen("tcp", opt.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin: listening on %s: %w (free the port, or set admin.listen / --admin-addr, or --admin-addr off)", opt.Listen, err)
	}
	s := &Server{opt: opt, ln: ln, mux: http.NewServeMux(), started: time.Now()}
	if opt.Token != "" {
		s.token = sha256.Sum256([]byte(opt.Token))
	}
	s.mux.HandleFunc("GET /healthz", s.health)
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		WriteTimeout:      opt.WriteTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(opt.Logger.Handler(), slog.LevelDebug),
	}
	if opt.Token == "" && !loopback(ln.Addr()) {
		opt.Logger.Warn("admin listener reachable beyond this machine without a token: anyone who reaches it reads every record; set admin.token_file",
			"addr", ln.Addr().String())
	}
	return s, nil
}

// Handle registers h for pattern (http.ServeMux syntax), behind the token.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Refused is the log of refused requests.
func (s *Server) Refused() *refuse.Log { return s.opt.Refused }

// Serve serves until ctx ends, then lets answers in flight finish for up to
// ShutdownGrace. It returns nil when ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	s.opt.Logger.Info("admin listener serving", "addr", s.ln.Addr().String(), "token", s.opt.Token != "")
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("admin: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opt.ShutdownGrace)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		_ = s.srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin: %w", err)
	}
	return nil
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opt.Token != "" && !s.authorized(r) {
		client := r.RemoteAddr
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			client = ap.Addr().String()
		}
		s.opt.Refused.Refuse(refuseToken, client, "path", r.URL.Path)
		w.Header().Set("WWW-Authenticate", `Bearer realm="pxeperf admin"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "this pxeperf admin listener needs a token: send the header " +
			"\"Authorization: Bearer TOKEN\" with the token in the server's admin.token_file"})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized compares the bearer token in constant time (hashes of equal
// length, so neither the token nor its length leaks through timing).
//
// A browser's EventSource and <img> cannot send the header, so the
// dashboard passes the token as the access_token query parameter instead
// (RFC 6750 section 2.3); the header wins when both are there.
func (s *Server) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		tok = r.URL.Query().Get("access_token")
		if tok == "" {
			return false
		}
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status":   "ok",
		"uptime_s": time.Since(s.started).Round(time.Millisecond).Seconds(),
		"refused":  s.opt.Refused.Counts(),
	})
}

func loopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
