package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/datalock"
	"github.com/pxeperf/pxeperf/internal/netif"
	"github.com/pxeperf/pxeperf/metrics"
	"github.com/pxeperf/pxeperf/netstate"
	"github.com/pxeperf/pxeperf/notify"
	"github.com/pxeperf/pxeperf/record"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sync/errgroup"
)

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
	// live is what the admin listener shows of serving as it happens:
	// transfers in progress, metrics, the dashboard (serve_live.go).
	live *liveState
	// built holds the services built so far, by name, for the admin
	// listener's metrics (built last).
	built map[string]service
	// records is the record sink, nil when nothing is recorded; both
	// /healthz report its health.
	records *record.Sink
	// dhcpHeld: DHCP stays off although dhcp.mode is on, because no
	// interface was named and the mode was not chosen (see pickFor).
	dhcpHeld bool
	// hostStore is the run-time hosts (<data>/hosts.json) merged with the
	// config's; every change to them, SIGHUP's too, goes through it.
	hostStore *hosts.Store
	// milestones is where host changes and boot milestones go: the log
	// until a fan-out is Set on it.
	milestones *milestoneRelay
	// events fans milestones out (serve_events.go); webhook is its
	// webhook, nil without events.webhook_url.
	events  *notify.Fanout
	webhook *notify.Webhook
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

With no config file (--config, ./pxeperf.yaml or /etc/pxeperf/pxeperf.yaml)
pxeperf runs the embedded default: TFTP on :69 and HTTP on :80 serving
./images (created with a sample iPXE script when missing), the record API
(/api/) on the admin listener 127.0.0.1:9069, away from the boards, and
proxyDHCP (answers only PXE and HTTP-boot clients, never hands out
addresses) once an interface is named: --iface NAME. Without one, serve
picks the first up interface with IPv4 (on a workstation the uplink) and
answers no DHCP there unless --dhcp (dhcp.mode) chooses a mode.

Without root, serve needs CAP_NET_BIND_SERVICE (ports below 1024) and,
on some kernels, CAP_NET_RAW (DHCP bound to the interface); lacking them
it stops before creating anything and says which.

Signals: SIGINT and SIGTERM stop serving (running HTTP downloads get
http.shutdown_grace to finish). SIGHUP reloads hosts[] and templates.* from
the config file: when the new file is invalid the old settings stay and the
log says why. Other keys (interface, ports, pool, ...) need a restart.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadServeConfig(cmd, &f)
			if err != nil {
				return err
			}
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer signal.Stop(sigs)
			return runServe(cmd.Context(), cfg, serveSignals{
				c:      sigs,
				reload: func() (*configs.Config, error) { return loadServeConfig(cmd, &f) },
			})
		},
	}
	addServeFlags(cmd, &f)
	return cmd
}

func newLogger(level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return metrics.NewLogger(os.Stderr, format, l)
}

// serveSignals is what serve listens to: c delivers SIGINT/SIGTERM (stop)
// and SIGHUP (reload reads the config again); a nil c: only ctx stops.
type serveSignals struct {
	c      <-chan os.Signal
	reload func() (*configs.Config, error)
}

// namedService is a built service and the name the log gives it.
type namedService struct {
	name string
	service
}

