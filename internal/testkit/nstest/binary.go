package nstest

// The built binary, for tests that run pxeperf as a user does. This file
// has no build tag: tests on every system start the binary this one way.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Build says how BuildBinary builds cmd/pxeperf: in Dir, a module's root
// (default this module's), with Flags added to `go build` (e.g.
// -buildvcs=true -trimpath).
type Build struct {
	Dir   string
	Flags []string
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds cmd/pxeperf once per test process, the default build, and
// returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		var dir string
		if dir, buildErr = os.MkdirTemp("", "pxeperf-bin-"); buildErr == nil {
			buildPath = filepath.Join(dir, "pxeperf")
			buildErr = goBuild(Build{}, buildPath)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// BuildBinary builds cmd/pxeperf as b says, every call anew, into a
// folder removed when t ends, and returns its path: for a test of the
// build itself (what it stamps); others share Binary's.
func BuildBinary(t testing.TB, b Build) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pxeperf")
	if err := goBuild(b, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// goBuild runs go build of ./cmd/pxeperf in b.Dir (default the module
// root) with b.Flags, writing out.
func goBuild(b Build, out string) error {
	dir := b.Dir
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		dir = root
	}
	args := append(append([]string{"build"}, b.Flags...), "-o", out, "./cmd/pxeperf")
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, o)
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}
