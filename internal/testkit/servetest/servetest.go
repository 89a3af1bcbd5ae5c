// Package servetest runs a service's Serve(ctx) for the length of a test:
// the shape every pxeperf service has (New binds, Serve returns nil when
// ctx ends), and the one a test needs to start and stop it cleanly.
package servetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Serving is a Serve that Run started.
type Serving struct {
	name   string
	grace  time.Duration
	cancel context.CancelFunc
	done   chan struct{} // closed once serve has returned and err is set
	err    error
	taken  atomic.Bool // Wait has handed serve's result to the test
}

// Run starts serve in a goroutine and, when the test ends, cancels its
// context and fails the test if serve returns an error or has not
// returned within grace. A test of shutdown itself ends it earlier with
// Stop and Wait.
func Run(t testing.TB, name string, grace time.Duration, serve func(context.Context) error) *Serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Serving{name: name, grace: grace, cancel: cancel, done: make(chan struct{})}
	go func() { s.err = serve(ctx); close(s.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
			if s.err != nil && !s.taken.Load() {
				t.Errorf("%s: Serve: %v", name, s.err)
			}
		case <-time.After(grace):
			t.Errorf("%s: Serve did not return %v after its context ended", name, grace)
		}
	})
	return s
}

// Stop cancels Serve's context without waiting for it to return.
func (s *Serving) Stop() { s.cancel() }

// Wait waits up to the grace for Serve to return and gives its result, or
// an error saying it has not returned. Serve's result, once given, is the
// test's to check: the cleanup does not report it again.
func (s *Serving) Wait() error {
	select {
	case <-s.done:
		s.taken.Store(true)
		return s.err
	case <-time.After(s.grace):
		return fmt.Errorf("%s: Serve did not return %v after its context ended", s.name, s.grace)
	}
}
