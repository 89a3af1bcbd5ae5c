package main

import (
	"strings"

	"github.com/pxeperf/pxeperf/httpboot"
)

// newHTTPService builds the HTTP boot server (image files, per-client iPXE
// scripts, /healthz) when http.enabled; it binds the listener now.
func newHTTPService(env *serveEnv) (service, error) {
	if !env.cfg.HTTP.Enabled {
		return nil, nil
	}
	// The script URL handed out may carry a query (?mac=...); route by path.
	scriptPath, _, _ := strings.Cut(env.cfg.DHCP.IPXEScript, "?")
	opt := httpboot.Options{
		HTTP:       env.cfg.HTTP,
		ScriptPath: scriptPath,
		Images:     env.images,
		Hosts:      env.hosts,
		Sink:       env.sink,
		Logger:     env.logger.With("svc", "http"),
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
	return s, nil
}
