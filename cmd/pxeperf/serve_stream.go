package main

import (
	"github.com/pxeperf/pxeperf/stream"
)

// newStreamService builds the stream server, pxeperf's own throughput
// server (TCP/UDP tests for `pxeperf bench --server HOST`), when
// stream.enabled is set.
func newStreamService(env *serveEnv) (service, error) {
	c := &env.cfg.Stream
	if !c.Enabled {
		return nil, nil
	}
	s, err := stream.NewServer(c.Listen, env.logger.With("svc", "stream"))
	if err != nil {
		return nil, err
	}
	env.logger.Info("stream server listening", "addr", s.Addr().String(), "max_duration", stream.MaxDuration,
		"max_rate_bps", int64(stream.MaxRate))
	return s, nil
}
