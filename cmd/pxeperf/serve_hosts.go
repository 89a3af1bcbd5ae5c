package main

import (
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/dhcp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/record"
)

// openHostStore opens the run-time hosts (<data>/hosts.json) over cfg's
// hosts and makes cfg.Hosts the merged, effective list, so every service
// built at start has them. A file that does not read stops serve with its
// path and the fix. Changes are applied through applier (hostApplier.env
// is set once the services are built: no change arrives before).
func openHostStore(cfg *configs.Config, data string, applier *hostApplier, ms event.MilestoneSink, logger *slog.Logger) (*hosts.Store, error) {
	base := *cfg
	base.Hosts = slices.Clone(cfg.Hosts)
	st, err := hosts.Open(hosts.Options{Path: filepath.Join(data, hosts.FileName), Config: &base,
		Apply: applier.apply, Milestones: ms, Logger: logger})
	if err != nil {
		return nil, err
	}
	cfg.Hosts = st.Effective()
	runtime := 0
	for _, e := range st.List() {
		if e.Source != hosts.SourceConfig || e.NextBoot != nil {
			runtime++
		}
	}
	if runtime > 0 {
		logger.Info("run-time hosts read", "file", st.Path(), "entries", runtime, "hosts", len(cfg.Hosts))
	}
	return st, nil
}

// hostApplier puts a set of effective hosts in force in every service,
// the one path SIGHUP and run-time changes share.
type hostApplier struct{ env *serveEnv }

// apply checks what can fail first (iPXE scripts, loader templates) and
// returns its error with nothing changed; then commit (the durable write)
// and, once it is done, swaps the hosts into the boot configs, the hosts
// table and the DHCP lease store's fixed addresses. After commit nothing
// fails: the store has acknowledged the change.
func (a *hostApplier) apply(yaml *configs.Config, effective []configs.Host, commit func() error) error {
	env := a.env
	if env == nil {
		return commit()
	}
	next := *env.cfg
	next.Hosts, next.Templates, next.File = effective, yaml.Templates, yaml.File
	if err := httpboot.CheckScripts(&next, env.images); err != nil {
		return err
	}
	base := ""
	if env.cfg.HTTP.Enabled {
		base = env.cfg.HTTPBase(env.net.Addr)
	}
	opt := bootcfg.Options{Config: &next, Images: env.images, Server: env.net.Addr, HTTPBase: base, Logger: env.logger}
	if _, err := bootcfg.New(opt); err != nil {
		return err
	}
	if err := commit(); err != nil {
		return err
	}
	if err := env.boot.Reload(opt); err != nil {
		// Parsed a moment ago: only an @file template changed in between.
		env.logger.Error("hosts: loader templates did not reload; boards get the previous ones", "err", err)
	}
	env.hosts.Replace(effective)
	if d, ok := env.built["dhcp"].(*dhcp.Server); ok {
		d.SetHosts(effective)
	}
	return nil
}

// bootWatch is the sink after host stamping that turns fetches into boot
// milestones and consumes once next boots (hosts.Watch).
func bootWatch(st *hosts.Store, ms event.MilestoneSink) event.Sink {
	return hosts.Watch{Store: st, Milestones: ms, IsBoot: func(f *event.Fetch) bool {
		r := record.Record{Proto: f.Proto, File: f.File, Outcome: f.Outcome, Kind: f.Kind}
		return record.Classify(&r) == record.KindBoot
	}}
}

// milestoneRelay is the sink the host store and the boot watch are built
// with, before the record sink exists: it forwards to the sink Set names
// (the fan-out to records of kind event, the SSE stream, the webhook,
// built with the record sink); it logs each milestone too, one line, as
// dnsmasq logs a DHCPACK, for whoever reads serve's log.
type milestoneRelay struct {
	to  atomic.Pointer[event.MilestoneSink]
	log logMilestones
}

// Set makes to the sink milestones go to.
func (r *milestoneRelay) Set(to event.MilestoneSink) { r.to.Store(&to) }

func (r *milestoneRelay) Milestone(m event.Milestone) {
	r.log.Milestone(m)
	if to := r.to.Load(); to != nil {
		(*to).Milestone(m)
	}
}

// logMilestones writes one log line per milestone.
type logMilestones struct{ logger *slog.Logger }

func (l logMilestones) Milestone(m event.Milestone) {
	attrs := []any{"what", m.What, "host", m.Host}
	if m.MAC != nil {
		attrs = append(attrs, "client_mac", m.MAC.String())
	}
	keys := slices.Collect(maps.Keys(m.Detail))
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, k, m.Detail[k])
	}
	l.logger.Info("milestone", attrs...)
}