// runServe builds every service (binding all sockets first, so a busy port
// fails before anything runs), then serves until ctx ends or a stop signal
// arrives.
func runServe(ctx context.Context, cfg *configs.Config, sig serveSignals) error {
	logger := newLogger(cfg.LogLevel, cfg.LogFormat)
	for _, w := range cfg.Warnings {
		logger.Warn(w)
	}
	pre, err := preflight(cfg, logger)
	if err != nil {
		return err
	}
	data, err := ensureFolder("data", "--data", cfg.Data, logger)
	if err != nil {
		return err
	}
	// The data folder is single-owner: a second serve is refused here,
	// before it touches the journals or the image cache and its temp files.
	lock, err := datalock.Acquire(data)
	if err != nil {
		return err
	}
	defer lock.Release()
	applier := &hostApplier{}
	milestones := &milestoneRelay{log: logMilestones{logger: logger}}
	hostStore, err := openHostStore(cfg, data, applier, milestones, logger)
	if err != nil {
		return err
	}
	store, err := openImages(cfg, pre.root, logger)
	if err != nil {
		return err
	}
	defer store.Close()
	env, closeRecording, err := newServeEnv(cfg, pre, store, logger, hostStore, milestones)
	if err != nil {
		return err
	}
	defer closeRecording()
	applier.env = env
	services, err := buildServices(env)
	if err != nil {
		return err
	}
	dhcpMode := cfg.DHCP.Mode
	if pre.pick.held {
		dhcpMode = "off (no interface named)"
	}
	logger.Info("pxeperf serving", "iface", pre.net.Iface.Name, "addr", pre.net.Addr, "dhcp", dhcpMode,
		"root", cfg.Root, "data", data, "config", configName(cfg), "version", versionString())
	return serveUntilStopped(ctx, env, services, sig)
}

// preflighted is what serve knows once the settings and privileges are
// checked: the interface, the DHCP pick and the root folder.
type preflighted struct {
	net  *netif.Info
	pick interfacePick
	root string
}

// preflight checks the settings against the interface and the privileges
// serve needs. Nothing is created before they are known to be good: a run
// without root fails here, leaving no ./images or ./pxeperf-data behind.
func preflight(cfg *configs.Config, logger *slog.Logger) (preflighted, error) {
	ni, err := netif.Resolve(cfg.Interface, cfg.Address.Addr)
	if err != nil {
		return preflighted{}, err
	}
	if err := checkNetSettings(cfg, ni); err != nil {
		return preflighted{}, err
	}
	pick := pickFor(cfg, ni)
	root, err := folderFor("root", "--root", cfg.Root)
	if err != nil {
		return preflighted{}, err
	}
	if _, err := folderFor("data", "--data", cfg.Data); err != nil {
		return preflighted{}, err
	}
	if err := checkPrivileges(cfg, pick.dhcpOn(cfg), ni.Iface.Name); err != nil {
		return preflighted{}, err
	}
	pick.log(logger, cfg, ni)
	return preflighted{net: ni, pick: pick, root: root}, nil
}

// openImages makes the root (with its sample script when new) and opens the
// image store over it, its decompression cache in the data folder.
func openImages(cfg *configs.Config, root string, logger *slog.Logger) (*images.Store, error) {
	if err := images.EnsureRoot(root, logger); err != nil {
		return nil, err
	}
	if goSourceFolder(root) {
		logger.Warn("the root is a Go source folder (serve runs in a checkout of pxeperf, whose images/ package "+
			"shares the default root's name): run serve from a folder of its own, or set --root", "root", root)
	}
	return images.Open(cfg.Root, filepath.Join(cfg.Data, "cache"), logger,
		images.WithCacheLimits(int64(cfg.Images.CacheMaxBytes), int64(cfg.Images.MinFreeBytes)),
		images.WithMaxUnpacked(int64(cfg.Images.MaxUnpackedBytes)))
}

