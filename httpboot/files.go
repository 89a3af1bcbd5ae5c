package httpboot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
)

// bootTypes are content types for boot files that mime.TypeByExtension does
// not know, or gets wrong for firmware (which mostly ignores them anyway).
var bootTypes = map[string]string{
	".efi":      "application/efi",
	".ipxe":     "text/plain; charset=utf-8",
	".kpxe":     "application/octet-stream",
	".kkpxe":    "application/octet-stream",
	".pxe":      "application/octet-stream",
	".lkrn":     "application/octet-stream",
	".img":      "application/octet-stream",
	".iso":      "application/x-iso9660-image",
	".cpio":     "application/x-cpio",
	".gz":       "application/gzip",
	".zst":      "application/zstd",
	".xz":       "application/x-xz",
	".squashfs": "application/octet-stream",
	".dtb":      "application/octet-stream",
	".scr":      "application/octet-stream",
	".uimg":     "application/octet-stream",
	".bin":      "application/octet-stream",
	".cfg":      "text/plain; charset=utf-8",
	".conf":     "text/plain; charset=utf-8",
	".txt":      "text/plain; charset=utf-8",
	".json":     "application/json",
	".sha256":   "text/plain; charset=utf-8",
}

// contentType names a file's type from its extension; never by sniffing, so
// ServeContent does not read the file twice. Kernels and initrds without an
// extension are application/octet-stream.
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := bootTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// serveFile serves one file of the root, or a loader config generated for
// the client (bootcfg: a file in the root always wins). It returns -1 (the
// promised length is read from Content-Length by the caller) or 0 when it
// already set the outcome.
func (s *Server) serveFile(w *countingWriter, r *http.Request, rec *event.Fetch) int64 {
	peer := bootcfg.Peer{Client: rec.Client.Addr(), Local: s.localAddr(r), ServerURL: s.serverURL(r)}
	c, err := s.opt.Files.Open(r.URL.Path, peer)
	if err != nil {
		switch {
		case errors.Is(err, images.ErrOutsideRoot) || errors.Is(err, fs.ErrPermission):
			rec.Outcome = event.OutcomeDenied
			http.Error(w, "403 forbidden: path leaves the image root", http.StatusForbidden)
		case errors.Is(err, fs.ErrNotExist):
			rec.Outcome = event.OutcomeNotFound
			http.Error(w, "404 not found", http.StatusNotFound)
		case errors.Is(err, images.ErrCacheFull) || errors.Is(err, images.ErrLowSpace):
			// The image exists but cannot be unpacked now; the store
			// logged why (once per client a minute). Try again later.
			rec.Outcome = event.OutcomeError
			w.Header().Set("Retry-After", "30")
			http.Error(w, "503 image cache full: retry later", http.StatusServiceUnavailable)
		default:
			rec.Outcome = event.OutcomeError
			http.Error(w, "500 cannot open file", http.StatusInternalServerError)
			s.opt.Logger.Warn("http boot: cannot open file", "file", rec.File, "err", err)
		}
		rec.Err = err.Error()
		return 0
	}
	defer c.Close()
	rec.Size = c.Size
	w.live.SetSize(c.Size)
	var mod time.Time
	ctype := contentType(r.URL.Path)
	if c.Generated() {
		rec.Kind = event.KindConfig
		if rec.MAC == nil && c.MAC != nil {
			rec.MAC = c.MAC
		}
		if rec.Host == "" && c.Host != nil {
			rec.Host = c.Host.Name
		}
		if c.Loader != bootcfg.UBoot {
			ctype = "text/plain; charset=utf-8"
		}
		w.Header().Set("Cache-Control", "no-store")
	} else if st, err := c.File.Stat(); err == nil {
		mod = st.ModTime()
	}
	w.Header().Set("Content-Type", ctype)
	if rh := r.Header.Get("Range"); rh != "" {
		switch fit, drop := fitRanges(rh, c.Size, s.opt.HTTP.MaxRanges); {
		case drop:
			r.Header.Del("Range")
			s.refused.Refuse(refuseRanges, rec.Client.Addr().String(), "cap", s.opt.HTTP.MaxRanges,
				"answer", "the whole file", "fix", "raise http.max_ranges")
		case fit != rh:
			r.Header.Set("Range", fit)
		}
	}
	// ServeContent sets Content-Length, answers Range and HEAD, and copies
	// with io.CopyN(w, f, n): w keeps io.ReaderFrom, so that becomes sendfile.
	http.ServeContent(w, r, path.Base(r.URL.Path), mod, c.Reader())
	return -1
}

