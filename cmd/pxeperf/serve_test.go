package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