// newServeEnv builds what the services share: the hosts table, the live
// state, the event sink chain (with the record sink when recording) and the
// boot config source. closeRecording flushes and closes the record store at
// shutdown; when err is set it has already run.
func newServeEnv(cfg *configs.Config, pre preflighted, store *images.Store, logger *slog.Logger,
	hostStore *hosts.Store, milestones *milestoneRelay) (env *serveEnv, closeRecording func(), err error) {
	table := hosts.New(cfg.Hosts)
	live, err := newLiveState(cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	env = &serveEnv{
		cfg:      cfg,
		net:      pre.net,
		logger:   logger,
		hosts:    table,
		images:   store,
		live:     live,
		built:    map[string]service{},
		dhcpHeld: pre.pick.held,

		hostStore:  hostStore,
		milestones: milestones,
	}
	closeRecording = func() {}
	rec := openRecording(cfg, pre.net.Iface.Name, table, logger)
	if rec != nil {
		env.records = rec.sink
		if live != nil {
			live.records = rec.sink
		}
		closeRecording = func() { rec.close(logger) }
	}
	stopEvents, err := startEvents(env, rec) // env.events, before the chain that may emit to it
	if err != nil {
		closeRecording()
		return nil, nil, err
	}
	closeRec := closeRecording
	closeRecording = func() { stopEvents(); closeRec() }
	milestones.Set(env.events)                                                                                      // host changes and boot milestones: records, the event stream, the webhook
	env.sink = event.Multi{eventChain(cfg, logger, live, rec, table, bootWatch(hostStore, milestones)), env.events} // leases: dhcp-ack
	env.boot, err = newBootSource(cfg, pre.net.Addr, store, table, logger)
	if err != nil {
		closeRecording()
		return nil, nil, err
	}
	return env, closeRecording, nil
}

// eventChain is the sink every service reports to: host stamping, then the
// record sink (when recording), the live state's sinks and the log line.
//
// watch (boot milestones, once next boots) comes right after the record
// sink: it sees every fetch stamped with its MAC.
func eventChain(cfg *configs.Config, logger *slog.Logger, live *liveState, rec *recording, table *hosts.Table, watch event.Sink) event.Sink {
	// JSON lines carry the record store's field names; the text format
	// keeps its established keys (rtt=, max_wnd=), which tests and lab
	// scripts read.
	var logSink event.Sink = event.Log{Logger: logger}
	if cfg.LogFormat == "json" {
		logSink = metrics.Log{Logger: logger}
	}
	sink := event.Sink(append(event.Multi(live.sinks()), logSink))
	sink = event.Multi{watch, sink}
	if rec != nil {
		// The record sink first: a fetch is committed (journaled) as soon
		// as possible after its last byte, before the log line is written.
		sink = event.Multi{rec.sink, sink}
	}
	// Every event learns its host entry (MAC, name, labels) once, here,
	// before any sink: the record, the dashboard's recent fetches, the
	// metrics and the log line agree (iperf tests know only an address).
	return hosts.Stamping{Table: table, Next: sink}
}

// serviceBuilders build the services in the order they bind; the admin
// listener is last, as its metrics read the others (serveEnv.built).
var serviceBuilders = []struct {
	name  string
	build func(*serveEnv) (service, error)
}{{"dhcp", newDHCPService}, {"tftp", newTFTPService}, {"http", newHTTPService}, {"stream", newStreamService},
	{"iperf3", newIperf3Service}, {"iperf2", newIperf2Service}, {"admin", newAdminService}}

// buildServices builds every service turned on, binding its sockets. When
// one fails, or only the admin listener (which serves no board) is on, the
// ones built are released and nothing serves.
func buildServices(env *serveEnv) ([]namedService, error) {
	var services []namedService
	boards := 0
	for _, b := range serviceBuilders {
		s, err := b.build(env)
		if err != nil {
			releaseAll(services)
			return nil, bindHint(err)
		}
		if s != nil {
			env.built[b.name] = s
			services = append(services, namedService{b.name, s})
			if b.name != "admin" {
				boards++
			}
		}
	}
	if boards == 0 {
		releaseAll(services)
		return nil, errors.New("nothing to serve: DHCP, TFTP, HTTP and the stream and iperf servers are all off")
	}
	return services, nil
}

// serveUntilStopped runs every service under one errgroup, with the signal
// watcher beside them, until ctx ends, a stop signal arrives or a service
// fails; SIGHUP reloads the config and serving goes on.
func serveUntilStopped(ctx context.Context, env *serveEnv, services []namedService, sig serveSignals) error {
	logger := env.logger
	names := make([]string, len(services))
	for i, s := range services {
		names[i] = s.name
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range services {
		g.Go(func() error { return s.Serve(gctx) })
	}
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case s := <-sig.c:
				if s == syscall.SIGHUP {
					reloadConfig(env, sig.reload)
					continue
				}
				logger.Info("stopping on "+signalName(s), "signal", signalName(s), "services", strings.Join(names, ","),
					"http_grace", env.cfg.HTTP.ShutdownGrace)
				stop()
				return nil
			}
		}
	})
	err := g.Wait()
	if err != nil {
		logger.Error("pxeperf stopped on an error", "err", err)
	} else {
		logger.Info("pxeperf stopped", "services", strings.Join(names, ","))
	}
	return err
}

