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
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/internal/httpserve"
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
	// MaxConns caps the connections open at once (admin.max_conns,
	// default 256) and MaxConnsPerClient those of one address
	// (admin.max_conns_per_client, default 16): past either a new
	// connection is closed as soon as it is accepted, counted and logged,
	// so connections that never send a request cannot take the process's
	// descriptors, and one address cannot lock out the others.
	MaxConns, MaxConnsPerClient int
	// Names are the Host header values (without a port) accepted when
	// there is no token, besides IP literals and localhost: the server's
	// name and admin.allowed_hosts. A browser page whose name an attacker
	// points at this listener (DNS rebinding) sends its own name and is
	// refused.
	Names []string
}

// DefaultListen is the admin listener's address when none is set.
const DefaultListen = "127.0.0.1:9069"

// Refusal reasons, as counted by Refused and shown on /healthz.
const (
	refuseToken = "admin: missing or wrong token"
	refuseConns = "admin: too many connections"
	refuseHost  = "admin: Host not one of the listener's names"
)

// Connection budget defaults, used where Options leave them zero.
const (
	DefaultMaxConns          = 256
	DefaultMaxConnsPerClient = 16
)

// readHeaderTimeout is how long a connection may take to send its request
// line and headers: pxeperf status and a browser send them at once.
const readHeaderTimeout = 5 * time.Second

