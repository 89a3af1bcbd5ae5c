//go:build linux

package dhcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
)

// optionsServe runs the built binary's `serve --dhcp full` with options
// in every layer; host is a host entry (indented list item) or "".
func optionsServe(t *testing.T, p *nstest.Pair, host string) *nstest.Served {
	t.Helper()
	yaml := fmt.Sprintf(`log_level: debug
dhcp:
  mode: full
  pool: %s
  options:
    ntp_servers: [%s, %s]
    root_path: "%s:/srv/global"
    224: "hex:01ab00ff"
    225: {value: "string:always", force: true}
    226: "string:never"
    tz_database: Europe/Paris
    domain_search: [lab.example, example.com]
  class_options:
    - match: {vendor_class: U-Boot}
      options:
        root_path: "%s:/srv/uboot,vers=3"
http:
  listen: %s:8080
tftp:
  listen: %s:69
hosts:
%s`, poolFor(p, 100, 120), nthAddr(p, 5), nthAddr(p, 6), p.ServerIP, p.ServerIP, p.ServerIP, p.ServerIP, host)
	return p.Serve(t, yaml, nil)
}

// TestOptionsUdhcpc: busybox udhcpc, asking for root path, NTP servers,
// host name and option 224, gets each as configured against the real
// binary: 17 and 12 from the host entry (12 its name), 42 global, 224
// byte-exact; the forced 225 though it did not ask; neither 226 nor 101,
// which nobody asked for or forced.
func TestOptionsUdhcpc(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "busybox")
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	const hostMAC = "02:00:00:dd:00:07"
	srv := optionsServe(t, p, fmt.Sprintf("  - mac: %s\n    name: board7\n    dhcp_options:\n      root_path: \"%s:/srv/board7\"\n",
		hostMAC, p.ServerIP))
	asks := []string{"-O", "rootpath", "-O", "ntpsrv", "-O", "hostname", "-O", "224", "-O", "search"}

	setMAC(t, p, hostMAC)
	env, err := udhcpcEnv(t, p, asks...)
	if err != nil {
		t.Fatalf("%v\n%s", err, nstest.Tail(srv.Out.String(), 20))
	}
	want := fmt.Sprintf("rootpath=%s:/srv/board7 ntpsrv=%s %s hostname=board7 opt224=01ab00ff opt225=616c77617973 opt226= tzdbstr=",
		p.ServerIP, nthAddr(p, 5), nthAddr(p, 6))
	want += " search=lab.example example.com"
	if got := envOf(env, "rootpath", "ntpsrv", "hostname", "opt224", "opt225", "opt226", "tzdbstr", "search"); got != want {
		t.Errorf("udhcpc as host board7:\n got %s\nwant %s", got, want)
	}

	// Another MAC, no host entry: the global root path, no host name; and
	// as a U-Boot (udhcpc -V sends option 60), the class's.
	setMAC(t, p, "02:00:00:dd:00:08")
	env, err = udhcpcEnv(t, p, asks...)
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("rootpath=%s:/srv/global hostname=", p.ServerIP)
	if got := envOf(env, "rootpath", "hostname"); got != want {
		t.Errorf("udhcpc without a host entry:\n got %s\nwant %s", got, want)
	}
	env, err = udhcpcEnv(t, p, append(asks, "-V", "U-Boot.armv8")...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := envOf(env, "rootpath"), fmt.Sprintf("rootpath=%s:/srv/uboot,vers=3", p.ServerIP); got != want {
		t.Errorf("udhcpc as U-Boot:\n got %s\nwant %s", got, want)
	}
}

// envOf lists keys' values in env as "k=v", in order.
func envOf(env map[string]string, keys ...string) string {
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return strings.Join(out, " ")
}

