package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/pxeperf/pxeperf/internal/netif"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/dhcp"
)

// newDHCPService builds the DHCP server (full or proxy) bound to the serving
// interface, or nil when dhcp.mode is off or DHCP is held (pickFor).
func newDHCPService(env *serveEnv) (service, error) {
	if env.cfg.DHCP.Mode == configs.ModeOff || env.dhcpHeld {
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

// interfacePick is how serve came to its interface, and whether DHCP is
// held off because of it.
type interfacePick struct {
	auto   bool // no interface or address was named: netif picked it
	uplink bool // it holds the default route
	held   bool // auto, and dhcp.mode not chosen: DHCP stays off
}

// pickFor decides whether serve may answer DHCP on the interface it
// serves. An interface named by --iface or --addr (interface: or address:
// in the config) is served as dhcp.mode says. One serve picked itself
// (the first up interface with IPv4, on a workstation the uplink) gets
// TFTP and HTTP, but no DHCP or proxyDHCP unless the mode was chosen by
// --dhcp or dhcp.mode in a config file: the embedded default never
// answers PXE clients on a network nobody named.
func pickFor(cfg *configs.Config, ni *netif.Info) interfacePick {
	p := interfacePick{auto: !cfg.IsSet("interface") && !cfg.IsSet("address") && cfg.Interface == "" && !cfg.Address.IsValid()}
	p.uplink = netif.DefaultRoute()[ni.Iface.Name]
	p.held = p.auto && cfg.DHCP.Mode != configs.ModeOff && !cfg.IsSet("dhcp.mode")
	return p
}

// dhcpOn reports whether DHCP will be served.
func (p interfacePick) dhcpOn(cfg *configs.Config) bool {
	return cfg.DHCP.Mode != configs.ModeOff && !p.held
}

// log says which interface serve picked and why, and how to pick another.
func (p interfacePick) log(logger *slog.Logger, cfg *configs.Config, ni *netif.Info) {
	if !p.auto {
		return
	}
	why := "the first up interface with IPv4"
	if p.uplink {
		why += "; it holds the default route (the uplink: likely not the lab network)"
	}
	others := strings.Join(netif.Candidates(), ", ")
	switch {
	case p.held:
		logger.Warn("DHCP and proxyDHCP are off: no interface was named, so pxeperf answers no PXE client; "+
			"TFTP and HTTP are served", "iface", ni.Iface.Name, "addr", ni.Addr, "picked", why, "interfaces", others,
			"fix", "name the lab network's interface: pxeperf serve --iface NAME (interface: in the config); "+
				"--dhcp "+cfg.DHCP.Mode+" answers on "+ni.Iface.Name+" as picked")
	case cfg.DHCP.Mode != configs.ModeOff && p.uplink:
		logger.Warn("answering "+cfg.DHCP.Mode+" DHCP on an interface nobody named that holds the default route",
			"iface", ni.Iface.Name, "addr", ni.Addr, "picked", why, "interfaces", others,
			"fix", "pxeperf serve --iface NAME (interface: in the config) picks the lab network's")
	default:
		logger.Info("serving on an interface nobody named", "iface", ni.Iface.Name, "addr", ni.Addr, "picked", why,
			"interfaces", others, "fix", "pxeperf serve --iface NAME (interface: in the config) picks another")
	}
}