// Server is the admin listener. Add handlers with Handle before Serve.
type Server struct {
	opt     Options
	ln      net.Listener
	srv     *http.Server
	mux     *http.ServeMux
	token   [sha256.Size]byte
	names   map[string]bool // lower case; see Options.Names
	started time.Time
	health  func() (problems []string, records any) // see SetHealth

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
	if opt.MaxConns <= 0 {
		opt.MaxConns = DefaultMaxConns
	}
	if opt.MaxConnsPerClient <= 0 {
		opt.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	ln, err := net.Listen("tcp", opt.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin: listening on %s: %w (free the port, or set admin.listen / --admin-addr, or --admin-addr off)", opt.Listen, err)
	}
	s := &Server{opt: opt, mux: http.NewServeMux(), started: time.Now(), names: map[string]bool{"localhost": true}}
	s.ln = newLimitListener(ln, opt.MaxConns, opt.MaxConnsPerClient, opt.Refused)
	for _, n := range opt.Names {
		if n != "" {
			s.names[strings.ToLower(strings.TrimSuffix(n, "."))] = true
		}
	}
	if opt.Token != "" {
		s.token = sha256.Sum256([]byte(opt.Token))
	}
	s.mux.HandleFunc("GET /healthz", s.serveHealth)
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: readHeaderTimeout,
		ConnState:         connState,
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
	if err := httpserve.Serve(ctx, s.srv, s.ln, s.opt.ShutdownGrace, httpserve.Hooks{}); err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	return nil
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opt.Token == "" && !s.knownHost(r.Host) {
		// Without a token the Host header is what tells a browser tricked
		// into calling this listener (DNS rebinding) from a lab person's.
		s.opt.Refused.Refuse(refuseHost, clientOf(r), "host", r.Host, "path", r.URL.Path,
			"fix", "use localhost or an address, add the name to admin.allowed_hosts, or set admin.token_file")
		writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("this pxeperf admin listener has no token and answers only "+
			"to localhost, its addresses and names (%s), not Host %q (a page's name pointed here, DNS rebinding, is refused): "+
			"add the name to admin.allowed_hosts, or set admin.token_file", strings.Join(s.nameList(), ", "), r.Host))
		return
	}
	if s.opt.Token != "" && !Authorized(r, s.token) {
		s.opt.Refused.Refuse(refuseToken, clientOf(r), "path", r.URL.Path)
		unauthorized(w)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// RequireToken serves h only to requests carrying token (as the admin
// listener checks it: the Authorization header, or access_token), else
// 401 counted in refused; an empty token serves every request. serve puts
// it before the record API on the boot port (http.api).
func RequireToken(token string, refused *refuse.Log, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	sum := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Authorized(r, sum) {
			refused.Refuse(refuseToken, clientOf(r), "path", r.URL.Path)
			unauthorized(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="pxeperf admin"`)
	writeError(w, http.StatusUnauthorized, "this pxeperf admin listener needs a token: send the header "+
		"\"Authorization: Bearer TOKEN\" with the token in the server's admin.token_file")
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// clientOf is the request's client address without its port.
func clientOf(r *http.Request) string {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap().String()
	}
	return r.RemoteAddr
}

// knownHost reports whether host (a Host header, maybe with a port) is
// an IP literal, localhost or one of Options.Names. An IP literal cannot
// be a rebound name: the browser was sent to that address on purpose.
func (s *Server) knownHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return h != "" && s.names[strings.ToLower(h)]
}

func (s *Server) nameList() []string {
	out := []string{"IP addresses"}
	for n := range s.names {
		out = append(out, n)
	}
	slices.Sort(out[1:])
	return out
}

// Authorized compares the bearer token in constant time (hashes of equal
// length, so neither the token nor its length leaks through timing).
//
// A browser's EventSource and <img> cannot send the header, so the
// dashboard passes the token as the access_token query parameter instead
// (RFC 6750 section 2.3); the header wins when both are there. Only reads
// may carry it there: a write's URL lands in proxy and shell logs, so a
// write needs the header.
func Authorized(r *http.Request, token [sha256.Size]byte) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return false
		}
		tok = r.URL.Query().Get("access_token")
		if tok == "" {
			return false
		}
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], token[:]) == 1
}

// SetHealth makes /healthz report the record store's state, as fn
// returns it: with problems, the status is "degraded". Call it before
// Serve.
func (s *Server) SetHealth(fn func() (problems []string, records any)) { s.health = fn }

// healthBody is /healthz's answer: status "ok", or "degraded" with the
// problems named (the answer stays 200 either way: boards are still
// served, and a restart would not mend a full disk or a database that is
// away; monitoring reads status and problems), uptime, the refusals and
// the record store's state.
func (s *Server) healthBody() map[string]any {
	body := map[string]any{
		"status":   "ok",
		"uptime_s": time.Since(s.started).Round(time.Millisecond).Seconds(),
		"refused":  s.opt.Refused.Counts(),
	}
	if s.health != nil {
		problems, records := s.health()
		if len(problems) > 0 {
			body["status"], body["problems"] = "degraded", problems
		}
		if records != nil {
			body["records"] = records
		}
	}
	return body
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.healthBody())
}

func loopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// limitListener closes, as soon as they are accepted, connections past
// max in all or perClient from one address, unless an idle keep-alive
// connection (of that address, or for the total of any) can be closed to
// make room: its client just dials again, while a connection that never
// sent a request keeps its slot only until readHeaderTimeout. Closing at
// once keeps the kernel's accept queue moving, so a client within its
// budget still gets in while another holds its whole share.
type limitListener struct {
	net.Listener
	max, perClient int
	refused        *refuse.Log

	mu    sync.Mutex
	total int
	by    map[netip.Addr]map[*limitConn]struct{}
}

func newLimitListener(ln net.Listener, max, perClient int, refused *refuse.Log) *limitListener {
	return &limitListener{Listener: ln, max: max, perClient: perClient, refused: refused, by: map[netip.Addr]map[*limitConn]struct{}{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var a netip.Addr
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			a = ap.Addr().Unmap()
		}
		lc := &limitConn{Conn: c, l: l, addr: a}
		over, open, evict := l.admit(lc)
		if evict != nil {
			_ = evict.Conn.Close() // its server goroutine sees the close and ends
		}
		if over == "" {
			return lc, nil
		}
		_ = c.Close()
		l.refused.Refuse(refuseConns, a.String(), "open", open, "cap", over, "fix", "raise "+over)
	}
}

// admit takes a slot for c, making room by evicting an idle connection
// when a cap is reached; over names the cap when there is no room.
func (l *limitListener) admit(c *limitConn) (over string, open int, evict *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := l.by[c.addr]
	switch {
	case len(mine) >= l.perClient:
		if evict = idleOf(mine); evict == nil {
			return "admin.max_conns_per_client", l.total, nil
		}
	case l.total >= l.max:
		for _, m := range l.by {
			if evict = idleOf(m); evict != nil {
				break
			}
		}
		if evict == nil {
			return "admin.max_conns", l.total, nil
		}
	}
	if evict != nil {
		l.forget(evict)
	}
	if mine == nil {
		mine = map[*limitConn]struct{}{}
		l.by[c.addr] = mine
	}
	mine[c] = struct{}{}
	l.total++
	return "", l.total, evict
}

func idleOf(m map[*limitConn]struct{}) *limitConn {
	for c := range m {
		if c.idle.Load() {
			return c
		}
	}
	return nil
}

// forget gives c's slot back, once (l.mu held).
func (l *limitListener) forget(c *limitConn) {
	m := l.by[c.addr]
	if _, ok := m[c]; !ok {
		return
	}
	delete(m, c)
	if len(m) == 0 {
		delete(l.by, c.addr)
	}
	l.total--
}

// connState is the http.Server's ConnState hook: it marks the
// connections idle between requests, which a new one may take the place
// of.
func connState(c net.Conn, st http.ConnState) {
	if lc, ok := c.(*limitConn); ok {
		lc.idle.Store(st == http.StateIdle)
	}
}

// limitConn gives its slot back on Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	addr netip.Addr
	idle atomic.Bool
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return err
}
