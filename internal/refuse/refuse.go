// Package refuse counts what a server turns away (a budget reached, a
// request that does not parse) and logs it at most once per client and
// reason per period, so a flood can neither fill the log nor hide.
//
// Every protocol server keeps one Log; Counts feeds stats and metrics.
package refuse

import (
	"log/slog"
	"sort"
	"sync"
	"time"
)

// DefaultEvery is how often one client's refusals of one reason are logged.
const DefaultEvery = time.Minute

// maxKeys bounds the clients remembered for rate limiting; beyond it,
// refusals are still counted but new clients are not logged until old
// entries expire.
const maxKeys = 4096

// Log counts refusals by reason and logs each (reason, client) at most
// once per period. The zero value is not usable; build it with New. Safe
// for concurrent use.
type Log struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu     sync.Mutex
	counts map[string]uint64
	last   map[key]time.Time
	swept  time.Time
}

type key struct{ reason, client string }

// New returns a Log writing to logger (nil: counts only) at most once per
// client and reason every period (0: DefaultEvery).
func New(logger *slog.Logger, every time.Duration) *Log {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Log{log: logger, every: every, now: time.Now, counts: map[string]uint64{}, last: map[key]time.Time{}}
}

// Refuse counts one refusal and logs it (at warn level, with args) unless
// the same client was logged for the same reason within the period; the
// log line then carries how many were suppressed since.
func (l *Log) Refuse(reason, client string, args ...any) {
	now := l.now()
	l.mu.Lock()
	l.counts[reason]++
	if now.Sub(l.swept) > l.every {
		for k, t := range l.last {
			if now.Sub(t) > l.every {
				delete(l.last, k)
			}
		}
		l.swept = now
	}
	k := key{reason, client}
	t, seen := l.last[k]
	logIt := l.log != nil && (!seen && len(l.last) < maxKeys || seen && now.Sub(t) > l.every)
	if logIt {
		l.last[k] = now
	}
	l.mu.Unlock()
	if logIt {
		l.log.Warn("refused: "+reason, append([]any{"client", client, "again_within", l.every}, args...)...)
	}
}

// Count returns how many refusals of reason were counted.
func (l *Log) Count(reason string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[reason]
}

// Counts returns every reason's count.
func (l *Log) Counts() map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]uint64, len(l.counts))
	for k, v := range l.counts {
		out[k] = v
	}
	return out
}

// Reasons lists the reasons counted so far, sorted.
func (l *Log) Reasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.counts))
	for k := range l.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
