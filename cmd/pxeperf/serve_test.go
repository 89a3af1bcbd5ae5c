package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/spf13/cobra"
)

// runCmd runs `pxeperf ARGS...` in-process; stdout and stderr together.
func runCmd(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// runCmdSplit runs `pxeperf ARGS...` in-process; stdout and stderr apart.
func runCmdSplit(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

// A busy port fails serve before anything runs, naming the address.
func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	_, err = runCmd(t, "serve", "--iface", "lo", "--addr", "127.0.0.1", "--dhcp", "off",
		"--tftp-addr", "127.0.0.1:0", "--http-addr", ln.Addr().String(),
		"--root", filepath.Join(dir, "images"), "--data", filepath.Join(dir, "data"))
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("serve on a busy port: err = %v; want an error naming %s", err, ln.Addr())
	}
}

func TestServeBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad addr", []string{"--addr", "nope"}, `--addr "nope" is not an IPv4 address`},
		{"bad pool", []string{"--pool", "10.0.0.9-10.0.0.1"}, "--pool"},
		{"bad mode", []string{"--dhcp", "sometimes"}, `"sometimes" is not a mode`},
		{"full without pool", []string{"--dhcp", "full"}, "needs an address pool"},
		{"missing config", []string{"--config", "/nonexistent/pxeperf.yaml"}, "--config"},
		{"unknown iface", []string{"--iface", "nosuchif0", "--dhcp", "off"}, `no interface named "nosuchif0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"serve", "--root", filepath.Join(dir, "i"), "--data", filepath.Join(dir, "d")}, tt.args...)
			_, err := runCmd(t, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	out, err := runCmd(t, "config", "check", "../../configs/examples/isolated-full.yaml")
	if err != nil || !strings.Contains(out, "mode: full") || !strings.Contains(out, "is valid") {
		t.Fatalf("config check example: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("dhcp:\n  mode: full\n  pol: 10.0.0.1-10.0.0.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, "config", "check", bad)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:3: dhcp.pol") || !strings.Contains(err.Error(), `did you mean "pool"`) {
		t.Fatalf("config check of a typo: %v", err)
	}
	out, err = runCmd(t, "config", "default")
	if err != nil || !strings.Contains(out, "mode: proxy") {
		t.Fatalf("config default: %v\n%s", err, out)
	}
}

func TestVersion(t *testing.T) {
	out, err := runCmd(t, "version")
	if err != nil || !strings.HasPrefix(out, "pxeperf ") {
		t.Fatalf("version: %v %q", err, out)
	}
}

// When a later service cannot bind, the ones already built let their
// sockets go: serve can be started again on the same TFTP port.
func TestServeBusyPortReleasesOthers(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	probe, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tftpAddr := probe.LocalAddr().String()
	probe.Close()
	dir := t.TempDir()
	args := []string{"serve", "--iface", "lo", "--addr", "127.0.0.1", "--dhcp", "off",
		"--tftp-addr", tftpAddr, "--http-addr", busy.Addr().String(),
		"--root", filepath.Join(dir, "images"), "--data", filepath.Join(dir, "data")}
	if _, err := runCmd(t, args...); err == nil {
		t.Fatal("serve on a busy HTTP port did not fail")
	}
	// The TFTP socket of the failed start must be free again.
	c, err := net.ListenPacket("udp", tftpAddr)
	if err != nil {
		t.Fatalf("TFTP port %s still held after the failed start: %v", tftpAddr, err)
	}
	c.Close()
}

// TestReadToken: admin.token_file holds one token; an empty or missing
// file fails serve's start with the fix.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := readToken(write("good", "s3cret\n")); err != nil || tok != "s3cret" {
		t.Errorf("good file: %q %v", tok, err)
	}
	for name, file := range map[string]string{
		"empty":   write("empty", "\n"),
		"two":     write("two", "a b\n"),
		"missing": filepath.Join(dir, "nope"),
	} {
		if _, err := readToken(file); err == nil || !strings.Contains(err.Error(), "admin.token_file") || !strings.Contains(err.Error(), "urandom") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if tok, err := readToken(""); err != nil || tok != "" {
		t.Errorf("no file: %q %v", tok, err)
	}
}

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
