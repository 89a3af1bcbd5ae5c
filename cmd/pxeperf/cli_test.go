package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestExitCodes: 0 done, 2 for a wrong command line, 1 when the work fails.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct {
		args []string
		code int
		want string // in stdout+stderr
	}{
		"version flag":            {[]string{"--version"}, 0, "pxeperf "},
		"version command":         {[]string{"version"}, 0, "pxeperf "},
		"help":                    {[]string{"--help"}, 0, "Exit status"},
		"no command":              {nil, 0, "Available Commands"},
		"unknown command":         {[]string{"sevre"}, 2, `unknown command "sevre"`},
		"unknown subcommand":      {[]string{"config", "chek"}, 2, "check, default, example"},
		"unknown flag":            {[]string{"serve", "--bogus"}, 2, "unknown flag: --bogus"},
		"bad number":              {[]string{"bench", "--repeat", "abc"}, 2, `--repeat "abc": want a whole number`},
		"missing argument":        {[]string{"config", "check"}, 2, "accepts 1 arg"},
		"extra argument":          {[]string{"serve", "now"}, 2, "unknown command"},
		"config example":          {[]string{"config", "example"}, 2, "lab-proxy"},
		"repeat zero":             {[]string{"bench", "--repeat", "0"}, 2, "at least one fetch"},
		"pool in proxy mode":      {[]string{"serve", "--pool", "10.0.0.1-10.0.0.9", "--data", dir}, 2, "--pool is for --dhcp full"},
		"report on no store":      {[]string{"report", "--data", filepath.Join(dir, "none")}, 1, "run pxeperf serve"},
		"config check missing":    {[]string{"config", "check", filepath.Join(dir, "missing.yaml")}, 2, "reading config"},
		"config check unreadable": {[]string{"config", "check", dir}, 1, "reading config"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			code := run(tt.args, &out, &out)
			if code != tt.code || !strings.Contains(out.String(), tt.want) {
				t.Fatalf("pxeperf %s: exit %d, want %d; output lacks %q?\n%s", strings.Join(tt.args, " "), code, tt.code, tt.want, out.String())
			}
		})
	}
}

// goInternals are phrases of Go and cobra internals a user must never see.
var goInternals = regexp.MustCompile("strconv\\.|ParseInt|parsing \"|\\[\\]configs\\.|configs\\.[A-Z]|if any flags in the group|none of the others can be|!!str|!!seq|time\\.Duration")

// TestErrorsSpeakConfig: bad flag values and config values are answered in
// the words of the command line and the config file, never Go's.
func TestErrorsSpeakConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("dhcp:\n  dns: 8.8.8.8\n  lease_time: abc\n  port: many\nhosts:\n  - mac: 52:54:00:00:00:01\n    labels: [a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"bench", "--repeat", "abc"},
		{"bench", "--seed", "-1"},
		{"report", "--limit", "abc"},
		{"report", "--intervals", "x"},
		{"report", "--table", "clients", "--intervals", "3"},
		{"report", "--intervals", "3", "--netperf", "3"},
		{"images", "generate", "x", "--seed", "abc"},
		{"config", "check", bad},
		{"serve", "--config", bad},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if code := run(args, &out, &out); code == 0 {
				t.Fatalf("no error:\n%s", out.String())
			}
			if m := goInternals.FindString(out.String()); m != "" {
				t.Errorf("error shows Go internals (%q):\n%s", m, out.String())
			}
		})
	}
}

