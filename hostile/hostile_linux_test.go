//go:build linux

// Package hostile attacks the built binary's `pxeperf serve` from a test's
// own namespaces, as a hostile lab network would (issue 27): forged sources
// through raw sockets (nstest.Forger) at on-link addresses that answer no
// ARP (Pair.Unanswered), floods bounded in count and time, clients that
// never read. Each test runs its flood through one runner, siege
// (siege_linux_test.go): a real board (udhcpc, curl, tftp-hpa, iperf3,
// iperf 2) is still served within 1 s meanwhile, and what the process holds
// (RSS, fds, threads, goroutines, CPU) stays within a stated bound. Each
// flood is a function of its own, so the soak (PXEPERF_BENCH=1) runs them
// all at once.
package hostile

import (
	"context"
	"testing"
	"time"
)

// flood is one attack: it runs until ctx ends (or its own count is spent)
// against the server at s, sending from p's client side.
type flood func(ctx context.Context, t *testing.T, l *lab)

// within runs fn, a real board's request, and fails t unless it succeeds
// within d (1 s in the acceptance).
func within(t *testing.T, what string, d time.Duration, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	if err := fn(ctx); err != nil {
		t.Errorf("%s during the flood: %v after %v (want served within %v)", what, err, time.Since(start).Round(time.Millisecond), d)
		return
	}
	t.Logf("%s during the flood: served in %v", what, time.Since(start).Round(time.Millisecond))
}