// TestOptionsConfigCheck: `pxeperf config check` refuses a bad option
// value with its key, line and fix, and takes the good ones.
func TestOptionsConfigCheck(t *testing.T) {
	bin := nstest.Binary(t)
	dir := t.TempDir()
	check := func(yaml string) (string, error) {
		cfg := filepath.Join(dir, "pxeperf.yaml")
		if err := os.WriteFile(cfg, []byte("root: "+dir+"\n"+yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "config", "check", cfg).CombinedOutput()
		return string(out), err
	}
	bad := "hosts:\n  - mac: 52:54:00:00:00:01\n    dhcp_options:\n      ntp_servers: [10.0.0.5, 10.0.0.500]\n      mtu: 90000\n"
	out, err := check(bad)
	for _, w := range []string{"pxeperf.yaml:5: hosts[0].dhcp_options.ntp_servers: \"10.0.0.500\" is not an IPv4 address; write e.g. 192.168.50.1",
		"pxeperf.yaml:6: hosts[0].dhcp_options.mtu: \"90000\" is not a number 0..65535"} {
		if err == nil || !strings.Contains(out, w) {
			t.Errorf("config check of a bad option: %v\n%s\nwant %q", err, out, w)
		}
	}
	if out, err := check("dhcp:\n  options:\n    root_path: /srv/nfs\n    224: {value: \"hex:01\", force: true}\n"); err != nil {
		t.Errorf("config check of good options: %v\n%s", err, out)
	}
}

// TestOptionsUBoot: U-Boot arm64 under QEMU, after `dhcp`, has the root
// path (option 17, which it asks for) of its class in ${rootpath} and its
// host name (12) in ${hostname}.
func TestOptionsUBoot(t *testing.T) {
	nstest.RequireRoot(t)
	b, _ := uboot.BoardNamed("arm64")
	b.Require(t)
	p, _, tap := nstest.GuestLAN(t)
	srv := optionsServe(t, p, fmt.Sprintf("  - mac: %s\n    name: uboot-board\n", b.MAC))
	c := uboot.Boot(t, b, "arm64 options", p.Client, tap, srv.Out.String)
	c.StopAutoboot(90 * time.Second)
	c.Env(b, "setenv autoload no")
	if out := c.Run("dhcp", 60*time.Second); !strings.Contains(out, "DHCP client bound to address") {
		c.Fatalf("dhcp did not bind:\n%s", out)
	}
	for _, want := range []string{fmt.Sprintf("rootpath=%s:/srv/uboot,vers=3", p.ServerIP), "hostname=uboot-board"} {
		k, _, _ := strings.Cut(want, "=")
		if got := strings.TrimSpace(c.Run("printenv "+k, 10*time.Second)); got != want {
			c.Fatalf("after dhcp, printenv %s: %q, want %q", k, got, want)
		}
	}
}

// TestOptionsIPXE: Debian's iPXE ROM (SeaBIOS, e1000) under QEMU reads
// the root path (17), host name (12), domain search list (119, RFC 1035
// compression decoded by iPXE) and the forced raw 225 from pxeperf's ACK,
// as its script prints them.
func TestOptionsIPXE(t *testing.T) {
	if testing.Short() {
		t.Skip("a QEMU guest takes half a minute; skipped with -short")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "qemu-system-x86_64")
	p, _, tap := nstest.GuestLAN(t)
	const mac = "52:54:00:e2:e2:31"
	// One short line each: the console wraps at 80 columns.
	script := "#!ipxe\necho PXO rp=${root-path}\necho PXO hn=${hostname}\necho PXO ds=${dnssl}\necho PXO o225=${225:string}\necho PXEPERF-END\n"
	srv := optionsServe(t, p, fmt.Sprintf("  - mac: %s\n    name: ipxe-board\n    script: %q\n", mac, script))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	q := nstest.X86Guest{NS: p.Client, Tap: tap, Memory: "256", Args: []string{"-device", "e1000,netdev=n0,mac=" + mac}}.QEMU()
	q.StopAt = []string{"PXEPERF-END"}
	r := q.Run(ctx)
	for _, want := range []string{"PXO rp=" + p.ServerIP.String() + ":/srv/global\n", "PXO hn=ipxe-board\n",
		"PXO ds=lab.example example.com\n", "PXO o225=always\n"} {
		if !strings.Contains(r.Console, want) {
			t.Errorf("iPXE printed no %q:\n%s\npxeperf (tail):\n%s", want, nstest.Tail(r.Console, 30), nstest.Tail(srv.Out.String(), 20))
		}
	}
}

// processCPU is the CPU time (user and system) the test process has used,
// in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestOptionsOverHostAPI: a host entry's DHCP options given at run time
// over the admin API reach busybox udhcpc at once, a PATCH changes them for
// the next exchange, and a bad value is refused with the field and the fix.
// A write without the right token in the Authorization header (none, a
// wrong one, or the token in the query string) gets 401 and changes
// nothing.
func TestOptionsOverHostAPI(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "busybox")
	nstest.RequireTool(t, "curl")
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("opt-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := optionsServe(t, p, "admin:\n  token_file: "+token+"\n")
	const mac = "02:00:00:dd:00:31"
	api := func(method, path, body string, auth ...string) (int, string) {
		t.Helper()
		args := []string{"-sS", "--max-time", "20", "-o", "/dev/stdout", "-w", "\n%{http_code}", "-X", method,
			"-H", "Content-Type: application/json", "http://" + srv.Admin + path}
		if body != "" {
			args = append(args, "--data-binary", body)
		}
		for _, a := range auth {
			args = append(args, "-H", "Authorization: Bearer "+a)
		}
		out, err := nstest.Output(p.Server, 30*time.Second, "curl", args...)
		if err != nil {
			t.Fatalf("curl %s %s: %v\n%s", method, path, err, out)
		}
		i := strings.LastIndex(out, "\n")
		code := 0
		fmt.Sscan(out[i+1:], &code)
		return code, out[:i]
	}
	good := fmt.Sprintf(`{"name":"apiboard","dhcp_options":{"root_path":"%s:/srv/api"}}`, p.ServerIP)
	for _, c := range []struct {
		what, path string
		auth       []string
	}{
		{"no token", "/api/hosts/" + mac, nil},
		{"a wrong token", "/api/hosts/" + mac, []string{"opt-tokeN"}},
		{"the token in the query string", "/api/hosts/" + mac + "?access_token=opt-token", nil},
	} {
		if code, body := api("PUT", c.path, good, c.auth...); code != 401 {
			t.Errorf("PUT with %s: HTTP %d, want 401: %s", c.what, code, body)
		}
	}
	if code, body := api("GET", "/api/hosts/"+mac, "", "opt-token"); code != 404 {
		t.Fatalf("after the refused writes the host exists: HTTP %d %s", code, body)
	}
	code, body := api("PUT", "/api/hosts/"+mac, `{"dhcp_options":{"ntp_servers":"not-an-ip"}}`, "opt-token")
	var refusal struct{ Error, Field, Fix string }
	if err := json.Unmarshal([]byte(body), &refusal); code != 400 || err != nil || refusal.Field != "dhcp_options.ntp_servers" || refusal.Fix == "" {
		t.Errorf("a bad option value: HTTP %d %s; want 400 with field dhcp_options.ntp_servers and a fix", code, body)
	}
	if code, body := api("PUT", "/api/hosts/"+mac, good, "opt-token"); code != 201 {
		t.Fatalf("PUT: HTTP %d %s", code, body)
	}
	setMAC(t, p, mac)
	asks := []string{"-O", "rootpath", "-O", "hostname"}
	env, err := udhcpcEnv(t, p, asks...)
	if err != nil {
		t.Fatalf("%v\n%s", err, nstest.Tail(srv.Out.String(), 20))
	}
	if got, want := envOf(env, "rootpath", "hostname"), fmt.Sprintf("rootpath=%s:/srv/api hostname=apiboard", p.ServerIP); got != want {
		t.Errorf("udhcpc after the PUT:\n got %s\nwant %s", got, want)
	}
	patch := fmt.Sprintf(`{"dhcp_options":{"root_path":"%s:/srv/patched"}}`, p.ServerIP)
	if code, body := api("PATCH", "/api/hosts/"+mac, patch, "opt-token"); code != 200 {
		t.Fatalf("PATCH: HTTP %d %s", code, body)
	}
	env, err = udhcpcEnv(t, p, asks...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := envOf(env, "rootpath", "hostname"), fmt.Sprintf("rootpath=%s:/srv/patched hostname=apiboard", p.ServerIP); got != want {
		t.Errorf("udhcpc after the PATCH:\n got %s\nwant %s", got, want)
	}
}
