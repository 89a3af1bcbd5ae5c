package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
)

// repoFile reads a file at the repository root.
func repoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerInstr is one Dockerfile instruction with its continuation lines joined.
type dockerInstr struct{ op, args string }

func parseDockerfile(t *testing.T, text string) []dockerInstr {
	t.Helper()
	var out []dockerInstr
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		op, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(op), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// TestDockerfile checks the image without a docker daemon: a HEALTHCHECK
// that runs pxeperf healthcheck, VOLUMEs for the root and the state that
// the default CMD uses, a CMD the CLI accepts, and the build stage's go
// build run here as written (output path aside).
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, repoFile(t, "Dockerfile"))
	find := func(op string) []string {
		var a []string
		for _, in := range ins {
			if in.op == op {
				a = append(a, in.args)
			}
		}
		return a
	}
	hc := find("HEALTHCHECK")
	if len(hc) != 1 || !strings.Contains(hc[0], `CMD ["/usr/local/bin/pxeperf", "healthcheck"]`) {
		t.Errorf("HEALTHCHECK = %q, want one running pxeperf healthcheck", hc)
	}
	var vols []string
	for _, v := range find("VOLUME") {
		if err := json.Unmarshal([]byte(v), &vols); err != nil {
			t.Fatalf("VOLUME %s: %v", v, err)
		}
	}
	if strings.Join(vols, " ") != "/images /data" {
		t.Errorf("VOLUME = %q, want /images and /data", vols)
	}
	cmds := find("CMD")
	var args []string
	if len(cmds) != 1 || json.Unmarshal([]byte(cmds[0]), &args) != nil {
		t.Fatalf("CMD = %q", cmds)
	}
	if strings.Join(args, " ") != "serve --root /images --data /data" {
		t.Errorf("CMD %q does not serve the volumes", args)
	}
	c, rest, err := newRootCmd().Find(args)
	if err != nil || c.Name() != "serve" {
		t.Fatalf("CMD %q: %v", args, err)
	}
	if err := c.ParseFlags(rest); err != nil {
		t.Errorf("CMD %q: %v", args, err)
	}
	if e := find("ENTRYPOINT"); len(e) != 1 || e[0] != `["/usr/local/bin/pxeperf"]` {
		t.Errorf("ENTRYPOINT = %q", e)
	}

	var build string
	for _, r := range find("RUN") {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	if build == "" {
		t.Fatal("no RUN go build in the Dockerfile")
	}
	if testing.Short() {
		t.Skip("-short: not running the Dockerfile's go build")
	}
	out := filepath.Join(t.TempDir(), "pxeperf")
	line := strings.Replace(build, "-o /pxeperf", "-o "+out, 1)
	if line == build {
		t.Fatalf("RUN %q: no -o /pxeperf to redirect", build)
	}
	cmd := exec.Command("sh", "-ec", line)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/local/go/bin")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("RUN %s: %v\n%s", line, err, b)
	}
	v, err := exec.Command(out, "--version").Output()
	if err != nil || !strings.HasPrefix(string(v), "pxeperf ") {
		t.Errorf("the image's binary: --version = %q, %v", v, err)
	}
	if b, err := exec.Command("file", out).Output(); err == nil && !strings.Contains(string(b), "statically linked") {
		t.Errorf("the image's binary is not static (debian-slim has no Go runtime deps to lean on): %s", b)
	}
}

// dockerIgnored reports whether .dockerignore's patterns exclude path
// (last match wins; "!" re-includes; "**/" at any depth), as docker's
// patternmatcher does for these simple patterns.
func dockerIgnored(patterns []string, path string) bool {
	ignored := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/")
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(p, "**/")
		match := false
		for dir := path; dir != "." && dir != "/"; dir = filepath.Dir(dir) {
			if ok, _ := filepath.Match(p, dir); ok {
				match = true
				break
			}
			if ok, _ := filepath.Match(p, filepath.Base(dir)); ok && anyDepth {
				match = true
				break
			}
		}
		if match {
			ignored = !neg
		}
	}
	return ignored
}

