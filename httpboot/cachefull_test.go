package httpboot

import (
	"net/http"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/imagetest"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// TestCacheFullIs503: an image that exists but does not fit in the unpack
// cache gets 503 with Retry-After, not a 500 and a warning per request.
func TestCacheFullIs503(t *testing.T) {
	store := imagetest.FullCache(t)
	rec := &event.Recorder{}
	s, err := New(Options{HTTP: defaultHTTP(), Images: store, Sink: rec})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "http", 15*time.Second, s.Serve)

	resp, err := rawClient().Get("http://" + s.Addr().String() + "/initrd.img")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	fs, _ := rec.WaitFetches(1, 5*time.Second)
	if len(fs) != 1 || fs[0].Outcome != event.OutcomeError {
		t.Errorf("fetch events %+v, want one with outcome error", fs)
	}
}
