//go:build linux

package uboot

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// Prompt is U-Boot's hush prompt (CONFIG_SYS_PROMPT "=> ").
const Prompt = "=> "

// Console drives a U-Boot serial console: QEMU's serial port is its stdin
// and stdout, a goroutine keeps everything it prints, and commands are
// typed one at a time, each waiting for the next prompt. Every wait is
// bounded; a failed wait ends the test with the console tail and the
// server's log tail.
type Console struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    nstest.SyncBuffer
	srvLog func() string      // the server's log so far, for failure dumps
	cancel context.CancelFunc // kills QEMU
	exited chan struct{}      // closed once QEMU has exited
	status int                // QEMU's exit status, valid after exited
}

// Boot starts board b in namespace ns with its NIC on tap (Start with the
// board's QEMU and QEMUArgs).
func Boot(t testing.TB, b Board, name, ns, tap string, srvLog func() string) *Console {
	t.Helper()
	return Start(t, name, ns, srvLog, b.QEMU, b.QEMUArgs(tap)...)
}

// Start starts QEMU in namespace ns ("": the test's own); it is killed at
// cleanup. srvLog, when not nil, gives the server log a failure shows
// beside the console.
func Start(t testing.TB, name, ns string, srvLog func() string, qemu string, args ...string) *Console {
	t.Helper()
	if srvLog == nil {
		srvLog = func() string { return "" }
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Console{t: t, name: name, srvLog: srvLog, exited: make(chan struct{}), cancel: cancel}
	c.cmd = nstest.Command(ctx, ns, qemu, args...)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	c.cmd.WaitDelay = 5 * time.Second
	in, err := c.cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.in = in
	if err := c.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", qemu, err)
	}
	go func() {
		_ = c.cmd.Wait()
		c.status = c.cmd.ProcessState.ExitCode()
		close(c.exited)
	}()
	t.Cleanup(c.Stop)
	return c
}

// Console is what U-Boot printed so far, without escape codes and CRs.
func (c *Console) Console() string { return nstest.CleanConsole(c.out.String()) }

// Fatalf ends the test with the console and server log tails.
func (c *Console) Fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s\n--- U-Boot console (tail) ---\n%s\n--- server log (tail) ---\n%s",
		c.name, fmt.Sprintf(format, args...), nstest.Tail(c.Console(), 40), nstest.Tail(c.srvLog(), 25))
}

// WaitFor waits until cond holds for the console text after offset from
// (an offset in the raw output), QEMU exits or timeout passes.
func (c *Console) WaitFor(from int, timeout time.Duration, what string, cond func(string) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		raw := c.out.String()
		if from > len(raw) {
			from = len(raw)
		}
		s := nstest.CleanConsole(raw[from:])
		if cond(s) {
			return s
		}
		select {
		case <-c.exited:
			// One last look: QEMU may print and exit together.
			if s := nstest.CleanConsole(c.out.String()[from:]); cond(s) {
				return s
			}
			c.Fatalf("QEMU exited (status %d) while waiting for %s", c.status, what)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.Fatalf("no %s within %s", what, timeout)
		}
	}
}

// StopAutoboot waits for U-Boot's countdown, presses a key and waits for
// the prompt.
func (c *Console) StopAutoboot(timeout time.Duration) {
	c.t.Helper()
	c.WaitFor(0, timeout, `"Hit any key to stop autoboot"`, func(s string) bool {
		return strings.Contains(s, "Hit any key to stop autoboot")
	})
	from := len(c.out.String())
	c.write(" ")
	c.WaitFor(from, 10*time.Second, "prompt after stopping autoboot", func(s string) bool {
		return strings.Contains(s, Prompt)
	})
}

func (c *Console) write(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, s); err != nil {
		c.Fatalf("write to QEMU's serial port: %v", err)
	}
}

// Run types one command and waits (at most timeout) for the next prompt. It
// returns what the command printed, without its echo and the prompt.
func (c *Console) Run(cmd string, timeout time.Duration) string {
	c.t.Helper()
	from := len(c.out.String())
	c.write(cmd + "\n")
	// The prompt is what U-Boot prints last before it waits for input; it
	// need not start a line: `printenv NAME` goes through printf, which cuts
	// a long value (and its newline) at CONFIG_SYS_PBSIZE.
	s := c.WaitFor(from, timeout, fmt.Sprintf("prompt after %q", cmd), func(s string) bool {
		i := strings.IndexByte(s, '\n') // after the echoed command line
		return i >= 0 && strings.HasSuffix(s[i+1:], Prompt)
	})
	s = s[strings.IndexByte(s, '\n')+1:]
	return strings.TrimSuffix(s, Prompt)
}