// TestConfigCheckEveryError: config check lists every problem of a file,
// not the first: unknown keys, bad values and what validation finds.
func TestConfigCheckEveryError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	body := "log_level: loud\ndhcp:\n  mode: full\n  pol: 10.0.0.1-10.0.0.9\n  dns: 8.8.8.8\n  lease_time: abc\n" +
		"tftp:\n  retries: 0\nhosts:\n  - mac: zz\n  - mac: 52:54:00:00:00:01\n    address: banana\n"
	if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runCmd(t, "config", "check", bad)
	if err == nil {
		t.Fatal("config check passed a broken file")
	}
	for _, want := range []string{
		"bad.yaml:1: log_level", `bad.yaml:4: dhcp.pol: unknown key "pol"; did you mean "pool"?`,
		"bad.yaml:5: dhcp.dns: cannot use the text `8.8.8.8` as a list of IP addresses",
		"bad.yaml:6: dhcp.lease_time", "bad.yaml:8: tftp.retries", `bad.yaml:10: hosts[0].mac: "zz" is not an Ethernet MAC`,
		`bad.yaml:12: hosts[1].address: "banana" is not an IP address`, "dhcp.mode: full mode needs an address pool",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("config check error lacks %q:\n%v", want, err)
		}
	}
}

// TestConfigExampleNames: config example without a name (or a wrong one)
// lists every example with what it is for.
func TestConfigExampleNames(t *testing.T) {
	for _, args := range [][]string{{"config", "example"}, {"config", "example", "lab"}} {
		_, err := runCmd(t, args...)
		if err == nil || exitCode(err) != exitUsage {
			t.Fatalf("%v: err = %v, want a usage error", args, err)
		}
		for _, want := range []string{"lab-proxy", "A lab that already has a DHCP server", "isolated-full"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: %q lacks %q", args, err, want)
			}
		}
	}
	out, err := runCmd(t, "config", "example", "lab-proxy")
	if err != nil || !strings.Contains(out, "mode: proxy") {
		t.Fatalf("config example lab-proxy: %v\n%s", err, out)
	}
}

// TestConfigSearch: serve, images, report and bench read ./pxeperf.yaml
// when --config is not given, so the quick start's images generate writes
// into the root serve serves and report reads serve's data folder; an
// explicit --config wins.
func TestConfigSearch(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pxeperf.yaml", "interface: nosuchif0\nroot: ./lab-root\ndata: ./lab-data\n")
	write("other.yaml", "root: ./other-root\ndata: ./notes.txt\n")
	write("notes.txt", "not a folder\n")

	if out, err := runCmd(t, "images", "generate", "a.img", "--size", "4K"); err != nil {
		t.Fatalf("images generate: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lab-root", "a.img")); err != nil {
		t.Errorf("images generate did not write into ./pxeperf.yaml's root: %v", err)
	}
	if out, err := runCmd(t, "images", "list"); err != nil || !strings.Contains(out, "a.img") {
		t.Errorf("images list of the config's root: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "images", "--config", "other.yaml", "generate", "b.img", "--size", "4K"); err != nil {
		t.Fatalf("images --config: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "other-root", "b.img")); err != nil {
		t.Errorf("images --config other.yaml did not write into its root: %v", err)
	}
	_, err := runCmd(t, "serve")
	if err == nil || !strings.Contains(err.Error(), `no interface named "nosuchif0"`) {
		t.Errorf("serve did not read ./pxeperf.yaml: %v", err)
	}
	_, err = runCmd(t, "report")
	if err == nil || !strings.Contains(err.Error(), "lab-data") {
		t.Errorf("report did not look in ./pxeperf.yaml's data folder: %v", err)
	}
	for _, cmd := range []string{"report", "bench"} {
		_, err = runCmd(t, cmd, "--config", "other.yaml")
		if err == nil || !strings.Contains(err.Error(), "notes.txt is a file; pass the folder") {
			t.Errorf("%s --config other.yaml: %v, want its data (a file) refused", cmd, err)
		}
	}
	// A file given as --data names the folder to pass.
	_, err = runCmd(t, "report", "--data", filepath.Join(dir, "notes.txt"))
	if err == nil || !strings.Contains(err.Error(), "--data "+dir) {
		t.Errorf("report --data FILE: %v, want it to say --data %s", err, dir)
	}
	// A config that exists but is broken is an error, not skipped.
	write("pxeperf.yaml", "dhcp:\n  mod: full\n")
	if _, err := runCmd(t, "images", "list"); err == nil || !strings.Contains(err.Error(), "pxeperf.yaml:2") {
		t.Errorf("images list with a broken ./pxeperf.yaml: %v", err)
	}
}

// TestImagesGenerateRefusesOverwrite: an existing image is replaced only
// with --force.
func TestImagesGenerateRefusesOverwrite(t *testing.T) {
	root := filepath.Join(t.TempDir(), "images")
	if _, err := runImagesCmd(t, "generate", "x.img", "--size", "4K", "--root", root); err != nil {
		t.Fatal(err)
	}
	_, err := runImagesCmd(t, "generate", "x.img", "--size", "8K", "--root", root)
	if err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second generate: %v, want a refusal naming --force", err)
	}
	if st, _ := os.Stat(filepath.Join(root, "x.img")); st == nil || st.Size() != 4096 {
		t.Fatalf("x.img was changed by a refused generate: %v", st)
	}
	if _, err := runImagesCmd(t, "generate", "x.img", "--size", "8K", "--root", root, "--force"); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(root, "x.img")); st == nil || st.Size() != 8192 {
		t.Fatalf("--force did not replace x.img: %v", st)
	}
	// A root whose parent is missing is refused, not grown as a tree.
	_, err = runImagesCmd(t, "generate", "y.img", "--size", "4K", "--root", filepath.Join(root, "no", "such"))
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("generate into a root without a parent: %v", err)
	}
}

