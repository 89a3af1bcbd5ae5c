package main

import (
	"net/netip"
	"strings"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/spf13/cobra"
)

// serveFlags are the flags of `pxeperf serve`; set ones override the file.
type serveFlags struct {
	config, iface, addr, dhcpMode, pool, relays string
	root, data, store, logLevel, logFormat      string
	// The listeners, HOST:PORT or "off".
	httpAddr, tftpAddr, streamAddr, adminAddr, iperf3Addr, iperf2Addr string
	// oldStreamAddr is --bench-addr, the old name of --stream-addr.
	oldStreamAddr string
}

// addServeFlags adds serve's flags to cmd, read into f.
func addServeFlags(cmd *cobra.Command, f *serveFlags) {
	fl := cmd.Flags()
	addConfigFlag(cmd, &f.config)
	fl.StringVar(&f.iface, "iface", "", "interface to serve on (default: first up interface with IPv4)")
	fl.StringVar(&f.addr, "addr", "", "address clients reach pxeperf at, one of the interface's (default: its first IPv4)")
	fl.StringVar(&f.dhcpMode, "dhcp", "", "DHCP mode: full, proxy or off (default proxy)")
	fl.StringVar(&f.pool, "pool", "", "address pool for --dhcp full, FIRST-LAST, inside the interface's subnet")
	fl.StringVar(&f.relays, "dhcp-relays", "", "DHCP relays answered, comma-separated giaddrs or prefixes, "+
		"e.g. 10.0.8.1,10.0.12.0/22 (dhcp.relays; default none: a relayed request is dropped)")
	fl.StringVar(&f.root, "root", "", "folder served over TFTP and HTTP (default ./images)")
	fl.StringVar(&f.httpAddr, "http-addr", "", "HTTP listen address HOST:PORT (default :80); \"off\" disables HTTP")
	fl.StringVar(&f.tftpAddr, "tftp-addr", "", "TFTP listen address HOST:PORT (default :69); \"off\" disables TFTP")
	fl.StringVar(&f.streamAddr, "stream-addr", "", "stream server HOST:PORT for pxeperf bench --server "+
		"(default off; :5211 turns it on); \"off\" disables it")
	fl.StringVar(&f.oldStreamAddr, "bench-addr", "", "the old name of --stream-addr")
	_ = fl.MarkHidden("bench-addr")
	fl.StringVar(&f.adminAddr, "admin-addr", "", "admin listener HOST:PORT serving the record API /api/ "+
		"(default 127.0.0.1:9069); \"off\" disables it")
	fl.StringVar(&f.iperf3Addr, "iperf3-addr", "", "iperf3-compatible server HOST:PORT "+
		"(default off; :5201 turns it on); \"off\" disables it")
	fl.StringVar(&f.iperf2Addr, "iperf2-addr", "", "iperf 2 server HOST:PORT "+
		"(default off; :5001 turns it on); \"off\" disables it")
	fl.StringVar(&f.data, "data", "", "state folder: leases, records, cache (default ./pxeperf-data)")
	fl.StringVar(&f.store, "store", "", "record store: postgres://USER@HOST/DB shared by many servers, or sqlite:PATH "+
		"(default store.url, else <data>/pxeperf.db); the journal in --data stays the commit point")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default info)")
	fl.StringVar(&f.logFormat, "log-format", "", "text or json: json writes one object per line, fetches and leases "+
		"with the record fields (default text)")
	_ = cmd.RegisterFlagCompletionFunc("dhcp", cobra.FixedCompletions([]string{"full", "proxy", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("root")
	_ = cmd.MarkFlagDirname("data")
}

// loadServeConfig reads the config (--config, else the first of
// configSearch, else the default) and applies set flags. A flag that
// cannot be read is a usage error.
func loadServeConfig(cmd *cobra.Command, f *serveFlags) (*configs.Config, error) {
	cfg, err := findConfig(f.config) // its warnings go to the log (runServe, reloadConfig)
	if err != nil {
		return nil, err
	}
	set := cmd.Flags().Changed
	if err := applyNetworkFlags(cfg, f, set); err != nil {
		return nil, err
	}
	applyPathFlags(cfg, f, set)
	if err := applyListenFlags(cfg, f, set); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, usageErrorf("invalid settings (flags over %s):\n%w", configName(cfg), err)
	}
	return cfg, nil
}

// applyNetworkFlags applies --iface, --addr, --dhcp, --pool and
// --dhcp-relays; a value that does not parse is a usage error.
func applyNetworkFlags(cfg *configs.Config, f *serveFlags, set func(string) bool) error {
	// Flags choose as the file does (see configs.Config.IsSet).
	for flag, key := range map[string]string{"iface": "interface", "addr": "address", "dhcp": "dhcp.mode"} {
		if set(flag) {
			if cfg.Set == nil {
				cfg.Set = map[string]bool{}
			}
			cfg.Set[key] = true
		}
	}
	if set("iface") {
		cfg.Interface = f.iface
	}
	if set("addr") {
		a, err := netip.ParseAddr(f.addr)
		if err != nil || !a.Is4() {
			return usageErrorf("--addr %q is not an IPv4 address; write e.g. --addr 192.168.50.1", f.addr)
		}
		cfg.Address = configs.Addr{Addr: a}
	}
	if set("dhcp") {
		cfg.DHCP.Mode = f.dhcpMode
	}
	if set("pool") {
		p, err := configs.ParsePool(f.pool)
		if err != nil {
			return usageErrorf("--pool: %w", err)
		}
		if cfg.DHCP.Mode != configs.ModeFull {
			return usageErrorf("--pool is for --dhcp full; in %s mode pxeperf hands out no addresses "+
				"(dhcp.mode from %s): add --dhcp full, or drop --pool", cfg.DHCP.Mode, configName(cfg))
		}
		cfg.DHCP.Pool = p
	}
	if set("dhcp-relays") {
		cfg.DHCP.Relays = nil
		for _, r := range strings.Split(f.relays, ",") {
			p, err := configs.ParsePrefix(strings.TrimSpace(r))
			if err != nil {
				return usageErrorf("--dhcp-relays: %w", err)
			}
			cfg.DHCP.Relays = append(cfg.DHCP.Relays, p)
		}
	}
	return nil
}

// applyPathFlags applies the folder, store and log flags, taken as given
// (Validate checks them).
func applyPathFlags(cfg *configs.Config, f *serveFlags, set func(string) bool) {
	for _, p := range []struct {
		flag, val string
		to        *string
	}{{"root", f.root, &cfg.Root}, {"data", f.data, &cfg.Data}, {"log-level", f.logLevel, &cfg.LogLevel},
		{"store", f.store, &cfg.Store.URL}, {"log-format", f.logFormat, &cfg.LogFormat}} {
		if set(p.flag) {
			*p.to = p.val
		}
	}
}

// applyListenFlags applies the --*-addr flags: HOST:PORT turns the service
// on there, "off" turns it off (the admin listener takes "off" as its
// listen value). The old --bench-addr is read as --stream-addr, with a
// warning; both at once is a usage error.
func applyListenFlags(cfg *configs.Config, f *serveFlags, set func(string) bool) error {
	if set("bench-addr") {
		if set("stream-addr") {
			return usageErrorf("--bench-addr is the old name of --stream-addr: give --stream-addr alone")
		}
		f.streamAddr = f.oldStreamAddr
		given := set
		set = func(flag string) bool { return flag == "stream-addr" || given(flag) }
		cfg.Warnings = append(cfg.Warnings, "--bench-addr was renamed --stream-addr; read as --stream-addr for now: rename the flag")
	}
	if set("admin-addr") {
		cfg.Admin.Listen = f.adminAddr
	}
	for _, a := range []struct {
		flag, val string
		enabled   *bool
		listen    *string
	}{
		{"http-addr", f.httpAddr, &cfg.HTTP.Enabled, &cfg.HTTP.Listen},
		{"stream-addr", f.streamAddr, &cfg.Stream.Enabled, &cfg.Stream.Listen},
		{"iperf3-addr", f.iperf3Addr, &cfg.Iperf3.Enabled, &cfg.Iperf3.Listen},
		{"iperf2-addr", f.iperf2Addr, &cfg.Iperf2.Enabled, &cfg.Iperf2.Listen},
		{"tftp-addr", f.tftpAddr, &cfg.TFTP.Enabled, &cfg.TFTP.Listen},
	} {
		if set(a.flag) {
			*a.enabled = a.val != "off"
			if *a.enabled {
				*a.listen = a.val
			}
		}
	}
	return nil
}
