//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// badValue is a value each string flag must refuse with exit status 2,
// by "command path --flag". Typed flags (numbers, durations, true/false)
// get a value of the wrong type automatically.
var badValue = map[string]string{
	"pxeperf bench --blksize":         "big",
	"pxeperf bench --config":          "no-such.yaml",
	"pxeperf bench --cross-check":     "gopher",
	"pxeperf bench --delay":           "soon",
	"pxeperf bench --delay-cpu":       "first",
	"pxeperf bench --direction":       "sideways",
	"pxeperf bench --duration":        "long",
	"pxeperf bench --format":          "xml",
	"pxeperf bench --mtu":             "big",
	"pxeperf bench --offload":         "maybe",
	"pxeperf bench --preset":          "no-such-preset",
	"pxeperf bench --proto":           "gopher",
	"pxeperf bench --rate":            "fast",
	"pxeperf bench --size":            "huge",
	"pxeperf bench --udp-rate":        "fast",
	"pxeperf bench --window":          "wide",
	"pxeperf bench --windowsize":      "wide",
	"pxeperf healthcheck --config":    "no-such.yaml",
	"pxeperf healthcheck --url":       "gopher://x/",
	"pxeperf images --config":         "no-such.yaml",
	"pxeperf hosts --admin":           "ftp://x",
	"pxeperf hosts --config":          "no-such.yaml",
	"pxeperf hosts set --address":     "192.168.50",
	"pxeperf hosts set --dhcp-option": "no-equals-sign",
	"pxeperf hosts set --label":       "no-equals-sign",
	"pxeperf images generate --size":  "huge",
	"pxeperf leases --admin-addr":     "no-port",
	"pxeperf leases --config":         "no-such.yaml",
	"pxeperf leases --format":         "xml",
	"pxeperf report --chart":          "no-such-chart",
	"pxeperf report --config":         "no-such.yaml",
	"pxeperf report --format":         "xml",
	"pxeperf report --kind":           "no-such-kind",
	"pxeperf report --label":          "no-equals-sign",
	"pxeperf report --merge":          "bogus",
	"pxeperf report --min-size":       "huge",
	"pxeperf report --since":          "long ago",
	"pxeperf report --store":          "mysql://db/x",
	"pxeperf report --table":          "no-such-table",
	"pxeperf serve --addr":            "192.168.50",
	"pxeperf serve --admin-addr":      "no-port",
	"pxeperf serve --bench-addr":      "no-port", // the old name of --stream-addr
	"pxeperf serve --config":          "no-such.yaml",
	"pxeperf serve --dhcp":            "ful",
	"pxeperf serve --dhcp-relays":     "10.0.8",
	"pxeperf serve --http-addr":       "no-port",
	"pxeperf serve --iperf2-addr":     "no-port",
	"pxeperf serve --iperf3-addr":     "no-port",
	"pxeperf serve --log-format":      "xml",
	"pxeperf serve --log-level":       "loud",
	"pxeperf serve --pool":            "10.0.0.9-10.0.0.1",
	"pxeperf serve --store":           "mysql://db/x",
	"pxeperf serve --stream-addr":     "no-port",
	"pxeperf serve --tftp-addr":       "no-port",
	"pxeperf status --admin-addr":     "no-port",
	"pxeperf status --config":         "no-such.yaml",
	"pxeperf status --format":         "xml",
	"pxeperf store copy --from":       "mysql://db/x",
	"pxeperf store copy --to":         "mysql://db/x",
	"pxeperf store migrate --config":  "no-such.yaml",
	"pxeperf store migrate --store":   "mysql://db/x",
}

