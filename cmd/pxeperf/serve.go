package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/netif"
	"github.com/pxeperf/pxeperf/netstate"
	"github.com/pxeperf/pxeperf/record"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

// serveFlags are the flags of `pxeperf serve`; set ones override the file.
type serveFlags struct {
	config, iface, addr, dhcpMode, pool, root, httpAddr, tftpAddr, benchAddr, data, logLevel string
}

// serveEnv is what every service is built from.
type serveEnv struct {
	cfg    *configs.Config
	net    *netif.Info
	logger *slog.Logger
	sink   event.Sink
	hosts  *hosts.Table
	images *images.Store
	// boot serves the root and the loader configs generated per host,
	// for TFTP and HTTP alike.
	boot *bootcfg.Source
}

// service is a started server: New* has bound its sockets; Serve returns nil
// when ctx ends.
type service interface {
	Serve(ctx context.Context) error
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve DHCP (full or proxy), TFTP and HTTP boot, and measure every fetch",
		Long: `Serve DHCP, TFTP and HTTP boot on one interface.

With no config file pxeperf runs the embedded default: proxyDHCP (answers only
PXE and HTTP-boot clients, never hands out addresses), TFTP on :69 and HTTP on
:80 serving ./images (created with a sample iPXE script when missing).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadServeConfig(cmd, &f)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "config file (YAML); default: the embedded default")
	fl.StringVar(&f.iface, "iface", "", "interface to serve on (default: first up interface with IPv4)")
	fl.StringVar(&f.addr, "addr", "", "address clients reach pxeperf at (default: the interface's first IPv4)")
	fl.StringVar(&f.dhcpMode, "dhcp", "", "DHCP mode: full, proxy or off (default proxy)")
	fl.StringVar(&f.pool, "pool", "", "address pool for --dhcp full, FIRST-LAST")
	fl.StringVar(&f.root, "root", "", "folder served over TFTP and HTTP (default ./images)")
	fl.StringVar(&f.httpAddr, "http-addr", "", "HTTP listen address HOST:PORT (default :80); \"off\" disables HTTP")
	fl.StringVar(&f.tftpAddr, "tftp-addr", "", "TFTP listen address HOST:PORT (default :69); \"off\" disables TFTP")
	fl.StringVar(&f.benchAddr, "bench-addr", "", "bench stream server HOST:PORT for `pxeperf bench --server` (default off; :5211 turns it on); \"off\" disables it")
	fl.StringVar(&f.data, "data", "", "state folder: leases, records, cache (default ./pxeperf-data)")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default info)")
	_ = cmd.RegisterFlagCompletionFunc("dhcp", cobra.FixedCompletions([]string{"full", "proxy", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagDirname("root")
	_ = cmd.MarkFlagDirname("data")
	return cmd
}

// loadServeConfig reads the file (or the default) and applies set flags.
func loadServeConfig(cmd *cobra.Command, f *serveFlags) (*configs.Config, error) {
	var cfg *configs.Config
	var err error
	if f.config != "" {
		cfg, err = configs.Load(f.config)
	} else {
		cfg = configs.Default()
	}
	if err != nil {
		return nil, err
	}
	set := cmd.Flags().Changed
	if set("iface") {
		cfg.Interface = f.iface
	}
	if set("addr") {
		a, err := netip.ParseAddr(f.addr)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("--addr %q is not an IPv4 address; write e.g. --addr 192.168.50.1", f.addr)
		}
		cfg.Address = configs.Addr{Addr: a}
	}
	if set("dhcp") {
		cfg.DHCP.Mode = f.dhcpMode
	}
	if set("pool") {
		p, err := configs.ParsePool(f.pool)
		if err != nil {
			return nil, fmt.Errorf("--pool: %w", err)
		}
		cfg.DHCP.Pool = p
	}
	if set("root") {
		cfg.Root = f.root
	}
	if set("data") {
		cfg.Data = f.data
	}
	if set("log-level") {
		cfg.LogLevel = f.logLevel
	}
	if set("http-addr") {
		cfg.HTTP.Enabled = f.httpAddr != "off"
		if cfg.HTTP.Enabled {
			cfg.HTTP.Listen = f.httpAddr
		}
	}
	if set("bench-addr") {
		cfg.Bench.Enabled = f.benchAddr != "off"
		if cfg.Bench.Enabled {
			cfg.Bench.Listen = f.benchAddr
		}
	}
	if set("tftp-addr") {
		cfg.TFTP.Enabled = f.tftpAddr != "off"
		if cfg.TFTP.Enabled {
			cfg.TFTP.Listen = f.tftpAddr
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid settings (flags over %s):\n%w", orDefault(f.config), err)
	}
	return cfg, nil
}

func orDefault(s string) string {
	if s == "" {
		return "the embedded default"
	}
	return s
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// runServe builds every service (binding all sockets first, so a busy port
// fails before anything runs), then serves until ctx ends.
func runServe(ctx context.Context, cfg *configs.Config) error {
	logger := newLogger(cfg.LogLevel)
	ni, err := netif.Resolve(cfg.Interface, cfg.Address.Addr)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return fmt.Errorf("creating data folder %s: %w (set --data to a writable folder)", cfg.Data, err)
	}
	if err := images.EnsureRoot(cfg.Root, logger); err != nil {
		return err
	}
	store, err := images.Open(cfg.Root, filepath.Join(cfg.Data, "cache"), logger,
		images.WithCacheLimits(int64(cfg.Images.CacheMaxBytes), int64(cfg.Images.MinFreeBytes)),
		images.WithMaxUnpacked(int64(cfg.Images.MaxUnpackedBytes)))
	if err != nil {
		return err
	}
	defer store.Close()
	table := hosts.New(cfg.Hosts)
	sink := event.Sink(event.Log{Logger: logger})
	if rec := openRecording(cfg.Data, ni.Iface.Name, table, logger); rec != nil {
		defer rec.close(logger)
		// The record sink first: a fetch is committed (journaled) as soon
		// as possible after its last byte, before the log line is written.
		sink = event.Multi{rec.sink, sink}
	}
	boot, err := newBootSource(cfg, ni.Addr, store, table, logger)
	if err != nil {
		return err
	}
	env := &serveEnv{
		cfg:    cfg,
		net:    ni,
		logger: logger,
		sink:   sink,
		hosts:  table,
		images: store,
		boot:   boot,
	}
	var services []service
	for _, build := range []func(*serveEnv) (service, error){newDHCPService, newTFTPService, newHTTPService, newStreamService} {
		s, err := build(env)
		if err != nil {
			releaseAll(services)
			return err
		}
		if s != nil {
			services = append(services, s)
		}
	}
	if len(services) == 0 {
		return errors.New("nothing to serve: DHCP, TFTP and HTTP are all off")
	}
	logger.Info("pxeperf serving", "iface", ni.Iface.Name, "addr", ni.Addr, "dhcp", cfg.DHCP.Mode,
		"root", cfg.Root, "data", cfg.Data, "version", versionString())
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range services {
		g.Go(func() error { return s.Serve(gctx) })
	}
	return g.Wait()
}

// recording is the record store, its journal and the sink feeding them.
type recording struct {
	store   *record.Store // nil when the store could not be opened
	journal *record.Journal
	net     *netstate.Reader
	sink    *record.Sink
}

// openRecording opens the record store and journal under the data folder.
// Serving never depends on them: a store that cannot be opened (locked by
// another process, corrupt, disk full) is a loud error, and fetches then go
// only to the journal, imported at the next start. Without a journal either
// (another serve holds the data folder), nothing is recorded.
func openRecording(data, iface string, table *hosts.Table, logger *slog.Logger) *recording {
	j, jerr := record.OpenJournal(data)
	if jerr != nil {
		logger.Error("RECORDING IS OFF: fetches are logged but not stored; serving goes on", "err", jerr)
		return nil
	}
	st, err := record.Open(data)
	if err != nil {
		logger.Error("record store unavailable; serving goes on", "err", err)
		st = nil
	}
	rec := &recording{store: st, journal: j}
	ns, err := netstate.New(netstate.DefaultTTL)
	if err != nil {
		logger.Warn("records will lack interface MTU, speed and offloads", "err", err)
	} else {
		rec.net = ns
	}
	rec.sink = record.NewSink(st, logger, record.SinkOptions{
		Journal: j, Interface: iface, Net: ns, Hosts: table,
	})
	if st != nil {
		logger.Info("recording fetches", "store", st.Path(), "journal", j.Path())
	}
	return rec
}

// close flushes the sink with a fresh timeout (ctx is already done at
// shutdown) and closes the files.
func (r *recording) close(logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.sink.Close(ctx); err != nil {
		logger.Warn("record sink: not everything reached the store before shutdown; the journal keeps the rest", "err", err)
	}
	if r.store != nil {
		if err := r.store.Close(); err != nil {
			logger.Warn("closing the record store", "err", err)
		}
	}
	_ = r.journal.Close()
	_ = r.net.Close()
}

// releaseAll closes the sockets of services already built when a later one
// fails: Serve on an ended context returns at once, having closed them.
func releaseAll(services []service) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, s := range services {
		_ = s.Serve(ctx)
	}
}
