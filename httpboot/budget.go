package httpboot

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
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
	refuseScriptValue  = "http: query value unsafe for a script"
)

// maxPathLen bounds a request path: a boot file name is never this long,
// and the path goes on the record.
const maxPathLen = 1024

// connLimiter counts open connections, in all and per client address, and
// closes those over either cap as they arrive (http.Server.ConnState), so
// nothing wraps the connection and sendfile stays on.
type connLimiter struct {
	max, perClient int
	refuse         func(reason, client string, args ...any)

	mu       sync.Mutex
	total    int
	byClient map[netip.Addr]int
	open     map[net.Conn]netip.Addr
}

func newConnLimiter(max, perClient int, refuse func(reason, client string, args ...any)) *connLimiter {
	return &connLimiter{max: max, perClient: perClient, refuse: refuse,
		byClient: map[netip.Addr]int{}, open: map[net.Conn]netip.Addr{}}
}

// connState is the http.Server.ConnState hook.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		a := remoteAddr(c)
		l.mu.Lock()
		l.total++
		l.byClient[a]++
		l.open[c] = a
		total, mine := l.total, l.byClient[a]
		l.mu.Unlock()
		switch {
		case l.max > 0 && total > l.max:
			l.refuse(refuseConns, a.String(), "open", total-1, "cap", l.max, "fix", "raise http.max_conns")
			_ = c.Close()
		case l.perClient > 0 && mine > l.perClient:
			l.refuse(refuseClientConns, a.String(), "open", mine-1, "cap", l.perClient, "fix", "raise http.max_conns_per_client")
			_ = c.Close()
		}
	case http.StateClosed, http.StateHijacked:
		l.mu.Lock()
		if a, ok := l.open[c]; ok {
			delete(l.open, c)
			l.total--
			if l.byClient[a]--; l.byClient[a] <= 0 {
				delete(l.byClient, a)
			}
		}
		l.mu.Unlock()
	}
}

// count is the number of open connections.
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
