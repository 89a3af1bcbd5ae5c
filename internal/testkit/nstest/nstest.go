//go:build linux

// Package nstest builds throwaway test networks from network namespaces and
// veth pairs, for integration tests with real clients (dhclient, udhcpc,
// tftp-hpa, atftp, curl, QEMU). Every namespace gets a unique name and is
// removed in t.Cleanup; traffic never leaves the namespaces a test made.
package nstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
	"github.com/pxeperf/pxeperf/netlab"
)

// RequireRoot skips the test unless it runs as root with iproute2
// (testenv.RequireRoot, here beside the rigs that need it).
func RequireRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
}

// RequireTool skips the test when a program is missing (testenv.RequireTool).
func RequireTool(t testing.TB, names ...string) {
	t.Helper()
	testenv.RequireTool(t, names...)
}

var seq atomic.Int32

// Pair is two namespaces joined by a veth pair: Server (ServerIf, ServerIP)
// and Client (ClientIf, ClientIP unless NoClientIP).
type Pair struct {
	Server, Client     string
	ServerIf, ClientIf string
	ServerIP, ClientIP netip.Addr
	Prefix             netip.Prefix
	// Testbed is the netlab testbed behind the pair: rate limits
	// (Testbed.SetRate), delay and offloads go through it, not tc.
	Testbed *netlab.Testbed
}

// Options shape a Pair.
type Options struct {
	MTU        int  // 0: 1500
	NoClientIP bool // leave the client side unaddressed (DHCP tests)
}

// NewPair makes a namespace pair, removed when the test ends. It is a
// netlab testbed (netlab.New: namespaces and veth through netlink, the
// bench's own), on a subnet of its own so logs of parallel tests differ.
func NewPair(t testing.TB, opt Options) *Pair {
	t.Helper()
	RequireRoot(t)
	n := seq.Add(1)
	subnet := int(os.Getpid()+int(n)*7) % 250
	// Names unique to this pair, so a test may move ends between its pairs.
	id := fmt.Sprintf("%d-%d", os.Getpid()%100000, n)
	tb, err := netlab.New(netlab.Options{MTU: opt.MTU, NoClientAddr: opt.NoClientIP,
		Prefix:   netip.MustParsePrefix(fmt.Sprintf("10.251.%d.0/24", subnet)),
		ServerIf: "vs" + id, ClientIf: "vc" + id})
	if err != nil {
		t.Fatalf("nstest: %v", err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Logf("nstest: %v", err)
		}
	})
	p := &Pair{Server: tb.ServerNS, Client: tb.ClientNS, ServerIf: tb.ServerIf, ClientIf: tb.ClientIf,
		ServerIP: tb.ServerIP, ClientIP: tb.ClientIP, Prefix: tb.Prefix, Testbed: tb}
	if opt.NoClientIP {
		// The address the client would have: tests hand it out by DHCP.
		p.ClientIP = p.ServerIP.Next()
	}
	return p
}

// KillNetnsProcs SIGKILLs every process left in a namespace.
func KillNetnsProcs(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// Command returns a command that runs in namespace ns ("" for the current one).
func Command(ctx context.Context, ns string, name string, args ...string) *exec.Cmd {
	if ns == "" {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Run runs a command in ns to completion (60 s at most) and fails the test
// on error. It returns the combined output.
func Run(t testing.TB, ns string, name string, args ...string) string {
	t.Helper()
	out, err := Output(ns, 60*time.Second, name, args...)
	if err != nil {
		t.Fatalf("%s %s (netns %q): %v\n%s", name, strings.Join(args, " "), ns, err, out)
	}
	return out
}

// Output runs a command in ns with a timeout and returns its combined output.
func Output(ns string, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := Command(ctx, ns, name, args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return b.String(), err
}

// Proc is a background process started by Start.
type Proc struct {
	Cmd *exec.Cmd
	Out *SyncBuffer
}

// Start runs a command in ns in the background; it is killed at cleanup.
// Its output is kept in Out and logged when the test fails.
func Start(t testing.TB, ns string, name string, args ...string) *Proc {
	t.Helper()
	return startCmd(t, Command(context.Background(), ns, name, args...), name+" "+strings.Join(args, " "))
}

// StartCmd is Start for a command the caller has set up (its folder, its
// environment): cmd runs in its own process group with its output in Out,
// is killed when the test ends, and its output's tail is logged if the
// test failed.
func StartCmd(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	return startCmd(t, cmd, strings.Join(cmd.Args, " "))
}

// startCmd starts cmd as StartCmd says; what names it in the failure log.
func startCmd(t testing.TB, cmd *exec.Cmd, what string) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Out: &SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			logTail(t, what, p.Out.String())
		}
	})
	return p
}

