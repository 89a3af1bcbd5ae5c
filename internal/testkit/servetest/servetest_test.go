package servetest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps what Errorf says.
type recorder struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper()                        {}
func (r *recorder) Cleanup(f func())               { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, a ...any) { r.errs = append(r.errs, format) }
func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestRun: Serve runs until the test ends and its context is cancelled
// then; an error from it, or a Serve that does not return, fails the test.
func TestRun(t *testing.T) {
	tests := map[string]struct {
		serve   func(ctx context.Context, late <-chan struct{}) error
		wantErr bool
	}{
		"returns nil when ctx ends": {func(ctx context.Context, _ <-chan struct{}) error { <-ctx.Done(); return nil }, false},
		"returns an error": {func(ctx context.Context, _ <-chan struct{}) error {
			<-ctx.Done()
			return errors.New("socket failed")
		}, true},
		"returns only after the grace": {func(ctx context.Context, late <-chan struct{}) error {
			<-ctx.Done()
			<-late
			return nil
		}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{TB: t}
			started, late := make(chan struct{}), make(chan struct{})
			defer close(late)
			Run(r, name, 50*time.Millisecond, func(ctx context.Context) error {
				close(started)
				return tc.serve(ctx, late)
			})
			<-started
			r.end()
			if got := len(r.errs) > 0; got != tc.wantErr {
				t.Errorf("test failed: %v (%v), want %v", got, r.errs, tc.wantErr)
			}
		})
	}
}

// TestStopWait: Stop ends Serve's context mid-test and Wait gives Serve's
// result (then the cleanup does not report it again), or says that Serve
// has not returned within the grace.
func TestStopWait(t *testing.T) {
	tests := map[string]struct {
		serve       func(ctx context.Context, late <-chan struct{}) error
		wantWaitErr string
	}{
		"nil": {func(ctx context.Context, _ <-chan struct{}) error { <-ctx.Done(); return nil }, ""},
		"an error": {func(ctx context.Context, _ <-chan struct{}) error {
			<-ctx.Done()
			return errors.New("socket failed")
		}, "socket failed"},
		"no return within the grace": {func(ctx context.Context, late <-chan struct{}) error {
			<-ctx.Done()
			<-late
			return nil
		}, "svc: Serve did not return 50ms after its context ended"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{TB: t}
			late := make(chan struct{})
			s := Run(r, "svc", 50*time.Millisecond, func(ctx context.Context) error { return tc.serve(ctx, late) })
			s.Stop()
			err := s.Wait()
			close(late)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantWaitErr {
				t.Errorf("Wait = %q, want %q", got, tc.wantWaitErr)
			}
			r.end()
			if len(r.errs) > 0 {
				t.Errorf("the cleanup reported %v after Wait gave the result", r.errs)
			}
		})
	}
}

// TestWaitWithoutStop: a Serve that ends on its own (a socket error) is
// Wait's to report, without Stop.
func TestWaitWithoutStop(t *testing.T) {
	r := &recorder{TB: t}
	s := Run(r, "svc", 5*time.Second, func(context.Context) error { return errors.New("bind lost") })
	if err := s.Wait(); err == nil || err.Error() != "bind lost" {
		t.Errorf("Wait = %v, want bind lost", err)
	}
	r.end()
}
