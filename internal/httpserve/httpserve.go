// Package httpserve runs an http.Server in the shape of every pxeperf
// service: Serve returns nil when its context ends, after the requests in
// flight had their grace.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Hooks are told how a shutdown goes; nil ones are skipped.
type Hooks struct {
	// Stopping runs once ctx has ended, before the grace begins.
	Stopping func()
	// Late runs when requests are still running after the grace (err is
	// Shutdown's), just before they are closed.
	Late func(err error)
}

// Serve serves srv on ln until ctx ends, then stops accepting and lets
// the requests in flight finish for up to grace before closing them. The
// grace runs on a fresh context: ctx is already done, and an image
// download in flight deserves its time. It returns nil when ctx ends,
// else srv.Serve's error.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, h Hooks) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if h.Stopping != nil {
		h.Stopping()
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if h.Late != nil {
			h.Late(err)
		}
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
