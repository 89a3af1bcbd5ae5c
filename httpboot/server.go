// Package httpboot is pxeperf's HTTP boot server: it serves the image root
// (Content-Length, Range, HEAD, sendfile for large files), per-client iPXE
// scripts rendered from Go text/template, and GET /healthz. Every fetch is
// reported to an event.Sink with what the kernel knew of the TCP connection
// (TCP_INFO: RTT, retransmits, the client's largest advertised window, ...).
//
// The response writer is only ever wrapped by countingWriter, which keeps
// io.ReaderFrom visible so http.ServeContent's copy reaches the
// connection's ReadFrom (sendfileConn on Linux, a raw sendfile loop) and
// the kernel's sendfile; see TestSendfilePath and BenchmarkServe.
package httpboot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/httpserve"
	"github.com/pxeperf/pxeperf/internal/refuse"
)

// Options are what a Server is built from.
type Options struct {
	// HTTP is the http section of the config: listen address, timeouts and
	// the default script template.
	HTTP configs.HTTP
	// ConfigFile is the config file's name, for template errors.
	ConfigFile string
	// ScriptPath is where the per-client iPXE script is served
	// (dhcp.ipxe_script). Default /boot.ipxe.
	ScriptPath string
	// ServerAddr is the address clients reach pxeperf at; it makes .Server
	// and .ServerURL in scripts. Default: the local address the request
	// came in on.
	ServerAddr netip.Addr
	// Interface is the serving interface's name, put on every fetch.
	Interface string
	Images    *images.Store
	// Files serves every path that is not the script or /healthz: a file
	// in the root, else a loader config generated for the client. nil:
	// the root only.
	Files *bootcfg.Source
	// Hosts maps a MAC or a leased address to a host entry; nil: none.
	Hosts *hosts.Table
	// Sink receives one event.Fetch per request; nil: discarded.
	Sink   event.Sink
	Logger *slog.Logger
	// API, when set, serves every path under /api/ (the records and report
	// tables as JSON); those requests are not fetches and are not recorded.
	// serve sets it only with http.api: true (the API lives on the admin
	// listener).
	API http.Handler
	// Refused counts and logs refusals (budgets, bad input); nil: a log of
	// the server's own on Logger.
	Refused *refuse.Log
	// Health, when set, adds the record store's state to /healthz: with
	// problems, the status is "degraded" (still 200: boards are served;
	// a restart would not mend a full disk or a database that is away).
	Health func() (problems []string, records any)
	// Active, when set, lists each fetch while it runs, with the bytes the
	// client acknowledged so far (updated by the TCP_INFO sampler, not per
	// write); nil: none.
	Active *event.Active
}

// Budget defaults, used where Options.HTTP leaves them zero (tests, bench).
const (
	DefaultMaxConns              = 2048
	DefaultMaxConnsPerClient     = 32
	DefaultMaxLabels             = 32
	DefaultMaxLabelKey           = 64
	DefaultMaxLabelValue         = 256
	DefaultErrorRecordsPerMinute = 120
	DefaultProbeRecordsPerMinute = 120
	DefaultMaxRanges             = 16
	DefaultSendBufferTotalMiB    = 128
)

// Server is the HTTP boot service. Build it with New, run it with Serve.
type Server struct {
	opt     Options
	ln      net.Listener
	srv     *http.Server
	zenc    *zstd.Encoder
	started time.Time
	port    int

	active      atomic.Int64 // requests being served
	badRequests atomic.Int64 // malformed input dropped (bad ?mac=, ...)

	refused   *refuse.Log
	conns     *connLimiter
	errBudget *budget // failed fetches each client may put on record
	// probeBudget: HEADs and small range answers each client may put on
	// record (see probe).
	probeBudget *budget
	claims      claims // accepted ?mac= claims (see claimMAC)
	sampler     *sampler
}

type connKey struct{}

