//go:build linux

package bench

import "github.com/pxeperf/pxeperf/event"

// Compile-time guards: the servers' event sink, and a driver per protocol
// and target.
var (
	_ event.Sink = (*matcher)(nil)
	_ driver     = (*testbedHTTP)(nil)
	_ driver     = (*testbedTFTP)(nil)
	_ driver     = (*testbedStreams)(nil)
)
