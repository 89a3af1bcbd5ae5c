package tftp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/pxeperf/pxeperf/event"
)

// The package's external tests (package tftp_test, which call the client
// as a user does) start the server and open sockets with the internal
// tests' helpers.

// StartServer is startServer for the external tests: the server's
// address, its root and the recorder of its events.
func StartServer(t testing.TB, cfg Config) (addr netip.AddrPort, root string, rec *event.Recorder) {
	t.Helper()
	ts := startServer(t, cfg)
	return ts.Addr(), ts.root, ts.rec
}

// LoopbackConn is loopbackConn for the external tests.
func LoopbackConn(t testing.TB) *net.UDPConn {
	t.Helper()
	return loopbackConn(t)
}
