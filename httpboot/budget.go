package httpboot

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Refusal reasons, as counted by the refuse log and shown in /healthz.
const (
	refuseConns        = "http: too many connections"
	refuseClientConns  = "http: too many connections from one client"
	refuseLabels       = "http: labels over budget"
	refusePath         = "http: path too long"
	refuseErrorRecords = "http: failed fetches over the record budget (answered, not recorded)"
	refuseMACClaim     = "http: ?mac= claim refused"
	refuseIdleReclaim  = "http: idle connection closed to make room (http.max_conns)"
	refuseSlow         = "http: download under http.min_rate_kib (ended)"
	refuseRanges       = "http: ranges over http.max_ranges (served whole)"
	refuseProbeRecords = "http: HEAD and small range fetches over the record budget (answered, not recorded)"
	refuseScriptValue  = "http: query value unsafe for a script"
)

// maxPathLen bounds a request path: a boot file name is never this long,
// and the path goes on the record.
const maxPathLen = 1024

// connLimiter counts open connections, in all and per client address
// (http.Server.ConnState, so nothing wraps the connection and sendfile
// stays on), and answers those over either cap with a 503, as nginx's
// limit_conn does: a bare close left the client with an EOF and no reason
// (iPXE: a generic error; curl: "Empty reply from server").
//
// A connection over a cap is held, not counted, and decided at its first
// request (serveOver: the 503 is an ordinary response, after net/http has
// read the request, so closing does not turn it into an RST) or, when
// none comes within refuseIdle, by expire (the 503 written unasked; net/http's
// goroutine keeps reading the socket meanwhile, so nothing unread is left
// to draw an RST). Deciding late closes a race a legitimate client loses:
// one that closes its keep-alive connections and at once opens as many
// new ones is over its cap at accept whenever the server has not yet run
// the old ones' close (their FINs came first, but each close runs in the
// old connection's goroutine). TestConnsReconnectAtOnce reproduces it.
// By the request most old ones have closed, and the rest are found by
// their TCP state, not guessed with a timer: the client's FIN came before
// its new SYN, so an idle connection whose client has closed its side
// (peerClosed: CLOSE_WAIT) no longer counts. A busy one (a response still
// running) never counts as gone, so a client that half-closes its
// downloads cannot slip past the cap; the new connection waits up to
// refuseGrace for such to close. Only the per-client cap looks at states
// (a client's connections, at most http.max_conns_per_client system
// calls); the global one recounts.
type connLimiter struct {
	max, perClient int
	refuse         func(reason, client string, args ...any)
	// peerClosed says whether a connection's client has closed its side
	// (nil: never).
	peerClosed func(net.Conn) bool
	// idle is how long a held connection may wait for its request.
	idle time.Duration

	// unsettled counts held connections not decided yet: serveOver
	// looks the request's connection up only while there are any.
	unsettled atomic.Int64

	mu       sync.Mutex
	total    int                // admitted connections
	byClient map[netip.Addr]int // admitted connections per client
	held     int                // connections over a cap still open
	open     map[net.Conn]*connEntry
	// released is closed when an admitted connection is released, for a
	// decide waiting on the client's closing ones (nil: none waits).
	released chan struct{}
}

// connEntry is one open connection.
type connEntry struct {
	addr   netip.Addr
	state  connStatus
	active bool // a request is running (http.StateActive)
	// kept: a keep-alive connection between requests (http.StateIdle)
	// since then.
	kept  bool
	since time.Time
	// owned: serveOver or expire is deciding the held connection; the
	// other one waits for done.
	owned bool
	done  chan struct{}
	timer *time.Timer
}

type connStatus uint8

const (
	connAdmitted connStatus = iota // counted against the caps
	connHeld                       // over a cap when it came, not decided yet
	connRefused                    // answered 503
	connGone                       // its client closed its side while idle: no longer counted
)

