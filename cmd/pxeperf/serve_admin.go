package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/pxeperf/pxeperf/admin"
	"github.com/pxeperf/pxeperf/api"
	"github.com/pxeperf/pxeperf/configs"
)

// newAdminService builds the admin listener (admin.listen, loopback by
// default; "off": none) serving the record API at /api/ and the run-time
// hosts at /api/hosts, behind the token
// of admin.token_file when set; it binds the listener now.
func newAdminService(env *serveEnv) (service, error) {
	a := &env.cfg.Admin
	if a.Listen == configs.AdminOff {
		return nil, nil
	}
	token, err := readToken(a.TokenFile)
	if err != nil {
		return nil, err
	}
	s, err := admin.New(admin.Options{
		Listen: a.Listen, Token: token, WriteTimeout: a.WriteTimeout,
		Logger:   env.logger.With("svc", "admin"),
		MaxConns: a.MaxConns, MaxConnsPerClient: a.MaxConnsPerClient, Names: adminNames(env.cfg),
	})
	if err != nil {
		return nil, err
	}
	s.SetHealth(env.recordHealth)
	h, records := newAPI(env)
	s.Handle("/api/", h)
	if env.hostStore != nil {
		// The run-time hosts: on the admin listener only, never the boot port.
		hh := api.NewHosts(env.hostStore, env.logger.With("svc", "api"))
		s.Handle("/api/hosts", hh)
		s.Handle("/api/hosts/", hh)
	}
	if env.live != nil {
		if err := mountLive(env, s, records); err != nil {
			_ = s.Serve(canceled())
			return nil, err
		}
	}
	return &adminService{Server: s, records: records}, nil
}

// adminNames are the Host names the admin listener answers without a
// token: the server's name, the host name, the listen host when it is a
// name, and admin.allowed_hosts.
func adminNames(cfg *configs.Config) []string {
	names := append([]string{cfg.ServerName()}, cfg.Admin.AllowedHosts...)
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	if h, _, err := net.SplitHostPort(cfg.Admin.Listen); err == nil && h != "" {
		names = append(names, h)
	}
	return names
}

// readToken reads the bearer token from admin.token_file ("" none).
func readToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("admin.token_file: %w (write a token into it, e.g. `head -c 32 /dev/urandom | base64 > %s`, or unset the key)", err, file)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("admin.token_file %s: want one token on one line (e.g. `head -c 32 /dev/urandom | base64 > %s`)", file, file)
	}
	return tok, nil
}

// adminService closes the API's store connection when serving ends.
type adminService struct {
	*admin.Server
	records *api.Lazy
}

func (s *adminService) Serve(ctx context.Context) error {
	defer s.records.Close()
	return s.Server.Serve(ctx)
}

// canceled is an ended context: Serve on it releases a service's sockets.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
