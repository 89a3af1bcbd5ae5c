package main

import (
	"github.com/pxeperf/pxeperf/tftp"
)

// newTFTPService builds the TFTP server when enabled, sized to the serving
// interface's MTU.
func newTFTPService(env *serveEnv) (service, error) {
	c := &env.cfg.TFTP
	if !c.Enabled {
		return nil, nil
	}
	s, err := tftp.New(tftp.Config{
		Listen:                c.Listen,
		Interface:             env.net.Iface.Name,
		MTU:                   env.net.Iface.MTU,
		MaxBlockSize:          c.MaxBlockSize,
		MaxWindowSize:         c.MaxWindowSize,
		UBootMaxWindowSize:    ubootWindow(c.UBootMaxWindowSize),
		Timeout:               c.Timeout,
		Retries:               c.Retries,
		SinglePort:            c.SinglePort,
		MaxTransfers:          c.MaxTransfers,
		MaxTransfersPerClient: c.MaxTransfersPerClient,
		MaxClientTimeout:      c.MaxClientTimeout,
		MaxTransferTime:       c.MaxTransferTime,
		MinRate:               minRate(c.MinRateKiBps),
		ErrorRecordsPerMinute: c.ErrorRecordsPerMinute,
		SinglePortBudget:      int64(c.SinglePortBudgetKiB) << 10,
		TransferThreads:       transferThreads(c.TransferThreads),
		Files:                 env.boot,
		Hosts:                 env.hosts,
		Sink:                  env.sink,
		Active:                env.live.activeOrNil(),
		Logger:                env.logger,
	})
	if err != nil {
		return nil, err
	}
	env.logger.Info("tftp listening", "addr", s.Addr().String(), "max_blksize", s.MaxBlockSize(),
		"max_windowsize", c.MaxWindowSize, "uboot_max_windowsize", c.UBootMaxWindowSize,
		"single_port", c.SinglePort)
	return s, nil
}

// ubootWindow maps tftp.uboot_max_windowsize (0: no cap) to
// tftp.Config.UBootMaxWindowSize (0: the default, negative: no cap).
func ubootWindow(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// minRate maps tftp.min_rate_kibps (0: never) to tftp.Config.MinRate
// (bytes a second; 0: the default, negative: never).
func minRate(kibps int) int64 {
	if kibps == 0 {
		return -1
	}
	return int64(kibps) << 10
}

// transferThreads maps tftp.transfer_threads (0: none) to
// tftp.Config.TransferThreads (0: the default, negative: none).
func transferThreads(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
