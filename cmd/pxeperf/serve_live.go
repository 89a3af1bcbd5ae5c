package main

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pxeperf/pxeperf/admin"
	"github.com/pxeperf/pxeperf/api"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/dashboard"
	"github.com/pxeperf/pxeperf/dhcp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/metrics"
	"github.com/pxeperf/pxeperf/perfsrv"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/tftp"
)

// liveState is what serve shows as it happens, on the admin listener:
// the transfers in progress (tftp and httpboot update them), the
// Prometheus registry and the dashboard. Without an admin listener there
// is none (nil), and the servers register no transfers.
type liveState struct {
	active  *event.Active
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	dash    *dashboard.Dashboard
	records *record.Sink // nil: no recording
}

// newLiveState builds the registry and the dashboard's sink; nil when the
// admin listener is off (nothing would read them).
func newLiveState(cfg *configs.Config, logger *slog.Logger) (*liveState, error) {
	if cfg.Admin.Listen == configs.AdminOff {
		return nil, nil
	}
	l := &liveState{active: event.NewActive(), reg: prometheus.NewRegistry()}
	m, err := metrics.New(l.reg)
	if err != nil {
		return nil, err
	}
	l.metrics = m
	l.dash = dashboard.New(dashboard.Options{Active: l.active, Logger: logger.With("svc", "dashboard")})
	return l, nil
}

// activeOrNil is the registry of transfers in progress, nil without a
// live view.
func (l *liveState) activeOrNil() *event.Active {
	if l == nil {
		return nil
	}
	return l.active
}

// sinks are the live view's event sinks (none without one).
func (l *liveState) sinks() []event.Sink {
	if l == nil {
		return nil
	}
	return []event.Sink{l.metrics, l.dash}
}

// mountLive puts /metrics, the dashboard (/), /api/active, /api/leases and
// the chart on the admin listener, reading the counters of the services
// built so far (the admin listener is built last).
func mountLive(env *serveEnv, s *admin.Server, records api.Source) error {
	l := env.live
	src := metrics.Sources{Admin: s.Refused(), Active: l.active}
	opt := dashboard.Options{Active: l.active, Records: records}
	if d, ok := env.built["dhcp"].(*dhcp.Server); ok {
		src.DHCP = d
		if env.cfg.DHCP.Mode == configs.ModeFull {
			src.PoolSize = env.cfg.DHCP.Pool.Size()
			opt.Leases = func() []dashboard.Lease { return leaseList(env, d) }
		}
	}
	if t, ok := env.built["tftp"].(*tftp.Server); ok {
		src.TFTP = t
		opt.TFTP = t
	}
	if h, ok := env.built["http"].(*httpService); ok {
		src.HTTP = h
	}
	if l.records != nil {
		src.Records = l.records
	}
	if s, ok := env.built["iperf3"].(*perfsrv.Iperf3); ok {
		src.Iperf3 = s
	}
	if s, ok := env.built["iperf2"].(*perfsrv.Iperf2); ok {
		src.Iperf2 = s
	}
	if err := metrics.Watch(l.reg, src); err != nil {
		return err
	}
	l.dash.SetSources(opt.Records, opt.Leases, opt.TFTP)
	s.Handle("GET /metrics", metrics.Handler(l.reg))
	l.dash.Register(s)
	return nil
}

// leaseList is the DHCP server's leases in use, with the host names and
// architectures the hosts table knows, by address.
func leaseList(env *serveEnv, d *dhcp.Server) []dashboard.Lease {
	ls := d.Leases()
	out := make([]dashboard.Lease, 0, len(ls))
	for _, l := range ls {
		e := dashboard.Lease{MAC: l.MAC.String(), Addr: l.Addr.String(), Expiry: l.Expiry.UTC(), Arch: 0xffff}
		if c, ok := env.hosts.ByMAC(l.MAC); ok {
			if c.Host != nil {
				e.Host = c.Host.Name
			}
			e.Arch = c.Arch
		} else if h, ok := env.hosts.Host(l.MAC); ok {
			e.Host = h.Name
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b dashboard.Lease) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}
