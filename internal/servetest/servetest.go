// Package servetest runs a service's Serve(ctx) for the length of a test:
// the shape every pxeperf service has (New binds, Serve returns nil when
// ctx ends), and the one a test needs to start and stop it cleanly.
package servetest

import (
	"context"
	"testing"
	"time"
)

// Run starts serve in a goroutine and, when the test ends, cancels its
// context and fails the test if serve returns an error or has not
// returned within grace.
func Run(t testing.TB, name string, grace time.Duration, serve func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: Serve: %v", name, err)
			}
		case <-time.After(grace):
			t.Errorf("%s: Serve did not return %v after its context ended", name, grace)
		}
	})
}
