package main

import (
	"context"
	"net/http"
	"strings"

	"github.com/pxeperf/pxeperf/admin"
	"github.com/pxeperf/pxeperf/api"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/internal/refuse"
)

// newHTTPService builds the HTTP boot server (image files, per-client iPXE
// scripts, /healthz, and with http.api the records API under /api/) when
// http.enabled; it binds the listener now.
func newHTTPService(env *serveEnv) (service, error) {
	if !env.cfg.HTTP.Enabled {
		return nil, nil
	}
	// The script URL handed out may carry a query (?mac=...); route by path.
	scriptPath, _, _ := strings.Cut(env.cfg.DHCP.IPXEScript, "?")
	if err := httpboot.CheckScripts(env.cfg, env.images); err != nil {
		return nil, usageError(err) // a template that does not parse: the config is wrong
	}
	opt := httpboot.Options{
		HTTP:       env.cfg.HTTP,
		ConfigFile: env.cfg.File,
		ScriptPath: scriptPath,
		Images:     env.images,
		Files:      env.boot,
		Hosts:      env.hosts,
		Sink:       env.sink,
		Active:     env.live.activeOrNil(),
		Health:     env.recordHealth,
		Logger:     env.logger.With("svc", "http"),
	}
	var records *api.Lazy
	if env.cfg.HTTP.API {
		// Every board can reach the boot port: the lab asked for it. The
		// admin token, when there is one, guards the API there too.
		token, err := readToken(env.cfg.Admin.TokenFile)
		if err != nil {
			return nil, err
		}
		var h http.Handler
		h, records = newAPI(env)
		opt.Refused = refuse.New(opt.Logger, 0)
		opt.API = admin.RequireToken(token, opt.Refused, h)
		if token == "" {
			env.logger.Warn("the record API is on the boot port too (http.api) WITHOUT A TOKEN: every board can read every record; " +
				"set admin.token_file to require it there as on the admin listener, or http.api: false")
		} else {
			env.logger.Warn("the record API is on the boot port too (http.api), behind admin.token_file's token")
		}
	}
	if env.net != nil {
		opt.ServerAddr = env.net.Addr
		if env.net.Iface != nil {
			opt.Interface = env.net.Iface.Name
		}
	}
	s, err := httpboot.New(opt)
	if err != nil {
		return nil, err
	}
	return &httpService{Server: s, records: records}, nil
}

// newAPI builds the record API over a read-only store connection of its
// own, opened on first use: the store may not exist before the first
// fetch, and until it does /api/ answers 503 with the reason.
func newAPI(env *serveEnv) (*api.Handler, *api.Lazy) {
	records := api.NewLazy(func() (api.Source, error) {
		return openStoreReadOnly(context.Background(), env.cfg.Store.URL, env.cfg.Data)
	})
	a := &env.cfg.Admin
	return api.New(records, env.logger.With("svc", "api"), api.Limits{
		MaxPage: a.MaxPage, MaxPageBytes: a.MaxPageMiB << 20, MaxReportRecords: a.MaxReportRecords,
		StallTimeout: a.StallTimeout, WriteTimeout: a.WriteTimeout,
	}), records
}

// httpService closes the API's store connection, if any, when serving ends.
type httpService struct {
	*httpboot.Server
	records *api.Lazy
}

func (h *httpService) Serve(ctx context.Context) error {
	if h.records != nil {
		defer h.records.Close()
	}
	return h.Server.Serve(ctx)
}
