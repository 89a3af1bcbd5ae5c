//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"golang.org/x/sys/unix"
)

// readmeQuickStart returns the commands of README.md's quick start block
// (between <!-- quickstart ... --> and <!-- /quickstart -->), one per line,
// comment lines left out.
func readmeQuickStart(t *testing.T) []string {
	t.Helper()
	readme := repoFile(t, "README.md")
	m := regexp.MustCompile("(?s)<!-- quickstart[^>]*-->\\s*```sh\\n(.*?)```\\s*<!-- /quickstart -->").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no <!-- quickstart --> ```sh block <!-- /quickstart -->")
	}
	var cmds []string
	for _, l := range strings.Split(m[1], "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// TestReadmeQuickStart is the "done when": the README's quick start,
// run verbatim with the real binary in a fresh namespace, gives a served
// image, a boot by a client in a second namespace (a PXE ROM's TFTP fetch
// of the boot file when Debian's ipxe is installed, then what iPXE does:
// the per-client script and the image over HTTP), and a report with that
// fetch in it.
func TestReadmeQuickStart(t *testing.T) {
	nstest.RequireTool(t, "curl", "sh")
	cmds := readmeQuickStart(t)
	serveAt := -1
	for i, c := range cmds {
		if regexp.MustCompile(`(^|&& )pxeperf serve\b`).MatchString(c) {
			serveAt = i
		}
	}
	if serveAt < 0 || serveAt == len(cmds)-1 {
		t.Fatalf("quick start %q: want a pxeperf serve line with a report after it", cmds)
	}
	for _, c := range cmds {
		if strings.Contains(c, "/tmp") {
			t.Errorf("quick start puts files in /tmp: %q", c)
		}
	}
	bin := nstest.Binary(t)
	p := nstest.NewPair(t, nstest.Options{})
	// The quick start names the lab network's interface (--iface NAME):
	// the pair's server end is given that name in its namespace.
	if m := regexp.MustCompile(`pxeperf serve\b.*--iface[ =](\S+)`).FindStringSubmatch(cmds[serveAt]); m != nil {
		nstest.Run(t, p.Server, "ip", "link", "set", "dev", p.ServerIf, "down")
		nstest.Run(t, p.Server, "ip", "link", "set", "dev", p.ServerIf, "name", m[1])
		nstest.Run(t, p.Server, "ip", "link", "set", "dev", m[1], "up")
		p.ServerIf = m[1]
	}
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))

	// Terminal 1: everything up to serve, which runs on.
	term1 := "set -e\n" + strings.Join(cmds[:serveAt+1], "\n")
	srv := nstest.Command(context.Background(), p.Server, "sh", "-c", term1)
	srv.Env = env
	srv.Dir = home
	out := &nstest.SyncBuffer{}
	srv.Stdout, srv.Stderr = out, out
	srv.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	t.Cleanup(func() {
		_ = unix.Kill(-srv.Process.Pid, unix.SIGKILL)
		if t.Failed() {
			t.Logf("terminal 1 (%q):\n%s", term1, out.String())
		}
	})
	if !nstest.WaitFor(120*time.Second, func() bool { return strings.Contains(out.String(), "http boot serving") }) {
		select {
		case err := <-done:
			t.Fatalf("terminal 1 ended: %v", err)
		default:
		}
		t.Fatal("serve did not start within 120 s")
	}

	// The boot, from the client namespace.
	server := p.ServerIP.String()
	mac := "52:54:00:12:34:56"
	if _, err := os.Stat("/usr/lib/ipxe/undionly.kpxe"); err == nil && hasTool("tftp") {
		got := filepath.Join(t.TempDir(), "undionly.kpxe")
		nstest.Run(t, p.Client, "tftp", server, "-c", "get", "undionly.kpxe", got)
		if nstest.FileSHA256(t, got) != nstest.FileSHA256(t, "/usr/lib/ipxe/undionly.kpxe") {
			t.Error("TFTP undionly.kpxe differs from Debian's")
		}
	}
	// Boot as a PXE ROM does: its DHCP DISCOVER (option 60 PXEClient) meets
	// pxeperf's proxyDHCP, which is how pxeperf learns the MAC it then
	// lets /boot.ipxe?mac= claim (see README, "Who may claim a MAC").
	// There is no lab DHCP server here, so udhcpc gets no address and
	// gives up; the sighting is what counts.
	nstest.Run(t, p.Client, "ip", "link", "set", "dev", p.ClientIf, "address", mac)
	if hasTool("busybox") {
		_, _ = nstest.Output(p.Client, 20*time.Second, "busybox", "udhcpc", "-i", p.ClientIf, "-n", "-q",
			"-t", "2", "-T", "1", "-V", "PXEClient:Arch:00000:UNDI:002001", "-s", "/bin/true")
	}
	script := nstest.Run(t, p.Client, "curl", "-sSf", "http://"+server+"/boot.ipxe?mac="+mac)
	if !strings.HasPrefix(script, "#!ipxe") {
		t.Errorf("boot.ipxe = %q, want an iPXE script", script)
	}
	img := filepath.Join(t.TempDir(), "img64")
	nstest.Run(t, p.Client, "curl", "-sSf", "-o", img, "http://"+server+"/img64?mac="+mac)
	lab := filepath.Join(home, "pxeperf-lab")
	if nstest.FileSHA256(t, img) != nstest.FileSHA256(t, filepath.Join(lab, "images", "img64")) {
		t.Fatal("the image fetched over HTTP differs from the one images generate wrote")
	}

	// Terminal 2: the report, until the fetch is in it (the store is
	// filled from the journal within moments).
	term2 := "set -e\n" + strings.Join(cmds[serveAt+1:], "\n")
	var report string
	var rerr error
	fetchRow := regexp.MustCompile(`(?m)^.*\bimg64\b.*$`)
	ok := nstest.WaitFor(15*time.Second, func() bool {
		cmd := nstest.Command(context.Background(), p.Server, "sh", "-c", term2)
		cmd.Env, cmd.Dir = env, t.TempDir()
		b, err := cmd.CombinedOutput()
		report, rerr = string(b), err
		return err == nil && fetchRow.MatchString(report)
	})
	if !ok {
		t.Fatalf("report (%q) has no img64 fetch: %v\n%s", term2, rerr, report)
	}
	row := fetchRow.FindString(report)
	for _, want := range []string{mac, "67108864"} {
		if !strings.Contains(row, want) && !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	t.Logf("report:\n%s", report)
	// The records are in the quick start's folder, not in /tmp.
	if _, err := os.Stat(filepath.Join(lab, "pxeperf-data", "pxeperf.db")); err != nil {
		t.Errorf("no record store in %s/pxeperf-data: %v", lab, err)
	}
}

func hasTool(name string) bool {
	for _, d := range filepath.SplitList(os.Getenv("PATH") + ":/usr/bin:/usr/sbin") {
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

// TestReadmeSetup: the README keeps its two set-up commands: one that runs
// the main job on the embedded default, outside /tmp, and the test command
// .ci/run runs, exactly.
func TestReadmeSetup(t *testing.T) {
	readme := repoFile(t, "README.md")
	m := regexp.MustCompile("(?s)## Set up a fresh machine\n(.*?)\n## ").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README has no \"Set up a fresh machine\" section")
	}
	var cmds []string
	for _, l := range strings.Split(m[1], "\n") {
		if strings.HasPrefix(l, "    ") {
			cmds = append(cmds, strings.TrimSpace(l))
		}
	}
	if len(cmds) != 2 {
		t.Fatalf("set-up commands %q, want two (run, test)", cmds)
	}
	if run := cmds[0]; !strings.HasSuffix(run, "pxeperf serve") || strings.Contains(run, "/tmp") || strings.Contains(run, "--config") {
		t.Errorf("run command %q: want pxeperf serve on the embedded default, outside /tmp", run)
	}
	if cmds[1] != "go test -count=1 -timeout 25m ./..." {
		t.Errorf("test command %q changed; .ci/run runs exactly go test -count=1 -timeout 25m ./...", cmds[1])
	}
	if ci := repoFile(t, ".ci/run"); !strings.Contains(ci, "\n"+cmds[1]+"\n") {
		t.Errorf(".ci/run does not run the README's test command %q", cmds[1])
	}
}