// anyText are string flags every value of which is taken as the command
// line is parsed (a name, a path that may be created, a host), with why.
var anyText = map[string]string{
	"pxeperf bench --data":              "a folder, created",
	"pxeperf bench --file":              "a file name in the root",
	"pxeperf bench --server":            "a host name, resolved when the bench runs",
	"pxeperf images --root":             "a folder; a missing one is a failure (1)",
	"pxeperf config check --root":       "a folder; a missing one is a note of the check",
	"pxeperf hosts --token":             "a token, sent as it is (a wrong one: 401, exit 1)",
	"pxeperf hosts --token-file":        "read when the request is made",
	"pxeperf hosts set --name":          "validated by the host API (a refusal: 400, exit 2)",
	"pxeperf hosts set --kernel":        "validated by the host API",
	"pxeperf hosts set --initrd":        "validated by the host API",
	"pxeperf hosts set --cmdline":       "validated by the host API",
	"pxeperf hosts set --fdt":           "validated by the host API",
	"pxeperf hosts set --default-boot":  "validated by the host API (local or shell)",
	"pxeperf hosts next-boot --kernel":  "validated by the host API",
	"pxeperf hosts next-boot --initrd":  "validated by the host API",
	"pxeperf hosts next-boot --cmdline": "validated by the host API",
	"pxeperf hosts next-boot --fdt":     "validated by the host API",
	"pxeperf hosts next-boot --script":  "validated by the host API",
	"pxeperf leases --token-file":       "read when the request is made",
	"pxeperf report --client":           "a filter: any MAC, IP or name",
	"pxeperf report --compare":          "a filter value",
	"pxeperf report --data":             "a folder; a missing store is a failure (1)",
	"pxeperf report --file":             "a filter: any file name",
	"pxeperf report --server":           "a filter: any server name",
	"pxeperf report --site":             "a filter: any site name",
	"pxeperf serve --data":              "a folder, created",
	"pxeperf serve --iface":             "an interface, which may appear later (1)",
	"pxeperf serve --root":              "a folder, created",
	"pxeperf status --token-file":       "read when the request is made",
	"pxeperf store migrate --data":      "a folder",
}

// runtimeFailure is, for every runnable command, a command line that is
// right but whose work fails (exit status 1), run in a folder of its own
// with nothing in it; "" when the command has no work that can fail.
var runtimeFailure = map[string][]string{
	"pxeperf bench":                 {"--server", "127.0.0.1", "--proto", "tcp", "--data", "/proc/pxeperf-no-such"},
	"pxeperf completion bash":       nil,
	"pxeperf completion fish":       nil,
	"pxeperf completion powershell": nil,
	"pxeperf completion zsh":        nil,
	"pxeperf config check":          {"unreadable.yaml"},
	"pxeperf config default":        nil,
	"pxeperf config example":        nil,
	"pxeperf healthcheck":           {"--url", "http://127.0.0.1:1/healthz", "--timeout", "2s"},
	"pxeperf hosts list":            {"--admin", "127.0.0.1:1", "--token", "t"},
	"pxeperf hosts show":            {"52:54:00:12:34:56", "--admin", "127.0.0.1:1", "--token", "t"},
	"pxeperf hosts rm":              {"52:54:00:12:34:56", "--admin", "127.0.0.1:1", "--token", "t"},
	"pxeperf hosts set":             {"52:54:00:12:34:56", "--kernel", "k", "--admin", "127.0.0.1:1", "--token", "t"},
	"pxeperf hosts next-boot":       {"52:54:00:12:34:56", "--local", "--admin", "127.0.0.1:1", "--token", "t"},
	"pxeperf hosts wait":            {"52:54:00:12:34:56", "--booted", "--timeout", "2s", "--admin", "127.0.0.1:1", "--token", "t"},
	"pxeperf images list":           {"--config", "root-is-a-file.yaml"},
	"pxeperf images generate":       {"--config", "root-is-a-file.yaml", "x", "--size", "1KiB"},
	"pxeperf images verify":         {"--config", "root-is-a-file.yaml"},
	"pxeperf leases":                {"--admin-addr", "127.0.0.1:1"},
	"pxeperf report":                {"--data", "no-store-here"},
	"pxeperf serve":                 {"--iface", "no-such-if0"},
	"pxeperf status":                {"--admin-addr", "127.0.0.1:1"},
	"pxeperf store copy":            {"--from", "sqlite:a-file/pxeperf.db", "--to", "sqlite:b/pxeperf.db"},
	"pxeperf store migrate":         {"--store", "sqlite:a-file/pxeperf.db"},
	"pxeperf version":               nil,
}

