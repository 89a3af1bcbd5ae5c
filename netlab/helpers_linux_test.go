//go:build linux

package netlab

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// requireRoot skips a test that needs root (namespaces) and iproute2. The
// netlab tests keep their own helpers: internal/nstest builds on netlab.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces (run as root; CI does)")
	}
	requireTool(t, "ip")
}

func requireTool(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("needs %s in PATH (see .ci/run for the apt-get line that installs it)", n)
		}
	}
}

// waitFor polls cond every 50 ms until it is true or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