const (
	// refuseIdle is how long a connection over a cap may take to send its
	// request before it is answered 503 unasked and closed. A client
	// sends its request with the handshake's last ACK; only one that
	// opens a connection and does not use it waits this long.
	refuseIdle = time.Second
	// refuseGrace is how long a connection over its client's cap waits
	// for that client's connections that are closing (closed by the
	// client, a response still running) to close.
	refuseGrace = 250 * time.Millisecond
	// refuseWriteTimeout bounds writing a 503 to a client that does not
	// read: its goroutine ends then.
	refuseWriteTimeout = time.Second
	// refuseMaxHeld caps held and refused connections still open when
	// http.max_conns does not (0); past the cap a connection is closed at
	// once, as before the 503s, so a flood cannot hold sockets.
	refuseMaxHeld = 1024
)

// refusalHeader is what a 503 for a connection over a cap carries besides
// its length.
var refusalHeader = [][2]string{
	{"Retry-After", "1"},
	{"Connection", "close"},
	{"Content-Type", "text/plain; charset=utf-8"},
}

func newConnLimiter(max, perClient int, refuse func(reason, client string, args ...any)) *connLimiter {
	return &connLimiter{max: max, perClient: perClient, refuse: refuse, peerClosed: peerClosed, idle: refuseIdle,
		byClient: map[netip.Addr]int{}, open: map[net.Conn]*connEntry{}}
}

// connState is the http.Server.ConnState hook. For a new connection it
// runs on the accept loop: it never blocks nor writes.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		a := remoteAddr(c)
		e := &connEntry{addr: a}
		l.mu.Lock()
		maxHeld := l.max
		if maxHeld <= 0 {
			maxHeld = refuseMaxHeld
		}
		if idle := l.reclaim(a); idle != nil {
			defer l.closeReclaimed(idle)
		}
		switch {
		case l.over(a) == "":
			l.admit(e)
			l.open[c] = e
		case l.held < maxHeld:
			e.state, e.done = connHeld, make(chan struct{})
			l.held++
			l.unsettled.Add(1)
			e.timer = time.AfterFunc(l.idle, func() { l.expire(c) })
			l.open[c] = e
		default:
			reason, args, _ := l.refusal(a)
			held := l.held
			l.mu.Unlock()
			l.refuse(reason, a.String(), append(args, "held", held, "answer", "closed: too many held for a 503")...)
			_ = c.Close()
			return
		}
		l.mu.Unlock()
	case http.StateActive, http.StateIdle:
		l.mu.Lock()
		if e := l.open[c]; e != nil {
			e.active = st == http.StateActive
			if e.kept = !e.active; e.kept {
				e.since = time.Now()
			}
		}
		l.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		l.mu.Lock()
		if e, ok := l.open[c]; ok {
			delete(l.open, c)
			switch e.state {
			case connAdmitted:
				l.release(e.addr)
			case connHeld:
				l.held--
				l.unsettled.Add(-1)
				e.timer.Stop()
			case connRefused:
				l.held--
			}
		}
		l.mu.Unlock()
	}
}

// reclaim makes room for a new connection from a over http.max_conns by
// taking the keep-alive connection that has been idle longest (between
// requests) off the count, as nginx reuses idle keep-alive connections
// when it runs out: idle keep-alives at the cap would otherwise keep every
// real client at 503 for the idle timeout (see
// httpboot/DESIGN.md#idle-keep-alives-at-the-cap-and-trickles). A
// connection that has not sent its first request yet is not taken
// (read_header_timeout bounds it). It
// returns that connection for the caller to close (closeReclaimed) once
// l.mu is let go; nil when a is not over the global cap or no connection
// is idle. l.mu is held.
func (l *connLimiter) reclaim(a netip.Addr) net.Conn {
	if l.over(a) != "http.max_conns" {
		return nil
	}
	var oldest net.Conn
	var at time.Time
	for c, e := range l.open {
		if e.state == connAdmitted && e.kept && (oldest == nil || e.since.Before(at)) {
			oldest, at = c, e.since
		}
	}
	if oldest == nil {
		return nil
	}
	e := l.open[oldest]
	e.state = connGone
	l.release(e.addr)
	return oldest
}

