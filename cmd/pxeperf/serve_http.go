package main

import (
	"context"
	"strings"

	"github.com/pxeperf/pxeperf/api"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/record"
)

// newHTTPService builds the HTTP boot server (image files, per-client iPXE
// scripts, /healthz, the records API under /api/) when http.enabled; it
// binds the listener now.
func newHTTPService(env *serveEnv) (service, error) {
	if !env.cfg.HTTP.Enabled {
		return nil, nil
	}
	// The script URL handed out may carry a query (?mac=...); route by path.
	scriptPath, _, _ := strings.Cut(env.cfg.DHCP.IPXEScript, "?")
	// The API reads the record store through its own read-only connection,
	// opened on first use: the store may not exist before the first fetch,
	// and until it does /api/ answers 503 with the reason.
	records := api.NewLazy(func() (api.Source, error) { return record.OpenReadOnly(env.cfg.Data) })
	if err := httpboot.CheckScripts(env.cfg, env.images); err != nil {
		return nil, err
	}
	opt := httpboot.Options{
		HTTP:       env.cfg.HTTP,
		ConfigFile: env.cfg.File,
		ScriptPath: scriptPath,
		Images:     env.images,
		Files:      env.boot,
		Hosts:      env.hosts,
		Sink:       env.sink,
		Logger:     env.logger.With("svc", "http"),
		API:        api.New(records, env.logger.With("svc", "api")),
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

// httpService closes the API's store connection when serving ends.
type httpService struct {
	*httpboot.Server
	records *api.Lazy
}

func (h *httpService) Serve(ctx context.Context) error {
	defer h.records.Close()
	return h.Server.Serve(ctx)
}