// TestServeRefusesSettings: settings that could not work stop serve before
// it binds anything, with the fix.
func TestServeRefusesSettings(t *testing.T) {
	dir := t.TempDir()
	base := []string{"serve", "--iface", "lo", "--tftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--data", filepath.Join(dir, "data")}
	tests := map[string]struct {
		args []string
		want []string
		code int
	}{
		"pool outside the subnet": {[]string{"--dhcp", "full", "--pool", "10.9.0.100-10.9.0.200", "--root", filepath.Join(dir, "i")},
			[]string{"10.9.0.100-10.9.0.200", "outside lo's subnet 127.0.0.0/8", "--pool 127.0.0.100-127.0.0.200"}, 2},
		"addr not on the interface": {[]string{"--dhcp", "off", "--addr", "10.9.9.9", "--root", filepath.Join(dir, "i")},
			[]string{"10.9.9.9 is not an address of lo", "127.0.0.1/8", "ip addr add 10.9.9.9/24 dev lo"}, 1},
		"pool in proxy mode": {[]string{"--pool", "127.0.0.100-127.0.0.200", "--root", filepath.Join(dir, "i")},
			[]string{"--pool is for --dhcp full", "proxy mode", "add --dhcp full"}, 2},
		"root without a parent": {[]string{"--dhcp", "off", "--root", filepath.Join(dir, "no", "such", "images")},
			[]string{filepath.Join(dir, "no", "such") + ", does not exist", "mkdir -p", "--root"}, 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := runCmd(t, append(append([]string{}, base...), tt.args...)...)
			if err == nil {
				t.Fatal("serve accepted it")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if c := exitCode(err); c != tt.code {
				t.Errorf("exit code %d, want %d", c, tt.code)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); err == nil {
		t.Error("a refused root left folders behind")
	}
}

// TestBindHint: a bind refused for privilege says which capability or root
// is needed, and drops the service's guess (another server running?).
func TestBindHint(t *testing.T) {
	op := &net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{Port: 80}, Err: os.NewSyscallError("bind", syscall.EACCES)}
	svcErr := fmt.Errorf("http boot: listening on :80: %w (free the port, or set http.listen / --http-addr, or --http-addr off)", op)
	err := bindHint(svcErr)
	for _, w := range []string{"listen tcp :80: bind: permission denied", "setcap cap_net_bind_service,cap_net_raw,cap_net_admin+ep", "sudo"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("hint lacks %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "free the port") || strings.Contains(err.Error(), "--dhcp proxy") {
		t.Errorf("hint keeps a guess that does not fit:\n%v", err)
	}
	if !errors.Is(err, syscall.EACCES) {
		t.Error("the hint does not wrap the socket error")
	}
	busy := fmt.Errorf("x: %w", &net.OpError{Op: "listen", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)})
	if bindHint(busy) != busy {
		t.Error("a busy port got the permission hint")
	}
}

// TestServeDHCPBusyInProxyMode: a busy DHCP port in proxy mode does not
// suggest --dhcp proxy.
func TestServeDHCPBusyInProxyMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: DHCP binds to the interface (SO_BINDTODEVICE)")
	}
	c, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := c.LocalAddr().(*net.UDPAddr).Port
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dhcp:\n  mode: proxy\n  port: %d\n  proxy_port: %d\n", port, port)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, "serve", "--config", cfg, "--iface", "lo", "--tftp-addr", "off", "--http-addr", "off",
		"--root", filepath.Join(dir, "i"), "--data", filepath.Join(dir, "d"))
	if err == nil {
		t.Fatal("serve bound a busy DHCP port")
	}
	if strings.Contains(err.Error(), "--dhcp proxy") || !strings.Contains(err.Error(), "--dhcp off") {
		t.Errorf("proxy-mode bind error: %v", err)
	}
}

