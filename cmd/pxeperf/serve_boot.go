package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path"
	"strings"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
)

// newBootSource builds the lookup TFTP and HTTP share (root files, then
// loader configs generated per host): every template is parsed now, so a
// broken one stops serve at start with its key, line and fix. It logs
// what a board would otherwise find out by failing: boot files nothing
// serves, host entries' files not in the root, and root files that
// replace a generated config.
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
	var absent []string
	checked := src.CheckBootFiles(cfg)
	for _, r := range checked {
		switch {
		case !r.Missing():
		case images.IsShim(r.File): // shimWarnings names the package
		case mustBoot(cfg, r.Key):
			logger.Warn("boot file missing: " + r.Warning(cfg.Root))
		default:
			absent = append(absent, r.Key)
		}
	}
	for _, h := range src.CheckHostFiles(cfg) {
		logger.Warn("host file missing: " + h.Problem(cfg.Root))
	}
	for _, w := range shimWarnings(checked, store, cfg.Root) {
		logger.Warn(w)
	}
	if len(absent) > 0 {
		logger.Info("no boot file for some architectures: their boards get no boot offer "+
			"(pxeperf config check names the file and the fix for each)", "archs", strings.Join(absent, ","))
	}
	for _, line := range bootSummary(cfg, src) {
		logger.Info(line)
	}
	return src, nil
}

// shimWarnings names what a boot file that is a shim lacks: the shim
// itself or the grubx64.efi it loads from beside itself, in neither the
// root nor the host's package (images.SignedLoaders), with the package to
// install. Without either, a Secure Boot client stops at the firmware.
func shimWarnings(rs []bootcfg.Resolution, store *images.Store, root string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !images.IsShim(r.File) || strings.Contains(r.File, "://") || seen[r.File] {
			continue
		}
		seen[r.File] = true
		dir := r.File[:strings.LastIndexByte(r.File, '/')+1]
		for _, n := range []string{r.File, dir + "grubx64.efi"} {
			if _, err := store.Source(n); err == nil {
				continue
			}
			pkg := images.SignedPackages[path.Base(n)]
			if pkg == "" {
				pkg = "shim-signed, grub-efi-amd64-signed"
			}
			out = append(out, fmt.Sprintf("dhcp.boot_files.%s: %s names a shim, but %s is not in %s nor installed by the host's packages, "+
				"so Secure Boot clients cannot boot; apt-get install %s, or put your signed %s in the root", r.Key, r.File, n, root, pkg, n))
		}
	}
	return out
}

// commonBoot are the boot-file keys most boards use: a missing one is
// warned about at start. Other architectures' (ia32, arm32, arm64,
// riscv, loongarch64, rpiboot) files are absent from most labs, and
// named together in one INFO line.
var commonBoot = map[string]bool{"bios": true, "efi-x64": true, configs.BootUBoot: true, configs.BootDefault: true}

// mustBoot reports whether a missing boot file for key is a warning:
// the architecture is a common one, or the config file names its file.
func mustBoot(cfg *configs.Config, key string) bool {
	return commonBoot[key] || cfg.IsSet("dhcp.boot_files."+key)
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
