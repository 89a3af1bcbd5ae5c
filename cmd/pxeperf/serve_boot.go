package main

import (
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
)

// newBootSource builds the lookup TFTP and HTTP share (root files, then
// loader configs generated per host): every template is parsed now, so a
// broken one stops serve at start with its key, line and fix. It logs
// what a board would otherwise find out by failing: boot files nothing
// serves, and root files that replace a generated config.
func newBootSource(cfg *configs.Config, addr netip.Addr, store *images.Store, table *hosts.Table, logger *slog.Logger) (*bootcfg.Source, error) {
	base := ""
	if cfg.HTTP.Enabled {
		base = cfg.HTTPBase(addr)
	}
	src, err := bootcfg.New(bootcfg.Options{Config: cfg, Images: store, Hosts: table, Server: addr,
		HTTPBase: base, Logger: logger})
	if err != nil {
		return nil, usageErrorf("boot config templates:\n%w", err)
	}
	for _, r := range src.CheckBootFiles(cfg) {
		if r.Missing() {
			logger.Warn("boot file missing: " + r.Warning(cfg.Root))
		}
	}
	for _, line := range bootSummary(cfg, src) {
		logger.Info(line)
	}
	return src, nil
}

// bootSummary says which boot configs are served from the root and which
// are generated, one line each, for the log and `config check`.
func bootSummary(cfg *configs.Config, src *bootcfg.Source) []string {
	var out []string
	for _, n := range src.Shadowed(cfg.Hosts) {
		out = append(out, fmt.Sprintf("%s: served from the root (replaces the config pxeperf would generate)", n))
	}
	if cfg.HTTP.Enabled {
		if from, err := src.RootSource(cfg.DHCP.IPXEScript); err == nil && from == "root" {
			out = append(out, fmt.Sprintf("%s: served from the root (replaces the generated iPXE script)", cfg.DHCP.IPXEScript))
		}
	}
	for _, h := range cfg.Hosts {
		if h.Kernel == "" {
			continue
		}
		chain := bootcfg.PXELinuxChain(h.MAC.HardwareAddr, netip.Addr{})
		out = append(out, fmt.Sprintf("host %s (%s): generated %s, %s, boot.scr.uimg and the iPXE script boot %s",
			h.Name, h.MAC, chain[0], bootcfg.GRUBChain(h.MAC.HardwareAddr, netip.Addr{})[0], h.Kernel))
	}
	return out
}
