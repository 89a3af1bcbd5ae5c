// Package testenv is what every kind of test needs and may import without
// a cycle (it imports nothing of pxeperf, so netlab's and record's own tests
// use it too): skipping when root or a tool is missing, waiting a bounded
// time for a condition, and a free loopback port.
package testenv

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// RequireRoot skips the test unless it runs as root with iproute2.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces (run as root; CI does)")
	}
	RequireTool(t, "ip")
}

// RequireTool skips the test when a program is missing, naming the package.
func RequireTool(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("needs %s in PATH (see .ci/run for the apt-get line that installs it)", n)
		}
	}
}

// WaitFor polls cond until it is true or timeout passes, and returns its
// last answer. The pause between polls starts at 5 ms and doubles up to
// 50 ms: a quick condition is seen at once, a slow one (a process, a
// namespace) is not polled in a busy loop.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	pause := 5 * time.Millisecond
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	return cond()
}

// FreePort is a loopback port that was free for network ("tcp" or "udp")
// a moment ago, for a process the test starts with an address of its own.
func FreePort(t testing.TB, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