// exitCase is one command line and the exit status it must end with.
type exitCase struct {
	name string
	args []string
	code int
	// want, when set, is in stdout (a --help case); else stderr must
	// say why it failed.
	want string
	// files are written into the case's folder first (name: content);
	// a name ending in "/" is a folder.
	files map[string]string
}

// typoYAML has a key misspelt; badYAML a value that does not validate (a
// pool whose first address is after its last); brokenYAML is not YAML.
const (
	typoYAML   = "intreface: lab0\n"
	badYAML    = "dhcp:\n  mode: full\n  pool: 192.168.50.200-192.168.50.100\n"
	brokenYAML = "dhcp: [mode: full\n"
)

// TestExitStatusEveryCommand runs the built binary for every command of
// the tree (a new one is covered without a change here) with each kind of
// wrong command line and config, and checks the status a service manager
// acts on: 2 for everything a restart cannot fix (an unknown flag, a bad
// value of each flag, a wrong number of arguments, a YAML typo or syntax
// error, a value that does not validate, in --config or ./pxeperf.yaml),
// 1 for work that failed. A usage error creates nothing and says why on
// stderr. Every case runs in a network namespace of its own when possible,
// so nothing can answer on the host's network.
func TestExitStatusEveryCommand(t *testing.T) {
	bin := nstest.Binary(t)
	var isolate []string
	if os.Geteuid() == 0 {
		if p, err := exec.LookPath("unshare"); err == nil {
			// lo up: 127.0.0.1/8, for the cases that name it.
			isolate = []string{p, "--net", "--", "sh", "-c", `ip link set lo up && exec "$@"`, "sh"}
		}
	}
	if isolate == nil {
		t.Log("not root or no unshare: cases run in the host's network namespace")
	}
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var cases []exitCase
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		if c.Name() == "help" {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		key := c.CommandPath()
		with := func(args ...string) []string { return append(append([]string{}, path...), args...) }
		cases = append(cases, exitCase{name: key + " unknown flag", args: with("--no-such-flag"), code: exitUsage},
			exitCase{name: key + " help", args: with("--help"), code: 0, want: exitStatusText})
		if !c.Runnable() || c.HasSubCommands() { // a group: it only names its commands
			if c.HasSubCommands() {
				cases = append(cases, exitCase{name: key + " unknown subcommand", args: with("no-such-command"), code: exitUsage})
			}
			return
		}
		seen[key] = true
		// Arguments: a count the command's own check refuses.
		for _, n := range []int{0, 5} {
			args := make([]string, n)
			for i := range args {
				args[i] = "arg" + strconv.Itoa(i)
			}
			if c.Args != nil && c.Args(c, args) != nil {
				cases = append(cases, exitCase{name: key + " " + strconv.Itoa(n) + " args", args: with(args...), code: exitUsage})
			}
		}
		// A valid argument list for the flag cases below.
		var valid []string
		if c.Args != nil && c.Args(c, nil) != nil {
			valid = []string{"arg0"}
			if len(c.ValidArgs) > 0 {
				valid = []string{c.ValidArgs[0]}
			}
			if c.Name() == "check" {
				valid = []string{"good.yaml"}
			}
		}
		flags := pflag.NewFlagSet(key, pflag.ContinueOnError)
		flags.AddFlagSet(c.LocalFlags())
		flags.AddFlagSet(c.InheritedFlags())
		var unclassified []string
		flags.VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" || f.Name == "version" {
				return
			}
			fk := key + " --" + f.Name
			if _, ok := badValue[fk]; !ok {
				fk = c.Parent().CommandPath() + " --" + f.Name // a parent's persistent flag
			}
			v, ok := badValue[fk]
			switch t := f.Value.Type(); {
			case ok:
			case t == "bool":
				v = "maybe"
			case strings.Contains(t, "int") || strings.Contains(t, "float") || t == "duration":
				v = "x"
			case anyText[key+" --"+f.Name] != "" || anyText[fk] != "":
				return
			default:
				unclassified = append(unclassified, f.Name)
				return
			}
			arg := "--" + f.Name + "=" + v
			cases = append(cases, exitCase{name: key + " --" + f.Name + " " + v, args: with(append([]string{arg}, valid...)...),
				code: exitUsage, files: map[string]string{"good.yaml": ""}})
		})
		if len(unclassified) > 0 {
			sort.Strings(unclassified)
			t.Errorf("%s: flags --%s have no bad value in badValue and are not in anyText: classify them",
				key, strings.Join(unclassified, ", --"))
		}
		// The config: --config FILE (or the FILE argument of config
		// check) and ./pxeperf.yaml found by the search.
		fileArg := c.Name() == "check"
		if flags.Lookup("config") != nil || fileArg {
			for _, k := range []struct{ name, yaml string }{{"typo", typoYAML}, {"invalid", badYAML}, {"not YAML", brokenYAML}} {
				files := map[string]string{"c.yaml": k.yaml}
				a := with("--config", "c.yaml")
				if fileArg {
					a = with("c.yaml")
				} else {
					a = append(a, valid...)
				}
				cases = append(cases, exitCase{name: key + " config " + k.name, args: a, code: exitUsage, files: files})
				if !fileArg {
					cases = append(cases, exitCase{name: key + " ./pxeperf.yaml " + k.name, args: with(valid...), code: exitUsage,
						files: map[string]string{"pxeperf.yaml": k.yaml}})
				}
			}
		}
		rt, ok := runtimeFailure[key]
		switch {
		case !ok:
			t.Errorf("%s: no entry in runtimeFailure: add a command line whose work fails (exit status 1), or nil", key)
		case rt != nil:
			cases = append(cases, exitCase{name: key + " runtime failure", args: with(rt...), code: exitRuntime,
				files: map[string]string{"unreadable.yaml/": "", "root-is-a-file.yaml": "root: a-file\n", "a-file": "x"}})
		}
	}
	walk(root)
	// Settings that validate only against the interface.
	cases = append(cases, exitCase{name: "serve pool outside the subnet", code: exitUsage,
		args: []string{"serve", "--iface", "lo", "--dhcp", "full", "--pool", "10.9.0.100-10.9.0.200", "--tftp-addr", "off", "--http-addr", "off"}})
	for k := range runtimeFailure {
		if !seen[k] {
			t.Errorf("runtimeFailure has %q, which is no command", k)
		}
	}
	t.Logf("%d cases over %d commands", len(cases), len(seen))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(dir, name)
				var err error
				if strings.HasSuffix(name, "/") {
					err = os.Mkdir(p, 0o755)
				} else {
					err = os.WriteFile(p, []byte(content), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			before := listDir(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			argv := append(append(append([]string{}, isolate...), bin), tc.args...)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "HOME="+dir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				code = ee.ExitCode()
			case err != nil:
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatalf("pxeperf %s ran for 30 s: it was not refused\nstderr:\n%s", strings.Join(tc.args, " "), stderr.String())
			}
			if code != tc.code {
				t.Fatalf("pxeperf %s: exit status %d, want %d\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stderr.String())
			}
			if tc.want != "" {
				if !strings.Contains(stdout.String(), tc.want) {
					t.Errorf("pxeperf %s: stdout lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, stdout.String())
				}
			} else if !strings.Contains(stderr.String(), "pxeperf: ") {
				t.Errorf("pxeperf %s: stderr does not say why:\n%s", strings.Join(tc.args, " "), stderr.String())
			}
			if after := listDir(t, dir); tc.code == exitUsage && after != before {
				t.Errorf("pxeperf %s: a usage error created files: %s (before: %s)", strings.Join(tc.args, " "), after, before)
			}
		})
	}
}

// listDir names everything under dir, sorted.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(dir, p); rel != "." {
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}
