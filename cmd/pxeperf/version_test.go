package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestVersionFrom: the version line says what the build stamped, and
// "(devel)" only when nothing is known.
func TestVersionFrom(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202024503-5b939281fb53"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "5b939281fb5359f2a4fadce983646b50fb0704a6"},
			{Key: "vcs.time", Value: "2026-12-02T02:45:03Z"}, {Key: "vcs.modified", Value: "false"}}}
	dirty := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202024503-5b939281fb53+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "5b939281fb5359f2a4fadce983646b50fb0704a6"},
			{Key: "vcs.modified", Value: "true"}}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	revOnly := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "5b939281fb5359f2a4fadce983646b50fb0704a6"}}}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}
	for _, tt := range []struct {
		v    string
		bi   *debug.BuildInfo
		want string
	}{
		{"", stamped, "v0.0.0-20261202024503-5b939281fb53 (commit 5b939281fb53, 2026-12-02T02:45:03Z) go1.26.8"},
		{"", dirty, "v0.0.0-20261202024503-5b939281fb53+dirty (commit 5b939281fb53, modified) go1.26.8"},
		{"", revOnly, "(commit 5b939281fb53) go1.26.8"},
		{"", tagged, "v1.4.0 go1.26.8"},
		{"v2.0.0", stamped, "v2.0.0 (commit 5b939281fb53, 2026-12-02T02:45:03Z) go1.26.8"},
		{"", devel, "(devel) go1.26.8"},
		{"", nil, "(devel)"},
	} {
		if got := versionFrom(tt.v, tt.bi); got != tt.want {
			t.Errorf("versionFrom(%q, %+v) = %q, want %q", tt.v, tt.bi, got, tt.want)
		}
	}
}

// TestVersionOfABuildInACheckout: go build in a git checkout stamps the
// commit, and a tree with uncommitted changes is marked modified; the
// built binary's --version and version say so. The module is copied into
// a fresh repository (a worktree's .git file is not one go build reads).
func TestVersionOfABuildInACheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	src, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "-C", src, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimSpace(string(files)), "\n") {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			continue // deleted in the work tree
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "version test")
	rev := git("rev-parse", "HEAD")
	build := func() (string, string) {
		t.Helper()
		// -buildvcs=true: go build's default (auto) stamps in a checkout;
		// this says so over a GOFLAGS=-buildvcs=false of the environment.
		// -trimpath: the next run, in another folder, finds the packages
		// in the build cache.
		bin := nstest.BuildBinary(t, nstest.Build{Dir: dir, Flags: []string{"-buildvcs=true", "-trimpath"}})
		flag, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatal(err)
		}
		sub, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(flag)), strings.TrimSpace(string(sub))
	}
	flag, sub := build()
	t.Logf("clean: %s", flag)
	if flag != sub {
		t.Errorf("--version %q, version %q", flag, sub)
	}
	if !strings.Contains(flag, "commit "+rev[:12]) || strings.Contains(flag, "(devel)") || strings.Contains(flag, "modified") {
		t.Errorf("--version of a clean checkout at %s: %q", rev[:12], flag)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flag, _ = build()
	t.Logf("changed: %s", flag)
	if !strings.Contains(flag, "commit "+rev[:12]) || !strings.Contains(flag, "modified") {
		t.Errorf("--version of a checkout with a change: %q, want commit %s and modified", flag, rev[:12])
	}
}