// refusal is a request turned away before it is served: the status and
// message it is answered with and the outcome its record gets.
type refusal struct {
	status  int
	outcome string
	msg     string
}

// newFetch starts the record of one request and finds the client: by ?mac=
// when given (iPXE's ${net0/mac}) and the claim holds (see claimMAC), else
// by the lease of the source address. A request over a budget (path,
// labels) or with a refused claim comes back with a refusal; its record
// then carries no query labels.
func (s *Server) newFetch(r *http.Request, start time.Time) (*event.Fetch, hosts.Client, *refusal) {
	rec := &event.Fetch{
		Start:     start,
		Proto:     event.ProtoHTTP,
		File:      strings.TrimPrefix(r.URL.Path, "/"), // as TFTP names it: relative to the root
		Size:      -1,
		Interface: s.opt.Interface,
		Local:     s.localAddr(r),
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		rec.Client = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	src := rec.Client.Addr()
	if len(r.URL.Path) > maxPathLen {
		rec.File = truncate(rec.File, 128)
		s.refused.Refuse(refusePath, src.String(), "bytes", len(r.URL.Path), "cap", maxPathLen)
		return rec, hosts.Client{}, &refusal{http.StatusRequestURITooLong, event.OutcomeDenied,
			fmt.Sprintf("path of %d bytes: at most %d", len(r.URL.Path), maxPathLen)}
	}
	q := r.URL.Query()
	var c hosts.Client
	var refused *refusal
	found := false
	if m := q.Get("mac"); m != "" {
		hw, err := net.ParseMAC(m)
		if err == nil && len(hw) == 6 {
			var why string
			c, found, why = s.claimMAC(hw, src, time.Now())
			if !found {
				s.refused.Refuse(refuseMACClaim, src.String(), "mac", hw.String(), "why", why,
					"fix", "boot it through pxeperf's DHCP, give its host entry address: "+src.String()+", or set http.trust_mac_param: true")
				refused = &refusal{http.StatusForbidden, event.OutcomeDenied,
					fmt.Sprintf("?mac=%s is not bound to %s: %s (http.trust_mac_param is off)", hw, src, why)}
			}
		} else {
			s.badRequests.Add(1)
			s.opt.Logger.Debug("http boot: ignoring bad ?mac=", "client", r.RemoteAddr, "mac", truncate(m, 64))
		}
	}
	if refused == nil && !found && rec.Client.IsValid() {
		c, found = s.opt.Hosts.ByAddr(src)
	}
	if found {
		rec.MAC = c.MAC
		if c.Host != nil {
			rec.Host = c.Host.Name
		}
	}
	lb, err := s.queryLabels(q)
	if err != nil && refused == nil {
		s.refused.Refuse(refuseLabels, src.String(), "err", err.Error())
		refused = &refusal{http.StatusBadRequest, event.OutcomeError, err.Error()}
	}
	if refused == nil {
		rec.Labels = lb
	}
	return rec, c, refused
}

// queryLabels are the request's ?label.KEY=VALUE parameters; nil when
// there are none. A record carries them alone: the host entry's labels
// go under them on every event before any sink (hosts.Stamping, as serve
// wires it). They are bounded (http.max_labels, max_label_key,
// max_label_value): keys are letters, digits and . _ : -, values
// printable UTF-8; past a bound the request is refused rather than
// recorded with some labels missing.
func (s *Server) queryLabels(q map[string][]string) (map[string]string, error) {
	var out map[string]string
	n := 0
	for k, vs := range q {
		key, ok := strings.CutPrefix(k, "label.")
		if !ok || key == "" || len(vs) == 0 {
			continue
		}
		if n++; n > s.opt.HTTP.MaxLabels {
			return out, fmt.Errorf("more than %d ?label. parameters (http.max_labels)", s.opt.HTTP.MaxLabels)
		}
		if len(key) > s.opt.HTTP.MaxLabelKey || !labelKey(key) {
			return out, fmt.Errorf("label key %q: at most %d bytes (http.max_label_key) of letters, digits and . _ : -",
				truncate(key, 64), s.opt.HTTP.MaxLabelKey)
		}
		v := vs[0]
		if len(v) > s.opt.HTTP.MaxLabelValue || !printable(v) {
			return out, fmt.Errorf("label %s: the value must be at most %d bytes (http.max_label_value) of printable text",
				key, s.opt.HTTP.MaxLabelValue)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = v
	}
	return out, nil
}

func labelKey(k string) bool {
	for _, c := range []byte(k) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// printable reports whether v is valid UTF-8 without control characters.
func printable(v string) bool {
	if !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// truncate shortens s to at most n bytes (on a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// countingWriter counts body bytes and remembers the first write error. It
// implements io.ReaderFrom by delegating, so wrapping does not turn off
// sendfile, and Unwrap for http.ResponseController.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      atomic.Int64
	err    error
	// beforeLast, when set, runs before the last byte of a file body is
	// written (see ReadFrom).
	beforeLast func()
	// live is the fetch's entry in Options.Active (nil: none); the
	// monitor updates its bytes.
	live *event.Transfer
	// cork is the connection when it can hold partial segments back
	// (sendfileConn: TCP_CORK; nil: it cannot); corked says it does.
	cork   corker
	corked bool
}

// corkAbove is the body size above which the body goes out corked
// (countingWriter.ReadFrom): more than one splice batch, what sendfile
// hands TCP at a time (its internal pipe, 16 pages).
const corkAbove = 64 << 10

// corker is a connection that can hold partial segments back until told
// to let them go.
type corker interface{ setCork(on bool) }

// setCork corks or uncorks the connection, when it can and is not so
// already.
func (c *countingWriter) setCork(on bool) {
	if c.cork == nil || c.corked == on {
		return
	}
	c.corked = on
	c.cork.setCork(on)
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	c.setErr(err)
	return n, err
}

// ReadFrom hands the copy to the real ResponseWriter, whose ReadFrom hands
// it to the connection's (sendfileConn.ReadFrom on Linux): sendfile(2) for
// an *os.File source.
//
// When beforeLast is set and src is the io.LimitedReader that
// ServeContent's io.CopyN passes, the last byte is held back: beforeLast
// runs once everything else is in the kernel, then the last byte follows
// (also by sendfile). The fetch's record is emitted there, so it is
// journaled before the client can see the response end, and a server
// killed right after a client got a whole file still has its record.
//
// A body over one splice batch (corkAbove) goes out corked (TCP_CORK,
// what nginx's tcp_nopush does): TCP sends only full packets until the
// cork comes off, which pushes the rest. Go sets TCP_NODELAY on every
// connection, so uncorked, the header (net/http writes it just before the
// body) and the end of each sendfile call each leave as a partial packet
// of their own: more packets, more ACKs and more CPU per GiB (see
// httpboot/DESIGN.md#cork). The cork comes off before beforeLast: the
// client takes in the body while the record is made, and a body the
// record waits for (monitor.settle) has its tail on the wire to be
// acknowledged. A small body is not corked: it saves a packet but waits
// longer for its fetch.
func (c *countingWriter) ReadFrom(src io.Reader) (int64, error) {
	lr, ok := src.(*io.LimitedReader)
	if !ok || lr.N > corkAbove {
		c.setCork(true)
		defer c.setCork(false)
	}
	if !ok || c.beforeLast == nil || lr.N < 2 {
		return c.readFrom(src)
	}
	n, err := c.readFrom(&io.LimitedReader{R: lr.R, N: lr.N - 1})
	lr.N -= n
	if err != nil || lr.N != 1 {
		return n, err // short file or write error: no end to hold back
	}
	c.setCork(false)
	c.beforeLast()
	m, err := c.readFrom(lr)
	return n + m, err
}

func (c *countingWriter) readFrom(src io.Reader) (int64, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{c.ResponseWriter}, src)
	}
	c.n.Add(n)
	c.setErr(err)
	return n, err
}

func (c *countingWriter) setErr(err error) {
	if err == nil || c.err != nil {
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w: %w", errDeadline, err)
	}
	c.err = err
}

// Unwrap lets http.ResponseController reach the real writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// writerOnly hides every method but Write (so io.Copy does not recurse).
type writerOnly struct{ io.Writer }

var errDeadline = errors.New("write deadline passed")

// errUnacked is a fetch's error when its body was all handed to the kernel
// but the client did not acknowledge it (monitor.settle gave up).
var errUnacked = errors.New("the client did not acknowledge the whole body")