// logTailLines is how much of a failed test's process output goes in the
// test log: CI shows the log's end, and a flood's thousand log lines there
// would hide the failure above them.
const logTailLines = 12

// logTail logs the last lines of a process's output and keeps the whole of
// it in a file outside the test's temporary folder, named in the log.
func logTail(t testing.TB, what, out string) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) <= logTailLines {
		t.Logf("output of %s:\n%s", what, out)
		return
	}
	f, err := os.CreateTemp("", "pxeperf-test-output-*.log")
	kept := "not kept: " + fmt.Sprint(err)
	if err == nil {
		_, _ = f.WriteString(out)
		_ = f.Close()
		kept = "all of it in " + f.Name()
	}
	t.Logf("output of %s (last %d of %d lines; %s):\n%s", what, logTailLines, len(lines), kept,
		strings.Join(lines[len(lines)-logTailLines:], "\n"))
}

// Kill SIGKILLs the process group and waits for it.
func (p *Proc) Kill() {
	if p.Cmd.Process == nil || p.Cmd.ProcessState != nil {
		return
	}
	_ = unix.Kill(-p.Cmd.Process.Pid, unix.SIGKILL)
	_ = p.Cmd.Wait()
}

// Signal sends sig to the process group.
func (p *Proc) Signal(sig unix.Signal) error { return unix.Kill(-p.Cmd.Process.Pid, sig) }

// WaitFor polls cond until it is true or timeout passes (testenv.WaitFor).
func WaitFor(timeout time.Duration, cond func() bool) bool { return testenv.WaitFor(timeout, cond) }

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Do runs fn on an OS thread switched into namespace ns (netlab.RunIn).
// Sockets fn opens stay in ns after it returns, so a test can listen or
// dial inside a namespace from its own process.
func Do(ns string, fn func() error) error { return netlab.RunIn(ns, fn) }

// DialContext dials from namespace ns: an http.Transport's DialContext for
// a client in a test's namespace.
func DialContext(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := Do(ns, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// FileSHA256 returns the hex sha256 of a file.
func FileSHA256(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RandomFile writes n pseudo-random bytes (seeded, reproducible) to path.
func RandomFile(t testing.TB, path string, n int, seed uint64) {
	t.Helper()
	b := make([]byte, n)
	x := seed | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// GuestLAN makes the network a QEMU guest boots on: a pair whose client
// side is unaddressed, and in p.Client a bridge (br) holding the veth end
// and a tap (tap) for QEMU's -netdev tap,ifname=TAP. The guest gets its
// address by DHCP or sets it itself.
func GuestLAN(t testing.TB) (p *Pair, br, tap string) {
	t.Helper()
	p = NewPair(t, Options{NoClientIP: true})
	br, tap = "br"+p.ClientIf, "tp"+p.ClientIf
	Run(t, p.Client, "ip", "link", "add", br, "type", "bridge")
	Run(t, p.Client, "ip", "link", "set", p.ClientIf, "master", br)
	Run(t, p.Client, "ip", "tuntap", "add", "dev", tap, "mode", "tap")
	Run(t, p.Client, "ip", "link", "set", tap, "master", br)
	Run(t, p.Client, "ip", "link", "set", tap, "up")
	Run(t, p.Client, "ip", "link", "set", br, "up")
	return p, br, tap
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?=]*[a-zA-Z]`)

// CleanConsole is a guest's serial output without escape codes and CRs.
func CleanConsole(s string) string {
	s = ansi.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "\r", "")
}

// Tail is the last n lines of s, for failure messages.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
