package main

import (
	"github.com/pxeperf/pxeperf/stream"
)

// newStreamService builds the bench stream server (TCP/UDP throughput tests
// for `pxeperf bench --server HOST`) when bench.enabled is set.
func newStreamService(env *serveEnv) (service, error) {
	c := &env.cfg.Bench
	if !c.Enabled {
		return nil, nil
	}
	s, err := stream.NewServer(c.Listen, env.logger.With("svc", "bench"))
	if err != nil {
		return nil, err
	}
	env.logger.Info("bench stream server listening", "addr", s.Addr().String(), "max_duration", stream.MaxDuration,
		"max_rate_bps", int64(stream.MaxRate))
	return s, nil
}