// New validates the options and binds the listener, so a busy port fails
// here, before anything is served.
func New(opt Options) (*Server, error) {
	if opt.Images == nil {
		return nil, errors.New("httpboot: no image store (set Options.Images)")
	}
	if opt.ScriptPath == "" {
		opt.ScriptPath = "/boot.ipxe"
	}
	if opt.ScriptPath[0] != '/' {
		return nil, fmt.Errorf("httpboot: script path %q must start with /, e.g. /boot.ipxe", opt.ScriptPath)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Sink == nil {
		opt.Sink = event.Discard{}
	}
	if opt.Files == nil {
		opt.Files = bootcfg.RootOnly(opt.Images)
	}
	if opt.Hosts == nil {
		opt.Hosts = hosts.New(nil)
	}
	if opt.HTTP.Listen == "" {
		opt.HTTP.Listen = ":80"
	}
	if opt.Refused == nil {
		opt.Refused = refuse.New(opt.Logger, 0)
	}
	h := &opt.HTTP
	for _, d := range []struct {
		v   *int
		def int
	}{
		{&h.MaxConns, DefaultMaxConns}, {&h.MaxConnsPerClient, DefaultMaxConnsPerClient},
		{&h.MaxLabels, DefaultMaxLabels}, {&h.MaxLabelKey, DefaultMaxLabelKey},
		{&h.MaxLabelValue, DefaultMaxLabelValue}, {&h.ErrorRecordsPerMinute, DefaultErrorRecordsPerMinute},
		{&h.ProbeRecordsPerMinute, DefaultProbeRecordsPerMinute}, {&h.MaxRanges, DefaultMaxRanges},
		{&h.SendBufferTotalMiB, DefaultSendBufferTotalMiB},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, fmt.Errorf("httpboot: zstd encoder: %w", err)
	}
	ln, err := net.Listen("tcp", opt.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http boot: listening on %s: %w (free the port, or set http.listen / --http-addr, or --http-addr off)", opt.HTTP.Listen, err)
	}
	s := &Server{opt: opt, ln: wrapListener(ln, opt.HTTP.SendBufferKiB<<10, opt.HTTP.SendBufferTotalMiB<<20), zenc: zenc, started: time.Now(), refused: opt.Refused,
		errBudget: newBudget(opt.HTTP.ErrorRecordsPerMinute), probeBudget: newBudget(opt.HTTP.ProbeRecordsPerMinute), claims: claims{at: map[string]time.Time{}}}
	s.sampler = newSampler(sampleEvery(opt.HTTP.StallTimeout, opt.HTTP.Interval))
	s.conns = newConnLimiter(opt.HTTP.MaxConns, opt.HTTP.MaxConnsPerClient, s.refused.Refuse)
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port = ta.Port
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: opt.HTTP.ReadHeaderTimeout,
		IdleTimeout:       opt.HTTP.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ConnState:         s.conns.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: slog.NewLogLogger(opt.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Refused is the server's refusal log (its counts feed /healthz).
func (s *Server) Refused() *refuse.Log { return s.refused }

// Addr is the bound listen address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then stops accepting and lets running
// downloads finish for up to HTTP.ShutdownGrace before closing them. It
// returns nil when ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	s.opt.Logger.Info("http boot serving", "addr", s.ln.Addr().String(), "script", s.opt.ScriptPath)
	grace := s.opt.HTTP.ShutdownGrace
	err := httpserve.Serve(ctx, s.srv, s.ln, grace, httpserve.Hooks{
		Stopping: func() {
			if n := s.active.Load(); n > 0 {
				s.opt.Logger.Info("http boot stopping: letting downloads finish", "active", n, "grace", grace)
			}
		},
		Late: func(err error) {
			s.opt.Logger.Warn("http boot: downloads still running after the shutdown grace; closing them",
				"active", s.active.Load(), "grace", grace, "err", err)
		},
	})
	if err != nil {
		return fmt.Errorf("http boot: %w", err)
	}
	return nil
}

// ServeHTTP answers 503 on a connection over a connection cap
// (connLimiter.serveOver), else routes: /api/ (when Options.API is set),
// /healthz, the script path, else a file from the root (serveFetch).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.conns.unsettled.Load() > 0 && !s.conns.serveOver(w, r) {
		return // over http.max_conns or max_conns_per_client: answered 503
	}
	if s.opt.API != nil && strings.HasPrefix(r.URL.Path, "/api/") {
		s.opt.API.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "pxeperf serves boot files: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	uncarry(r) // a script's URL: its MAC and labels come back into the query
	if r.URL.Path == "/healthz" {
		s.serveHealth(w, r)
		return
	}
	s.serveFetch(w, r)
}

type health struct {
	Status   string   `json:"status"`
	Problems []string `json:"problems,omitempty"`
	// Records is the record store's state (serve's Options.Health).
	Records     any     `json:"records,omitempty"`
	UptimeS     float64 `json:"uptime_s"`
	Active      int64   `json:"active"`
	Conns       int     `json:"conns"`
	BadRequests int64   `json:"bad_requests"`
	// Refused counts refusals by reason (budgets, refused claims, ...).
	Refused map[string]uint64 `json:"refused"`
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	status, problems, records := "ok", []string(nil), any(nil)
	if s.opt.Health != nil {
		problems, records = s.opt.Health()
		if len(problems) > 0 {
			status = "degraded"
		}
	}
	b, _ := json.Marshal(health{
		Status:      status,
		Problems:    problems,
		Records:     records,
		UptimeS:     time.Since(s.started).Round(time.Millisecond).Seconds(),
		Active:      s.active.Load(),
		Conns:       s.conns.count(),
		BadRequests: s.badRequests.Load(),
		Refused:     s.refused.Counts(),
	})
	s.writeText(w, r, "application/json", append(b, '\n'))
}

// scriptInRoot reports whether the root holds a file at the script path:
// a file in the root always wins over the generated script.
func (s *Server) scriptInRoot() bool {
	from, err := s.opt.Images.Source(s.opt.ScriptPath)
	return err == nil && from == "root"
}

// localAddr is the address the request came in on.
func (s *Server) localAddr(r *http.Request) netip.Addr {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().Unmap()
		}
	}
	return netip.Addr{}
}

// serverAddr is the address scripts name as .Server.
func (s *Server) serverAddr(r *http.Request) netip.Addr {
	if s.opt.ServerAddr.IsValid() && !s.opt.ServerAddr.IsUnspecified() {
		return s.opt.ServerAddr
	}
	return s.localAddr(r)
}

// serverURL is the base URL scripts use for this server: the Host the
// client itself used when it sent one (right behind NAT and port
// forwards), else http://addr[:port] for the listener's port. The Host
// header comes from the client and ends up in scripts and generated
// configs, so only a plain host[:port] is taken (a ";reset" in it would be
// a U-Boot command).
func (s *Server) serverURL(r *http.Request) string {
	if r.Host != "" && safeHost(r.Host) {
		return "http://" + r.Host
	}
	a := s.serverAddr(r)
	host := a.String()
	if a.Is6() {
		host = "[" + host + "]"
	}
	if s.port != 0 && s.port != 80 {
		host += ":" + strconv.Itoa(s.port)
	}
	return "http://" + host
}

// safeHost reports whether a Host header is a plain name or address with
// an optional port: letters, digits, '.', '-', ':', '[' and ']'.
func safeHost(h string) bool {
	if len(h) > 255 {
		return false
	}
	for _, c := range []byte(h) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '-' || c == ':' || c == '[' || c == ']'
		if !ok {
			return false
		}
	}
	return true
}
