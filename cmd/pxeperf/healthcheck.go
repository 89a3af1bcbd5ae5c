package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCmd is `pxeperf healthcheck`: GET /healthz of a running
// serve, exit 0 when it answers 200. The container image's HEALTHCHECK runs
// it (debian-slim has no curl).
func newHealthcheckCmd() *cobra.Command {
	var url, config string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Ask a running serve for /healthz; exit 0 when it answers 200 (for HEALTHCHECK)",
		Long: `Ask a running pxeperf serve for /healthz. The URL is --url, else built from
http.listen of the config (--config, ./pxeperf.yaml, /etc/pxeperf/pxeperf.yaml,
else the default :80) on 127.0.0.1. Exit status 0: healthy, or degraded (boards
are served but the record store fails, lags or the disk is full: printed), 1: not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				cfg, err := loadConfig(config)
				if err != nil {
					return err
				}
				if !cfg.HTTP.Enabled {
					return fmt.Errorf("HTTP is off in %s: nothing serves /healthz (pass --url)", configName(cfg))
				}
				host, port, err := net.SplitHostPort(cfg.HTTP.Listen)
				if err != nil {
					return fmt.Errorf("http.listen %q: %w", cfg.HTTP.Listen, err)
				}
				if host == "" || host == "0.0.0.0" || host == "::" {
					host = "127.0.0.1"
				}
				url = "http://" + net.JoinHostPort(host, port) + "/healthz"
			}
			if u, err := neturl.Parse(url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageErrorf("--url %q: want an http:// or https:// URL, e.g. --url http://127.0.0.1/healthz", url)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return usageErrorf("--url %q: %w", url, err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("unhealthy: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("unhealthy: %s answered %s: %s", url, resp.Status, body)
			}
			// Degraded (the record store fails, the disk is full) still
			// serves boards: exit 0, so a restart that would not mend it
			// does not cut running boots, but say what is wrong.
			var h struct {
				Status   string   `json:"status"`
				Problems []string `json:"problems"`
			}
			if json.Unmarshal(body, &h) == nil && h.Status == "degraded" {
				fmt.Fprintf(cmd.OutOrStdout(), "degraded (boards are served): %s: %s\n", url, strings.Join(h.Problems, "; "))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "healthy: %s\n", url)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the /healthz URL (default: from the config's http.listen, on 127.0.0.1)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	addConfigFlag(cmd, &config)
	return cmd
}
