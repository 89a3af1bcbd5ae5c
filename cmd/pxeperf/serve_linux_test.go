//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/nstest"
	"golang.org/x/sys/unix"
)

// TestServeEmbeddedDefault runs a bare `pxeperf serve` (no flags, no config)
// in a namespace: it must pick the only interface, create ./images with the
// sample script, serve it over HTTP (:80) and TFTP (:69), stay silent to a
// plain DHCP client (proxy mode), and stop cleanly on SIGTERM.
func TestServeEmbeddedDefault(t *testing.T) {
	nstest.RequireTool(t, "curl", "tftp", "busybox")
	bin := nstest.Binary(t)
	p := nstest.NewPair(t, nstest.Options{})
	dir := t.TempDir()

	cmd := nstest.Command(context.Background(), p.Server, bin, "serve")
	cmd.Dir = dir
	var out nstest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		if t.Failed() {
			t.Logf("pxeperf output:\n%s", out.String())
		}
	})
	if !nstest.WaitFor(15*time.Second, func() bool { return strings.Contains(out.String(), "pxeperf serving") }) {
		t.Fatalf("serve did not start:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "iface="+p.ServerIf) || !strings.Contains(out.String(), "dhcp=proxy") {
		t.Errorf("serve did not pick %s in proxy mode:\n%s", p.ServerIf, out.String())
	}
	sample, err := os.ReadFile(filepath.Join(dir, "images", "sample.ipxe"))
	if err != nil {
		t.Fatalf("./images/sample.ipxe not created: %v", err)
	}

	got := nstest.Run(t, p.Client, "curl", "-sSf", "http://"+p.ServerIP.String()+"/sample.ipxe")
	if got != string(sample) {
		t.Errorf("HTTP sample.ipxe = %q, want %q", got, sample)
	}
	tftpOut := filepath.Join(dir, "tftp.out")
	nstest.Run(t, p.Client, "tftp", p.ServerIP.String(), "-c", "get", "sample.ipxe", tftpOut)
	if b, _ := os.ReadFile(tftpOut); string(b) != string(sample) {
		t.Errorf("TFTP sample.ipxe = %q", b)
	}
	// A plain DHCP client gets nothing from proxy mode (udhcpc -n gives up).
	if o, err := nstest.Output(p.Client, 30*time.Second, "busybox", "udhcpc", "-n", "-q", "-f", "-t", "2", "-T", "1",
		"-i", p.ClientIf, "-s", "/bin/true"); err == nil {
		t.Errorf("a plain DHCP client got an answer from proxy mode:\n%s", o)
	}

	if err := unix.Kill(-cmd.Process.Pid, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM:\n%s", err, out.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop within 40 s of SIGTERM")
	}
}