// TestDockerignore: the build context holds every Go source the build
// needs and none of the checkout's state: .git, records, served images.
func TestDockerignore(t *testing.T) {
	var pats []string
	for _, l := range strings.Split(repoFile(t, ".dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, l)
		}
	}
	for _, p := range []string{".git", ".git/config", "pxeperf-data/pxeperf.db", "images/sample.ipxe", "images/img64",
		"pxeperf", "cmd/pxeperf/pxeperf.test", "pxeperf.yaml"} {
		if !dockerIgnored(pats, p) {
			t.Errorf("%s is in the build context", p)
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}",
		".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(f[0], root+string(filepath.Separator)) {
			continue
		}
		rel, _ := filepath.Rel(root, f[0])
		for _, g := range f[1:] {
			n++
			if p := filepath.Join(rel, g); dockerIgnored(pats, p) {
				t.Errorf("%s is needed by the build but .dockerignore leaves it out", p)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d Go files of the module found by go list", n)
	}
	for _, p := range []string{"go.mod", "go.sum"} {
		if dockerIgnored(pats, p) {
			t.Errorf("%s is needed by the build but left out", p)
		}
	}
}

// TestHealthcheck: 0 for 200 from /healthz, 1 otherwise.
func TestHealthcheck(t *testing.T) {
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || !healthy {
			http.Error(w, "not ok", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	var out strings.Builder
	if code := run([]string{"healthcheck", "--url", srv.URL + "/healthz"}, &out, &out); code != 0 {
		t.Fatalf("healthy server: exit %d\n%s", code, out.String())
	}
	healthy = false
	out.Reset()
	if code := run([]string{"healthcheck", "--url", srv.URL + "/healthz"}, &out, &out); code != 1 || !strings.Contains(out.String(), "503") {
		t.Fatalf("unhealthy server: exit %d\n%s", code, out.String())
	}
	// Without --url, the config's http.listen on 127.0.0.1.
	dir := t.TempDir()
	t.Chdir(dir)
	healthy = true
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	if err := os.WriteFile("pxeperf.yaml", []byte("http:\n  listen: \":"+port+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"healthcheck"}, &out, &out); code != 0 || !strings.Contains(out.String(), "127.0.0.1:"+port) {
		t.Fatalf("healthcheck from ./pxeperf.yaml: exit %d\n%s", code, out.String())
	}
}

// TestSystemdUnit: the shipped unit runs serve with the shipped config, as
// a user with the three capabilities the README's setcap line grants, with
// its state in /var/lib/pxeperf (not /tmp).
func TestSystemdUnit(t *testing.T) {
	unit := repoFile(t, "contrib/systemd/pxeperf.service")
	keys := map[string]string{}
	for _, l := range strings.Split(unit, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			keys[k] = v
		}
	}
	exec := strings.Fields(keys["ExecStart"])
	if len(exec) < 2 || exec[0] != "/usr/local/bin/pxeperf" {
		t.Fatalf("ExecStart = %q", keys["ExecStart"])
	}
	c, rest, err := newRootCmd().Find(exec[1:])
	if err != nil || c.Name() != "serve" || c.ParseFlags(rest) != nil {
		t.Fatalf("ExecStart %q is not a serve command line: %v", exec, err)
	}
	if cfg, _ := c.Flags().GetString("config"); cfg != "/etc/pxeperf/pxeperf.yaml" {
		t.Errorf("ExecStart --config %q, want the searched /etc/pxeperf/pxeperf.yaml", cfg)
	}
	cfg, err := configs.Load(filepath.Join("..", "..", "contrib", "systemd", "pxeperf.yaml"))
	if err != nil {
		t.Fatalf("the shipped pxeperf.yaml: %v", err)
	}
	if cfg.Data != "/var/lib/pxeperf" || keys["StateDirectory"] != "pxeperf" || keys["WorkingDirectory"] != "/var/lib/pxeperf" {
		t.Errorf("state: data %q, StateDirectory %q, WorkingDirectory %q; want /var/lib/pxeperf", cfg.Data, keys["StateDirectory"], keys["WorkingDirectory"])
	}
	if strings.HasPrefix(cfg.Root, "/tmp") || strings.HasPrefix(cfg.Data, "/tmp") {
		t.Errorf("the shipped config keeps files in /tmp: root %s, data %s", cfg.Root, cfg.Data)
	}
	caps := strings.Fields(keys["AmbientCapabilities"])
	readme := repoFile(t, "README.md")
	m := regexp.MustCompile(`setcap (\S+)\+ep`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README has no setcap line")
	}
	var want []string
	for _, c := range strings.Split(m[1], ",") {
		want = append(want, strings.ToUpper(c))
	}
	if strings.Join(caps, " ") != strings.Join(want, " ") {
		t.Errorf("AmbientCapabilities %q, README's setcap grants %q", caps, want)
	}
	if keys["ExecReload"] == "" || !strings.Contains(readme, "contrib/systemd/pxeperf.service") {
		t.Error("the unit has no ExecReload, or the README does not show it")
	}
	if keys["RestartPreventExitStatus"] != strconv.Itoa(exitUsage) {
		t.Error("a usage error (exit 2) would be restarted forever")
	}
}
