package main

import (
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/perfsrv"
)

// perfsrvConfig is the perfsrv config of one iperf section.
func perfsrvConfig(env *serveEnv, c *configs.Iperf, svc string) perfsrv.Config {
	return perfsrv.Config{
		Addr: c.Listen,
		Limits: perfsrv.Limits{MaxTests: c.MaxTests, MaxPerClient: c.MaxPerClient, MaxDuration: c.MaxDuration,
			MaxRate: c.MaxRateMbps * 1e6, MaxStreams: c.MaxStreams,
			MinUDPLen: c.MinUDPLen, MaxPPS: c.MaxPPS, MaxPPSTotal: c.MaxPPSTotal},
		Interval: env.cfg.HTTP.Interval,
		Sink:     env.sink,
		Clients:  env.hosts,
		Log:      env.logger.With("svc", svc),

		VerifiedFor: c.VerifiedFor,
	}
}

// newIperf3Service builds the iperf3-compatible server when iperf3.enabled
// is set.
func newIperf3Service(env *serveEnv) (service, error) {
	c := &env.cfg.Iperf3
	if !c.Enabled {
		return nil, nil
	}
	s, err := perfsrv.NewIperf3(perfsrvConfig(env, c, "iperf3"))
	if err != nil {
		return nil, err
	}
	env.logger.Info("iperf3 server listening", "addr", s.Addr().String(), "max_tests", c.MaxTests,
		"max_per_client", c.MaxPerClient, "max_duration", c.MaxDuration, "max_rate_mbps", c.MaxRateMbps,
		"min_udp_len", c.MinUDPLen, "max_pps", c.MaxPPS, "max_pps_total", c.MaxPPSTotal)
	return s, nil
}

// newIperf2Service builds the iperf 2 server when iperf2.enabled is set.
func newIperf2Service(env *serveEnv) (service, error) {
	c := &env.cfg.Iperf2
	if !c.Enabled {
		return nil, nil
	}
	s, err := perfsrv.NewIperf2(perfsrvConfig(env, c, "iperf2"))
	if err != nil {
		return nil, err
	}
	env.logger.Info("iperf2 server listening", "addr", s.Addr().String(), "max_tests", c.MaxTests,
		"max_per_client", c.MaxPerClient, "max_duration", c.MaxDuration, "max_rate_mbps", c.MaxRateMbps,
		"min_udp_len", c.MinUDPLen, "max_pps", c.MaxPPS, "max_pps_total", c.MaxPPSTotal, "verified_for", c.VerifiedFor)
	return s, nil
}