// closeReclaimed closes a connection reclaim took off the count, and
// counts it.
func (l *connLimiter) closeReclaimed(c net.Conn) {
	a := remoteAddr(c)
	_ = c.Close()
	l.refuse(refuseIdleReclaim, a.String(), "cap", l.max, "fix", "raise http.max_conns")
}

// over names the cap a new connection from a would pass ("": none).
func (l *connLimiter) over(a netip.Addr) string {
	switch {
	case l.max > 0 && l.total >= l.max:
		return "http.max_conns"
	case l.perClient > 0 && l.byClient[a] >= l.perClient:
		return "http.max_conns_per_client"
	}
	return ""
}

func (l *connLimiter) admit(e *connEntry) {
	e.state = connAdmitted
	l.total++
	l.byClient[e.addr]++
}

func (l *connLimiter) release(a netip.Addr) {
	l.total--
	if l.byClient[a]--; l.byClient[a] <= 0 {
		delete(l.byClient, a)
	}
	if l.released != nil {
		close(l.released)
		l.released = nil
	}
}

// refusal is the reason and log arguments for refusing a connection from
// a, and the 503's body naming the cap and the setting to raise.
func (l *connLimiter) refusal(a netip.Addr) (reason string, args []any, body string) {
	if l.over(a) == "http.max_conns" {
		return refuseConns, []any{"open", l.total, "cap", l.max, "fix", "raise http.max_conns"},
			fmt.Sprintf("503 too many connections (http.max_conns %d): retry later, or raise http.max_conns\n", l.max)
	}
	return refuseClientConns, []any{"open", l.byClient[a], "cap", l.perClient, "fix", "raise http.max_conns_per_client"},
		fmt.Sprintf("503 too many connections from %s (http.max_conns_per_client %d): retry later, or raise http.max_conns_per_client\n", a, l.perClient)
}

// claim makes the caller the one deciding c: mine when c is held and
// not yet claimed. Otherwise e (nil: c is not tracked) and its state st
// are what was decided, or, when st is connHeld, what expire is deciding
// (wait for e.done).
func (l *connLimiter) claim(c net.Conn) (e *connEntry, st connStatus, mine bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e = l.open[c]
	if e == nil {
		return nil, connAdmitted, false
	}
	if e.state != connHeld || e.owned {
		return e, e.state, false
	}
	e.owned = true
	return e, e.state, true
}

// decide lets the held connection c in if there is room now, else refuses
// it (logged and counted) and returns the 503's body. The caller has
// claimed c and closes e.done once c is answered.
func (l *connLimiter) decide(c net.Conn, e *connEntry) (refused bool, body string) {
	deadline := time.Now().Add(refuseGrace)
	l.mu.Lock()
	for l.peerClosed != nil && l.over(e.addr) == "http.max_conns_per_client" {
		busy := l.dropClosed(e.addr)
		wait := time.Until(deadline)
		if busy == 0 || l.over(e.addr) == "" || wait <= 0 {
			break
		}
		if l.released == nil {
			l.released = make(chan struct{})
		}
		ch := l.released
		l.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		l.mu.Lock()
	}
	if l.open[c] != e { // closed meanwhile: the hook did the counting
		l.mu.Unlock()
		return false, ""
	}
	l.unsettled.Add(-1)
	e.timer.Stop()
	if idle := l.reclaim(e.addr); idle != nil {
		defer l.closeReclaimed(idle)
	}
	if l.over(e.addr) == "" {
		l.held--
		l.admit(e)
		l.mu.Unlock()
		return false, ""
	}
	e.state = connRefused
	reason, args, body := l.refusal(e.addr)
	l.mu.Unlock()
	l.refuse(reason, e.addr.String(), args...)
	return true, body
}