// Send types a command that is not expected to return to the prompt (a
// boot) and returns the output offset to wait from.
func (c *Console) Send(cmd string) int {
	c.t.Helper()
	from := len(c.out.String())
	c.write(cmd + "\n")
	return from
}

// WaitExit waits for QEMU to exit and returns its status.
func (c *Console) WaitExit(timeout time.Duration) int {
	c.t.Helper()
	select {
	case <-c.exited:
		return c.status
	case <-time.After(timeout):
		c.Fatalf("QEMU still running %s after the boot command", timeout)
		return -1
	}
}

// Stop kills QEMU and waits (15 s at most) until it has exited; the
// console is of no use afterwards. Cleanup does the same for a console
// still running.
func (c *Console) Stop() {
	c.t.Helper()
	_ = c.in.Close()
	c.cancel()
	select {
	case <-c.exited:
	case <-time.After(15 * time.Second):
		c.t.Errorf("%s: QEMU did not exit after kill", c.name)
	}
}

// Env makes a fresh U-Boot's environment deterministic: one interface, no
// retries on other ports, no serverip left from anywhere, plus what the
// build lacks and extra.
func (c *Console) Env(b Board, extra ...string) {
	c.t.Helper()
	cmds := append([]string{"setenv ethact " + b.Ethact, "setenv ethrotate no", "setenv netretry no", "setenv serverip"}, b.Env...)
	for _, cmd := range append(cmds, extra...) {
		if out := c.Run(cmd, 10*time.Second); strings.TrimSpace(out) != "" {
			c.Fatalf("%s: %s", cmd, out)
		}
	}
}

var (
	transferred = regexp.MustCompile(`Bytes transferred = (\d+)`)
	rateLine    = regexp.MustCompile(`\t (([0-9.]+) ([KMG]?)i?B/s)`)
	crcLine     = regexp.MustCompile(`==> ([0-9a-f]{8})`)
)

// Fetch is one tftpboot as U-Boot ran it.
type Fetch struct {
	Out  string        // what tftpboot printed
	Wall time.Duration // typed command to the next prompt
	Rate string        // U-Boot's own rate line ("1.2 MiB/s"), "" if none
	// RateMbps is Rate in Mbit/s, 0 if none. U-Boot times the transfer
	// from tftp_start to the last block (net/tftp.c) and prints it with
	// one decimal (print_size, 1024-based units): it leaves out the NIC
	// start and stop and the console, but is coarse, and still longer
	// than the server's own fetch time (see DESIGN.md#rate-line).
	RateMbps float64
}

// RateMbps is U-Boot's rate line ("6.2 MiB/s", "512 KiB/s", "100 B/s")
// in Mbit/s; ok is false when s is not one.
func RateMbps(s string) (mbps float64, ok bool) {
	m := rateLine.FindStringSubmatch("\t " + s)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return 0, false
	}
	unit := map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m[3]]
	return v * unit * 8 / 1e6, true
}

// TFTPBoot runs `tftpboot ${loadaddr} FILE` (FILE may be IP:NAME, which
// also sets serverip) at the blksize and windowsize already set, waits at
// most timeout, and ends the test unless U-Boot says it transferred size
// bytes.
func (c *Console) TFTPBoot(file string, size int64, timeout time.Duration) Fetch {
	c.t.Helper()
	t0 := time.Now()
	out := c.Run("tftpboot ${loadaddr} "+file, timeout)
	f := Fetch{Out: out, Wall: time.Since(t0)}
	if m := transferred.FindStringSubmatch(out); m == nil || m[1] != fmt.Sprint(size) {
		c.Fatalf("tftpboot %s: want %d bytes transferred:\n%s", file, size, nstest.Tail(out, 10))
	}
	if m := rateLine.FindStringSubmatch(out); m != nil {
		f.Rate = m[1]
		f.RateMbps, _ = RateMbps(m[1])
	}
	return f
}

// CheckCRC32 runs U-Boot's own crc32 over what the last tftpboot loaded
// and ends the test unless it is want; what names the transfer.
func (c *Console) CheckCRC32(want uint32, what string) {
	c.t.Helper()
	out := c.Run("crc32 ${loadaddr} ${filesize}", 2*time.Minute)
	if m := crcLine.FindStringSubmatch(out); m == nil || m[1] != fmt.Sprintf("%08x", want) {
		c.Fatalf("U-Boot's crc32 after %s: %q, want %08x", what, strings.TrimSpace(out), want)
	}
}
