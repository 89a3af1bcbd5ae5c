package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/spf13/cobra"
)

// TestStreamServerNames: --stream-addr and stream: start the stream server;
// the old --bench-addr and bench: still do, each with a warning naming the
// new name; the old and new flag together are a usage error.
func TestStreamServerNames(t *testing.T) {
	dir := t.TempDir()
	oldFile := filepath.Join(dir, "old.yaml")
	if err := os.WriteFile(oldFile, []byte("bench:\n  enabled: true\n  listen: 127.0.0.1:5301\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		on     bool
		listen string
		warn   string // in the one warning; "" for none
	}{
		{"new flag", []string{"--stream-addr", "127.0.0.1:5300"}, true, "127.0.0.1:5300", ""},
		{"new flag off", []string{"--stream-addr", "off"}, false, ":5211", ""},
		{"old flag", []string{"--bench-addr", "127.0.0.1:5300"}, true, "127.0.0.1:5300", "--bench-addr was renamed --stream-addr"},
		{"old flag off", []string{"--config", oldFile, "--bench-addr", "off"}, false, "127.0.0.1:5301", "--bench-addr was renamed --stream-addr"},
		{"old key", []string{"--config", oldFile}, true, "127.0.0.1:5301", "old.yaml:1: bench: was renamed stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := serveConfigOf(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Stream.Enabled != tc.on || cfg.Stream.Listen != tc.listen {
				t.Errorf("stream = %+v, want enabled %v, listen %s", cfg.Stream, tc.on, tc.listen)
			}
			n := 0
			if tc.warn != "" {
				n = 1
			}
			if tc.name == "old flag off" {
				n = 2 // the file's old key too
			}
			if len(cfg.Warnings) != n || (n > 0 && !strings.Contains(strings.Join(cfg.Warnings, "\n"), tc.warn)) {
				t.Errorf("warnings %q, want %d, one with %q", cfg.Warnings, n, tc.warn)
			}
		})
	}
	_, err := serveConfigOf(t, "--bench-addr", ":5300", "--stream-addr", ":5301")
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "give --stream-addr alone") {
		t.Errorf("--bench-addr with --stream-addr: err = %v, want a usage error", err)
	}
	out, err := runCmd(t, "serve", "--help")
	if err != nil || !strings.Contains(out, "--stream-addr") || strings.Contains(out, "--bench-addr") {
		t.Errorf("serve --help shows --stream-addr, not its old name: %v\n%s", err, out)
	}
	out, err = runCmd(t, "config", "check", oldFile)
	if err != nil || !strings.Contains(out, "stream:\n") || !strings.Contains(out, "# WARNING "+oldFile+":1: bench: was renamed stream") {
		t.Errorf("config check of an old file: %v\n%s", err, out)
	}
}

// serveConfigOf is serve's config for the command line args (the embedded
// default under them unless --config is given).
func serveConfigOf(t *testing.T, args ...string) (*configs.Config, error) {
	t.Helper()
	t.Chdir(t.TempDir()) // no ./pxeperf.yaml
	cmd := &cobra.Command{Use: "serve"}
	var f serveFlags
	addServeFlags(cmd, &f)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return loadServeConfig(cmd, &f)
}