// signalName is SIGINT, SIGTERM, SIGHUP.
func signalName(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		switch n {
		case syscall.SIGINT:
			return "SIGINT"
		case syscall.SIGTERM:
			return "SIGTERM"
		case syscall.SIGHUP:
			return "SIGHUP"
		}
	}
	return s.String()
}

// reloadConfig (SIGHUP) reads the config again and puts its hosts (merged
// with the run-time ones, which stay over them) and templates in place,
// both or neither, through the path every host change takes
// (hostApplier.apply): a file that does not load, a template that does not
// parse or a host that clashes with a run-time one leaves everything as it
// was, logged with the reason. Keys that need a restart are named when
// they changed.
func reloadConfig(env *serveEnv, load func() (*configs.Config, error)) {
	log := env.logger
	if load == nil {
		log.Warn("SIGHUP: nothing to reload")
		return
	}
	cfg, err := load()
	if err != nil {
		log.Error("SIGHUP: reload refused; still serving the previous hosts and templates", "config", configName(env.cfg), "err", err)
		return
	}
	if err := env.hostStore.Reload(cfg); err != nil {
		log.Error("SIGHUP: reload refused; still serving the previous hosts and templates", "config", configName(cfg), "err", err)
		return
	}
	for _, w := range cfg.Warnings {
		log.Warn("SIGHUP: " + w)
	}
	if restart := restartKeys(env.cfg, cfg); len(restart) > 0 {
		log.Warn("SIGHUP: these changes need a restart and are not in effect", "keys", strings.Join(restart, ","))
	}
	log.Info("SIGHUP: reloaded hosts and templates", "config", configName(cfg), "hosts", len(cfg.Hosts))
}

// restartKeys names the top-level settings that differ between old and
// new other than hosts and templates (which a reload applies).
func restartKeys(old, cur *configs.Config) []string {
	a, b := *old, *cur
	a.Hosts, b.Hosts, a.Templates, b.Templates = nil, nil, configs.Templates{}, configs.Templates{}
	ya, err1 := a.YAML()
	yb, err2 := b.YAML()
	if err1 != nil || err2 != nil || bytes.Equal(ya, yb) {
		return nil
	}
	var ma, mb map[string]any
	if yaml.Unmarshal(ya, &ma) != nil || yaml.Unmarshal(yb, &mb) != nil {
		return []string{"(unknown)"}
	}
	var out []string
	for k := range mb {
		if !reflect.DeepEqual(ma[k], mb[k]) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
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
// (it cannot be opened), nothing is recorded. (Another serve on the same
// data folder never gets here: runServe refuses it first.)
func openRecording(cfg *configs.Config, iface string, table *hosts.Table, logger *slog.Logger) *recording {
	data := cfg.Data
	j, jerr := record.OpenJournal(data)
	if jerr != nil {
		logger.Error("RECORDING IS OFF: fetches are logged but not stored; serving goes on", "err", jerr)
		return nil
	}
	st, err := openStore(cfg)
	switch {
	case errors.Is(err, record.ErrUnreachable) && st != nil:
		// PostgreSQL is away: the sink keeps records in the journal and
		// ships them when it is back.
		logger.Warn("record database unreachable; records wait in the journal and are shipped when it is back", "err", err)
	case err != nil:
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
		MaxPending: cfg.Records.QueueEntries, MaxPendingBytes: int64(cfg.Records.QueueMiB) << 20,
		BatchSize: cfg.Store.Batch, Server: cfg.ServerName(), Site: cfg.Server.Site,
		JournalMaxBytes: int64(cfg.Records.JournalMaxMiB) << 20,
	})
	if st != nil {
		logger.Info("recording fetches", "store", st.String(), "journal", j.Path(), "server", cfg.ServerName(),
			"site", cfg.Server.Site)
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
func releaseAll(services []namedService) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, s := range services {
		_ = s.Serve(ctx)
	}
}
