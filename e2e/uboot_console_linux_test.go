//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/nstest"
)

// ubootPrompt is U-Boot's hush prompt (CONFIG_SYS_PROMPT "=> ").
const ubootPrompt = "=> "

// ubootConsole drives a U-Boot serial console: QEMU's serial port is its
// stdin and stdout, a goroutine keeps everything it prints, and commands are
// typed one at a time, each waiting for the next prompt. Every wait is
// bounded; a failed wait ends the test with the console tail and pxeperf's
// log tail.
type ubootConsole struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    nstest.SyncBuffer
	srvLog func() string // pxeperf's log so far, for failure dumps
	exited chan struct{} // closed once QEMU has exited
	status int           // QEMU's exit status, valid after exited
	start  time.Time
}

// startUBoot starts QEMU in namespace ns; it is killed at cleanup.
func startUBoot(t *testing.T, name, ns string, srvLog func() string, qemu string, args ...string) *ubootConsole {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &ubootConsole{t: t, name: name, srvLog: srvLog, exited: make(chan struct{})}
	c.cmd = nstest.Command(ctx, ns, qemu, args...)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	c.cmd.WaitDelay = 5 * time.Second
	in, err := c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.in = in
	if err := c.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", qemu, err)
	}
	c.start = time.Now()
	go func() {
		_ = c.cmd.Wait()
		c.status = c.cmd.ProcessState.ExitCode()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.in.Close()
		cancel()
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			t.Errorf("%s: QEMU did not exit after kill", name)
		}
	})
	return c
}

// console is what U-Boot printed so far, without escape codes and CRs.
func (c *ubootConsole) console() string { return cleanConsole(c.out.String()) }

// fatalf ends the test with the console and pxeperf log tails.
func (c *ubootConsole) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s\n--- U-Boot console (tail) ---\n%s\n--- pxeperf log (tail) ---\n%s",
		c.name, fmt.Sprintf(format, args...), tail(c.console(), 40), tail(c.srvLog(), 25))
}

// waitFor waits until cond holds for the console text after offset from
// (an offset in the raw output), QEMU exits or timeout passes.
func (c *ubootConsole) waitFor(from int, timeout time.Duration, what string, cond func(string) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		raw := c.out.String()
		if from > len(raw) {
			from = len(raw)
		}
		s := cleanConsole(raw[from:])
		if cond(s) {
			return s
		}
		select {
		case <-c.exited:
			// One last look: QEMU may print and exit together.
			if s := cleanConsole(c.out.String()[from:]); cond(s) {
				return s
			}
			c.fatalf("QEMU exited (status %d) while waiting for %s", c.status, what)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.fatalf("no %s within %s", what, timeout)
		}
	}
}

// stopAutoboot waits for U-Boot's countdown, presses a key and waits for
// the prompt.
func (c *ubootConsole) stopAutoboot(timeout time.Duration) {
	c.t.Helper()
	c.waitFor(0, timeout, `"Hit any key to stop autoboot"`, func(s string) bool {
		return strings.Contains(s, "Hit any key to stop autoboot")
	})
	from := len(c.out.String())
	c.write(" ")
	c.waitFor(from, 10*time.Second, "prompt after stopping autoboot", func(s string) bool {
		return strings.Contains(s, ubootPrompt)
	})
}

func (c *ubootConsole) write(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, s); err != nil {
		c.fatalf("write to QEMU's serial port: %v", err)
	}
}

// run types one command and waits (at most timeout) for the next prompt. It
// returns what the command printed, without its echo and the prompt.
func (c *ubootConsole) run(cmd string, timeout time.Duration) string {
	c.t.Helper()
	from := len(c.out.String())
	c.write(cmd + "\n")
	// The prompt is what U-Boot prints last before it waits for input; it
	// need not start a line: `printenv NAME` goes through printf, which cuts
	// a long value (and its newline) at CONFIG_SYS_PBSIZE.
	s := c.waitFor(from, timeout, fmt.Sprintf("prompt after %q", cmd), func(s string) bool {
		i := strings.IndexByte(s, '\n') // after the echoed command line
		return i >= 0 && strings.HasSuffix(s[i+1:], ubootPrompt)
	})
	s = s[strings.IndexByte(s, '\n')+1:]
	return strings.TrimSuffix(s, ubootPrompt)
}

// send types a command that is not expected to return to the prompt (a
// boot) and returns the output offset to wait from.
func (c *ubootConsole) send(cmd string) int {
	c.t.Helper()
	from := len(c.out.String())
	c.write(cmd + "\n")
	return from
}

// waitExit waits for QEMU to exit and returns its status.
func (c *ubootConsole) waitExit(timeout time.Duration) int {
	c.t.Helper()
	select {
	case <-c.exited:
		return c.status
	case <-time.After(timeout):
		c.fatalf("QEMU still running %s after the boot command", timeout)
		return -1
	}
}