// numericFlag says a flag takes a number: its usage speaks of N, a count,
// a port or an ID, or its default is a number.
var numericFlag = regexp.MustCompile(`\bN\b|\bcount\b|\bport\b(?: of|$)|record ID|fetches per|seed`)

// TestHelpText walks every command's help: no line wider than 100
// columns, no flag whose back-quoted usage became its type name (pflag's
// UnquoteUsage), and flags that take numbers typed as numbers.
func TestHelpText(t *testing.T) {
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var all []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if len(all) < 15 {
		t.Fatalf("walked only %d commands", len(all))
	}
	types := map[string]bool{"": true, "string": true, "int": true, "int64": true, "uint64": true, "uint": true,
		"duration": true, "stringArray": true, "strings": true, "float64": true}
	for _, c := range all {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"pxeperf"}, path...), " "), func(t *testing.T) {
			var out bytes.Buffer
			if code := run(append(path, "--help"), &out, &out); code != 0 {
				t.Fatalf("--help: exit %d\n%s", code, out.String())
			}
			for i, line := range strings.Split(out.String(), "\n") {
				if n := utf8.RuneCountInString(line); n > helpWidth {
					t.Errorf("line %d is %d columns (most %d):\n%s", i+1, n, helpWidth, line)
				}
			}
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if strings.Contains(f.Usage, "`") {
					t.Errorf("--%s: a back-quote in its usage becomes its type name: %q", f.Name, f.Usage)
				}
				name, _ := pflag.UnquoteUsage(f)
				if !types[name] {
					t.Errorf("--%s shows the type %q", f.Name, name)
				}
				numeric := numericFlag.MatchString(f.Usage)
				if _, err := strconv.Atoi(f.DefValue); err == nil && f.Value.Type() != "bool" {
					numeric = true
				}
				if numeric && !strings.Contains(f.Value.Type(), "int") {
					t.Errorf("--%s takes a number but is typed %s (%q)", f.Name, f.Value.Type(), f.Usage)
				}
			})
			if c.Name() == "serve" && !strings.Contains(out.String(), "--stream-addr string") {
				t.Errorf("serve --help: --stream-addr is not typed string:\n%s", out.String())
			}
		})
	}
}

// TestGoSourceFolder: serve warns when its root is the images/ Go package
// of a checkout (serve run in the repository with the default root).
func TestGoSourceFolder(t *testing.T) {
	if !goSourceFolder(filepath.Join("..", "..", "images")) {
		t.Error("the images package of this checkout is not recognised")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "boot.ipxe"), []byte("#!ipxe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if goSourceFolder(dir) {
		t.Error("a plain image folder is taken for Go sources")
	}
}
