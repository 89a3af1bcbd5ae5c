//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestServeEmbeddedDefault runs a bare `pxeperf serve` (no flags, no config)
// in a namespace: it must pick the only interface, create ./images with the
// sample script, serve it over HTTP (:80) and TFTP (:69), answer no DHCP
// (no interface was named: see TestServeFirstRunSafe), and stop cleanly
// on SIGTERM.
func TestServeEmbeddedDefault(t *testing.T) {
	nstest.RequireTool(t, "curl", "tftp", "busybox")
	p := nstest.NewPair(t, nstest.Options{})
	dir := t.TempDir()

	srv := startServe(t, p.Server, dir)
	if !strings.Contains(srv.out.String(), "iface="+p.ServerIf) || !strings.Contains(srv.out.String(), `dhcp="off (no interface named)"`) {
		t.Errorf("serve did not pick %s, with DHCP off:\n%s", p.ServerIf, srv.out.String())
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
	// A plain DHCP client gets nothing (udhcpc -n gives up).
	if o, err := nstest.Output(p.Client, 30*time.Second, "busybox", "udhcpc", "-n", "-q", "-f", "-t", "2", "-T", "1",
		"-i", p.ClientIf, "-s", "/bin/true"); err == nil {
		t.Errorf("a plain DHCP client got an answer:\n%s", o)
	}

	srv.stop(t)
}
