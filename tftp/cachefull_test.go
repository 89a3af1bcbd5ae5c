package tftp

import (
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/imagetest"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// TestCacheFullIsDiskFull: an image that exists but does not fit in the
// unpack cache is refused with RFC 1350's error 3 ("Disk full or
// allocation exceeded"), not 0, so the board knows to retry.
func TestCacheFullIsDiskFull(t *testing.T) {
	store := imagetest.FullCache(t)
	rec := &event.Recorder{}
	s, err := New(Config{Listen: "127.0.0.1:0", MTU: 1500, Files: bootcfg.RootOnly(store), Sink: rec, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "tftp", 15*time.Second, s.Serve)

	c := newRawClient(t, s.Addr())
	c.send(s.Addr(), rq(opRRQ, "initrd.img", "octet"))
	b, _ := c.recv()
	if code := errCode(t, b); code != errDiskFull {
		t.Errorf("error code %d (%q), want %d", code, b[4:], errDiskFull)
	}
}
