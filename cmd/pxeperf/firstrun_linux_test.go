//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"golang.org/x/sys/unix"
)

// workstation is a namespace laid out as a workstation with a lab NIC:
// the pair's server end holds the default route (the uplink, picked first
// as the first up interface with IPv4), and a dummy lab0 is the lab
// network's interface (a veth whose peer stays in the namespace: the
// kernel may have no dummy module).
func workstation(t *testing.T) (*nstest.Pair, string) {
	t.Helper()
	p := nstest.NewPair(t, nstest.Options{})
	nstest.Run(t, p.Server, "ip", "route", "add", "default", "via", p.ClientIP.String(), "dev", p.ServerIf)
	nstest.Run(t, p.Server, "ip", "link", "add", "lab0", "type", "veth", "peer", "name", "lab0peer")
	nstest.Run(t, p.Server, "ip", "addr", "add", "10.77.0.1/24", "dev", "lab0")
	nstest.Run(t, p.Server, "ip", "link", "set", "lab0peer", "up")
	nstest.Run(t, p.Server, "ip", "link", "set", "lab0", "up")
	return p, "lab0"
}

// udpPorts lists the UDP ports bound in ns (ss -Huln).
func udpPorts(t *testing.T, ns string) string {
	t.Helper()
	return nstest.Run(t, ns, "ss", "-Huln")
}

func bound(ss string, port string) bool {
	return regexp.MustCompile(`:` + port + `\s`).MatchString(ss)
}

// serveIn starts `pxeperf ARGS` with dir as its working folder in ns and
// waits until it serves.
func serveIn(t *testing.T, ns, dir, bin string, args ...string) *nstest.Proc {
	t.Helper()
	srv := nstest.Start(t, ns, "sh", append([]string{"-c", `cd "$0" && exec "$@"`, dir, bin}, args...)...)
	if !nstest.WaitFor(30*time.Second, func() bool { return strings.Contains(srv.Out.String(), "pxeperf serving") }) {
		t.Fatalf("serve did not start:\n%s", srv.Out.String())
	}
	return srv
}

// stop sends SIGTERM and waits for the shutdown log.
func stop(t *testing.T, srv *nstest.Proc) string {
	t.Helper()
	_ = srv.Signal(unix.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM within 30 s")
	}
	return srv.Out.String()
}

// TestServeFirstRunSafe: the README's `pxeperf serve`, with no config and
// no --iface on a machine whose first interface is its uplink, serves
// TFTP and HTTP and answers no DHCP: it says which interface it picked,
// why, and how to name another; with --iface it serves proxyDHCP there.
// The start is quiet: the architectures without a boot file are one INFO
// line (their detail in config check), and no log line has Go map syntax.
func TestServeFirstRunSafe(t *testing.T) {
	nstest.RequireTool(t, "ss", "curl")
	bin := nstest.Binary(t)
	p, lab := workstation(t)
	dir := t.TempDir()

	srv := serveIn(t, p.Server, dir, bin, "serve")
	ss := udpPorts(t, p.Server)
	if bound(ss, "67") || bound(ss, "4011") {
		t.Errorf("serve with no interface named bound DHCP:\n%s", ss)
	}
	if !bound(ss, "69") {
		t.Errorf("TFTP is not served:\n%s", ss)
	}
	script := nstest.Run(t, p.Client, "curl", "-sSf", "http://"+p.ServerIP.String()+"/boot.ipxe")
	if !strings.HasPrefix(script, "#!ipxe") {
		t.Errorf("HTTP /boot.ipxe = %q", script)
	}
	log := stop(t, srv)
	t.Logf("first run:\n%s", log)
	for _, want := range []string{"DHCP and proxyDHCP are off", "iface=" + p.ServerIf, "holds the default route",
		"--iface NAME", lab + " 10.77.0.1/24", `dhcp="off (no interface named)"`} {
		if !strings.Contains(log, want) {
			t.Errorf("first-run log lacks %q", want)
		}
	}
	checkQuiet(t, log)

	// Named: proxyDHCP on it.
	srv = serveIn(t, p.Server, dir, bin, "serve", "--iface", lab)
	ss = udpPorts(t, p.Server)
	if !bound(ss, "67") || !bound(ss, "4011") {
		t.Errorf("serve --iface %s bound no DHCP:\n%s", lab, ss)
	}
	log = stop(t, srv)
	if strings.Contains(log, "DHCP and proxyDHCP are off") || !strings.Contains(log, "iface="+lab) {
		t.Errorf("serve --iface %s:\n%s", lab, log)
	}
	checkQuiet(t, log)

	// Chosen without an interface: answered on the one picked, with a warning
	// that it is the uplink.
	srv = serveIn(t, p.Server, dir, bin, "serve", "--dhcp", "proxy")
	if ss = udpPorts(t, p.Server); !bound(ss, "67") {
		t.Errorf("serve --dhcp proxy bound no DHCP:\n%s", ss)
	}
	if log = stop(t, srv); !strings.Contains(log, "holds the default route") || !strings.Contains(log, "level=WARN msg=\"answering proxy DHCP") {
		t.Errorf("serve --dhcp proxy on the uplink did not warn:\n%s", log)
	}
}

