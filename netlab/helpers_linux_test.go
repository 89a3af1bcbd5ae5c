//go:build linux

package netlab

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// requireRoot skips a test that needs root (namespaces) and iproute2. The
// netlab tests keep their own helpers: internal/testkit/nstest builds on netlab.
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

// tcpPair connects the client side to a TCP listener on the server side
// whose one accepted connection serve handles (in a goroutine, closed
// after); the client's connection is closed at the end of the test.
func tcpPair(t testing.TB, tb *Testbed, serve func(net.Conn)) net.Conn {
	t.Helper()
	var ln net.Listener
	if err := tb.Run(Server, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(tb.ServerIP.String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	var conn net.Conn
	if err := tb.Run(Client, func() (err error) {
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