// dropClosed stops counting a's idle connections whose client has closed
// its side, and returns how many more such are busy (a response still
// running: they close when it ends). l.mu is held; it is let go for the
// system calls (the accept loop's hook takes it), so the counts may
// change meanwhile.
func (l *connLimiter) dropClosed(a netip.Addr) (busy int) {
	var mine []net.Conn
	for c, e := range l.open {
		if e.addr == a && e.state == connAdmitted {
			mine = append(mine, c)
		}
	}
	l.mu.Unlock()
	var closed []net.Conn
	for _, c := range mine {
		if l.peerClosed(c) {
			closed = append(closed, c)
		}
	}
	l.mu.Lock()
	for _, c := range closed {
		switch e := l.open[c]; {
		case e == nil || e.state != connAdmitted:
		case e.active:
			busy++
		default:
			e.state = connGone
			l.release(a)
		}
	}
	return busy
}

// serveOver is ServeHTTP's first step while connections are held: false
// when the request's connection came over a cap and is refused (it was
// answered 503).
func (l *connLimiter) serveOver(w http.ResponseWriter, r *http.Request) bool {
	c, ok := r.Context().Value(connKey{}).(net.Conn)
	if !ok {
		return true
	}
	e, st, mine := l.claim(c)
	switch {
	case e == nil || st == connAdmitted || st == connGone:
		return true
	case mine:
		refused, body := l.decide(c, e)
		defer close(e.done)
		if !refused {
			return true
		}
		h := w.Header()
		for _, kv := range refusalHeader {
			h.Set(kv[0], kv[1])
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, body)
		return false
	}
	// expire decides it, or did.
	<-e.done
	l.mu.Lock()
	refused := e.state == connRefused
	l.mu.Unlock()
	if refused {
		// expire answered and closed it: net/http writes nothing more.
		panic(http.ErrAbortHandler)
	}
	return true
}

// expire decides a held connection that sent no request in time (the
// timer's goroutine): when it is refused, the 503 goes unasked, within
// refuseWriteTimeout, and the connection is closed. net/http's goroutine,
// reading it, then ends too.
func (l *connLimiter) expire(c net.Conn) {
	e, _, mine := l.claim(c)
	if !mine {
		return
	}
	defer close(e.done)
	refused, body := l.decide(c, e)
	if !refused {
		return
	}
	var b strings.Builder
	b.WriteString("HTTP/1.1 503 Service Unavailable\r\n")
	for _, kv := range refusalHeader {
		b.WriteString(kv[0] + ": " + kv[1] + "\r\n")
	}
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	_, _ = io.WriteString(c, b.String())
	_ = c.Close()
}

// count is the number of open connections counted against the caps.
func (l *connLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

func remoteAddr(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// budget is a token bucket per client: burst tokens, refilled evenly over
// a minute. It remembers at most maxClients clients; when that many are
// tracked, full buckets are forgotten, and if none is, new clients share
// one bucket (a flood from many addresses is then budgeted as one).
type budget struct {
	perMinute int
	now       func() time.Time

	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
	shared  bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

const maxBudgetClients = 4096

func newBudget(perMinute int) *budget {
	return &budget{perMinute: perMinute, now: time.Now, buckets: map[netip.Addr]*bucket{}}
}

// take spends one token of client a; false when its budget is spent.
func (b *budget) take(a netip.Addr) bool {
	if b.perMinute <= 0 {
		return false
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.buckets[a]
	if !ok {
		if len(b.buckets) >= maxBudgetClients {
			for k, v := range b.buckets {
				if b.refill(v, now) >= float64(b.perMinute) {
					delete(b.buckets, k)
				}
			}
		}
		if len(b.buckets) >= maxBudgetClients {
			bk = &b.shared
			if bk.at.IsZero() {
				bk.tokens, bk.at = float64(b.perMinute), now
			}
		} else {
			bk = &bucket{tokens: float64(b.perMinute), at: now}
			b.buckets[a] = bk
		}
	}
	if b.refill(bk, now) < 1 {
		return false
	}
	bk.tokens--
	return true
}

// refill brings bk's tokens up to now and returns them.
func (b *budget) refill(bk *bucket, now time.Time) float64 {
	if d := now.Sub(bk.at); d > 0 {
		bk.tokens = min(float64(b.perMinute), bk.tokens+d.Minutes()*float64(b.perMinute))
		bk.at = now
	}
	return bk.tokens
}
