package httpserve

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServe: Serve returns nil when its context ends, after a request in
// flight finished within the grace; one still running past the grace is
// closed and Late is told; a listener that fails is Serve's error.
func TestServe(t *testing.T) {
	for name, tc := range map[string]struct {
		hold     time.Duration // how long the request takes
		wantLate bool
	}{
		"finishes within the grace": {hold: 100 * time.Millisecond},
		"closed after the grace":    {hold: 5 * time.Second, wantLate: true},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				select {
				case <-time.After(tc.hold):
				case <-r.Context().Done():
				}
			})}
			ctx, cancel := context.WithCancel(context.Background())
			stopping, late := false, false
			done := make(chan error, 1)
			go func() {
				done <- Serve(ctx, srv, ln, time.Second, Hooks{Stopping: func() { stopping = true }, Late: func(error) { late = true }})
			}()
			go func() { _, _ = http.Get("http://" + ln.Addr().String()) }()
			<-started
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if !stopping || late != tc.wantLate {
				t.Errorf("stopping %v late %v, want true %v", stopping, late, tc.wantLate)
			}
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := Serve(context.Background(), &http.Server{}, ln, time.Second, Hooks{}); err == nil {
		t.Error("Serve on a closed listener returned nil")
	}
}
