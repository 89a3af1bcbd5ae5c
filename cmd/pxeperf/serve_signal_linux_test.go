//go:build linux

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"golang.org/x/sys/unix"
)

// served is the real binary's `serve`, run by startServe.
type served struct {
	cmd    *exec.Cmd
	out    *nstest.SyncBuffer
	exited chan struct{} // closed when it has exited, with err set
	err    error         // what cmd.Wait returned
}

// startServe runs `pxeperf serve args...` (the built binary) in namespace
// ns ("" this one), in dir ("" the test's), in a process group of its own,
// and waits (20 s at most) until it serves. At cleanup it gets SIGTERM,
// then SIGKILL after 10 s; its output is logged if the test failed.
func startServe(t *testing.T, ns, dir string, args ...string) *served {
	t.Helper()
	s := &served{cmd: nstest.Command(context.Background(), ns, nstest.Binary(t), append([]string{"serve"}, args...)...),
		out: &nstest.SyncBuffer{}, exited: make(chan struct{})}
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.signal(unix.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.signal(unix.SIGKILL)
			<-s.exited
		}
		if t.Failed() {
			t.Logf("pxeperf serve output:\n%s", s.out.String())
		}
	})
	if !nstest.WaitFor(20*time.Second, func() bool { return strings.Contains(s.out.String(), "pxeperf serving") }) {
		t.Fatalf("serve did not start:\n%s", s.out.String())
	}
	return s
}

// signal sends sig to serve's process group (none once it has exited).
func (s *served) signal(sig unix.Signal) error {
	select {
	case <-s.exited:
		return nil
	default:
		return unix.Kill(-s.cmd.Process.Pid, sig)
	}
}

// stop sends SIGTERM and fails the test unless serve exits 0 within 40 s.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
		if s.err != nil {
			t.Fatalf("serve exited with %v after SIGTERM:\n%s", s.err, s.out.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop within 40 s of SIGTERM")
	}
}

var httpAddrLog = regexp.MustCompile(`msg="http boot serving".* addr=(\S+)`)

// TestServeSignals: serve creates a missing root and data folder and says
// so with their absolute paths; SIGHUP reloads hosts and templates (a
// broken file is refused and the old settings keep serving); SIGTERM logs
// what it stops and exits 0.
func TestServeSignals(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "lab.yaml")
	writeCfg := func(kernel, tmpl string) {
		t.Helper()
		body := "hosts:\n  - mac: 52:54:00:aa:00:01\n    name: board1\n    kernel: " + kernel + "\n"
		if tmpl != "" {
			body += "templates:\n  pxelinux: |\n    " + tmpl + "\n"
		}
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg("old-vmlinuz", "")
	srv := startServe(t, "", dir, "--admin-addr", "off", "--config", "lab.yaml", "--iface", "lo", "--addr", "127.0.0.1", "--dhcp", "off",
		"--tftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--root", "images", "--data", "state")
	for _, want := range []string{
		`msg="created the data folder" data=` + filepath.Join(dir, "state"),
		"msg=\"created image root with a sample iPXE script\" root=" + filepath.Join(dir, "images"),
		"config=lab.yaml",
	} {
		if !strings.Contains(srv.out.String(), want) {
			t.Errorf("start-up log lacks %q", want)
		}
	}
	var m []string
	if !nstest.WaitFor(10*time.Second, func() bool { m = httpAddrLog.FindStringSubmatch(srv.out.String()); return m != nil }) {
		t.Fatalf("no HTTP address in the log:\n%s", srv.out.String())
	}
	get := func() string {
		t.Helper()
		resp, err := http.Get("http://" + m[1] + "/pxelinux.cfg/01-52-54-00-aa-00-01")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(); !strings.Contains(got, "old-vmlinuz") {
		t.Fatalf("before SIGHUP: %q", got)
	}
	hup := func(wantLog string, n int) {
		t.Helper()
		if err := srv.signal(unix.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if !nstest.WaitFor(10*time.Second, func() bool { return strings.Count(srv.out.String(), wantLog) >= n }) {
			t.Fatalf("no %q after SIGHUP:\n%s", wantLog, srv.out.String())
		}
	}
	writeCfg("new-vmlinuz", "")
	hup("SIGHUP: reloaded hosts and templates", 1)
	if got := get(); !strings.Contains(got, "new-vmlinuz") {
		t.Errorf("after SIGHUP: %q, want the new kernel", got)
	}
	writeCfg("newer-vmlinuz", "kernel {{.Kernel")
	hup("SIGHUP: reload refused; still serving the previous hosts and templates", 1)
	if got := get(); !strings.Contains(got, "new-vmlinuz") || strings.Contains(got, "newer") {
		t.Errorf("after a refused SIGHUP: %q, want the previous config", got)
	}
	if err := os.WriteFile(cfgPath, []byte("hosts:\n  - mac: zz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup("SIGHUP: reload refused", 2)
	if !strings.Contains(srv.out.String(), `\"zz\" is not an Ethernet MAC`) {
		t.Errorf("refused reload does not say why:\n%s", srv.out.String())
	}
	select {
	case <-srv.exited:
		t.Fatalf("serve exited on SIGHUP: %v", srv.err)
	default:
	}

	srv.stop(t)
	for _, want := range []string{`msg="stopping on SIGTERM" signal=SIGTERM services=tftp,http`, `msg="pxeperf stopped"`} {
		if !strings.Contains(srv.out.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// TestServeNoPrivilege: as a user without capabilities, binding port 80
// fails with the capability to grant (setcap) or root, and exit status 1.
func TestServeNoPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the binary as another user")
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil && strings.TrimSpace(string(b)) != "1024" {
		t.Skipf("ip_unprivileged_port_start is %s: users may bind low ports here", strings.TrimSpace(string(b)))
	}
	dir, bin := nobodyBinary(t, 0o777)
	cmd := exec.Command(bin, "serve", "--admin-addr", "off", "--iface", "lo", "--dhcp", "off", "--tftp-addr", "off",
		"--http-addr", "127.0.0.1:80", "--root", filepath.Join(dir, "images"), "--data", filepath.Join(dir, "data"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	got, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve as nobody on :80: %v, want exit status 1\n%s", err, got)
	}
	for _, want := range []string{"CAP_NET_BIND_SERVICE to bind ports below 1024 (http :80)", "setcap cap_net_bind_service,cap_net_raw,cap_net_admin+ep", "sudo"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "free the port") {
		t.Errorf("output keeps a guess that does not fit:\n%s", got)
	}
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}
