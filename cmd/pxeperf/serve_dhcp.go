package main

import (
	"context"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/dhcp"
)

// newDHCPService builds the DHCP server (full or proxy) bound to the serving
// interface, or nil when dhcp.mode is off.
func newDHCPService(env *serveEnv) (service, error) {
	if env.cfg.DHCP.Mode == configs.ModeOff {
		return nil, nil
	}
	return dhcp.New(context.Background(), dhcp.Options{
		Config: env.cfg,
		Iface:  env.net.Iface.Name,
		Addr:   env.net.Addr,
		Prefix: env.net.Prefix,
		Hosts:  env.hosts,
		Sink:   env.sink,
		Logger: env.logger,
	})
}