// checkQuiet: no Go map syntax, and the missing boot files of uncommon
// architectures as one INFO line, not a WARN each.
func checkQuiet(t *testing.T, log string) {
	t.Helper()
	if strings.Contains(log, "map[") {
		t.Errorf("log has Go map syntax:\n%s", log)
	}
	if _, err := os.Stat("/usr/lib/ipxe/undionly.kpxe"); err != nil {
		return // without Debian's ipxe BIOS and x64 files are missing too: WARNs, rightly
	}
	if n := strings.Count(log, "boot file missing"); n > 0 {
		t.Errorf("%d boot-file WARN lines, want none (BIOS and x64 have theirs):\n%s", n, log)
	}
	info := regexp.MustCompile(`level=INFO msg="no boot file for some architectures[^"]*" archs=(\S+)`).FindStringSubmatch(log)
	if info == nil || !strings.Contains(info[1], "efi-arm64") || !strings.Contains(info[1], "rpiboot") {
		t.Errorf("no one INFO line naming the architectures without a boot file:\n%s", log)
	}
}

// TestServeWithoutPrivilege: serve run as nobody, in an empty folder,
// fails with status 1 before it creates anything, and names what it
// lacks (the capability or root) instead of guessing at another DHCP
// server.
func TestServeWithoutPrivilege(t *testing.T) {
	nstest.RequireRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	p, lab := workstation(t)
	top, bin := nobodyBinary(t, 0o755)
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"first run", []string{"serve"}, []string{"CAP_NET_BIND_SERVICE", "tftp :69", "http :80", "setcap"}},
		{"DHCP on the lab interface", []string{"serve", "--iface", lab}, []string{"CAP_NET_BIND_SERVICE", "dhcp :67, tftp :69, http :80"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(top, strings.ReplaceAll(tt.name, " ", "-"))
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := nstest.Command(ctx, p.Server, setpriv, append([]string{"--reuid=nobody", "--regid=nogroup", "--clear-groups",
				"--inh-caps=-all", bin}, tt.args...)...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitRuntime {
				t.Fatalf("pxeperf %s as nobody: %v, want exit status 1\n%s", strings.Join(tt.args, " "), err, out)
			}
			t.Logf("as nobody: pxeperf %s:\n%s", strings.Join(tt.args, " "), out)
			for _, w := range append(tt.want, "pxeperf: serve lacks the privileges", "nothing was created") {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if strings.Contains(string(out), "dnsmasq") || strings.Contains(string(out), "another DHCP") {
				t.Errorf("output guesses at another DHCP server")
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("a run without privilege created %s", strings.Join(names, ", "))
			}
		})
	}
}

// nobodyBinary copies the built binary into a folder of its own with
// mode perm, which another user may enter (t.TempDir's parents are 0700),
// removed when the test ends.
func nobodyBinary(t *testing.T, perm os.FileMode) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pxeperf-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "pxeperf")
	b, err := os.ReadFile(nstest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}
