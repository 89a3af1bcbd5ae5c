//go:build linux

package nstest

import (
	"context"
	"strings"
	"time"
)

// Exit codes a guest reports through QEMU's isa-debug-exit device (port
// 0xf4): writing V makes QEMU exit with status V<<1|1 (QEMUStatus), so a
// test reads a guest's verdict from QEMU's exit status alone.
const (
	GuestOK   = 0x2a // QEMU exit status 85
	GuestFail = 0x11 // QEMU exit status 35
)

// QEMUStatus is QEMU's exit status when its guest wrote v to isa-debug-exit.
func QEMUStatus(v byte) int { return int(v)<<1 | 1 }

// ExitCode is x86 code that writes v to port 0xf4 and halts; the same bytes
// run in real mode (a raw PXE image) and long mode (an EFI application).
func ExitCode(v byte) []byte { return []byte{0xb0, v, 0xe6, 0xf4, 0xfa, 0xf4, 0xeb, 0xfd} }

// X86Guest is one run of qemu-system-x86_64 under TCG (the nested KVM here
// fails iPXE and OVMF) in namespace NS, on Tap, network-booting, with an
// isa-debug-exit device; Args adds the firmware and NIC.
type X86Guest struct {
	NS, Tap, Memory string
	Args            []string
}

// QEMU is the guest's run, for a test that sets StopAt or Marks.
func (g X86Guest) QEMU() QEMU {
	args := []string{"-accel", "tcg", "-m", g.Memory, "-nographic", "-no-reboot", "-boot", "n",
		"-netdev", "tap,id=n0,ifname=" + g.Tap + ",script=no,downscript=no",
		"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"}
	return QEMU{NS: g.NS, Binary: "qemu-system-x86_64", Args: append(args, g.Args...)}
}

// Run boots the guest until it exits or ctx ends and returns QEMU's exit
// status, the guest's serial console (cleaned), how long it ran, and the
// error of the run.
func (g X86Guest) Run(ctx context.Context) (status int, console string, took time.Duration, err error) {
	r := g.QEMU().Run(ctx)
	return r.Status, r.Console, r.Took, r.Err
}

// QEMU is one run of a QEMU binary in namespace NS ("": this one) whose
// serial console is its standard output.
type QEMU struct {
	NS, Binary string
	Args       []string
	// StopAt ends the run once the console shows one of these, e.g. the
	// firmware giving up and starting its shell, so a failed boot fails in
	// seconds, not at ctx's deadline.
	StopAt []string
	// Marks are console strings whose first sight is timed (QEMURun.Seen).
	Marks []string
}

// QEMURun is what a QEMU run left.
type QEMURun struct {
	Status  int    // QEMU's exit status; -1 when it was killed or never ran
	Console string // the serial console, cleaned (CleanConsole)
	Took    time.Duration
	Err     error
	Stopped string                   // the StopAt string that ended the run, "" if none
	Seen    map[string]time.Duration // each of Marks seen: when, from the start
}

// Run runs QEMU until it exits, a StopAt string shows, or ctx ends.
func (q QEMU) Run(ctx context.Context) QEMURun {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := Command(ctx, q.NS, q.Binary, q.Args...)
	var serial SyncBuffer
	cmd.Stdout, cmd.Stderr = &serial, &serial
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	w := watchConsole(&serial, start, q, cancel)
	err := cmd.Run()
	r := QEMURun{Status: cmd.ProcessState.ExitCode(), Took: time.Since(start), Err: err}
	r.Stopped, r.Seen = w.end()
	r.Console = CleanConsole(serial.String())
	return r
}

// consoleWatch polls a console every 100 ms for QEMU's StopAt and Marks;
// only its goroutine touches stopped and seen until end returns.
type consoleWatch struct {
	console *SyncBuffer
	start   time.Time
	q       QEMU
	stop    func()
	done    chan struct{}
	ended   chan struct{}
	stopped string
	seen    map[string]time.Duration
}

func watchConsole(console *SyncBuffer, start time.Time, q QEMU, stop func()) *consoleWatch {
	w := &consoleWatch{console: console, start: start, q: q, stop: stop,
		done: make(chan struct{}), ended: make(chan struct{}), seen: map[string]time.Duration{}}
	go func() {
		defer close(w.ended)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			w.scan()
		}
	}()
	return w
}

// scan notes the marks the console shows now and stops the run at the
// first StopAt string.
func (w *consoleWatch) scan() {
	s := w.console.String()
	w.mark(s)
	for _, m := range w.q.StopAt {
		if w.stopped == "" && strings.Contains(s, m) {
			w.stopped = m
			w.stop()
		}
	}
}

// mark notes the first sight of each of the marks console shows.
func (w *consoleWatch) mark(console string) {
	for _, m := range w.q.Marks {
		if _, ok := w.seen[m]; !ok && strings.Contains(console, m) {
			w.seen[m] = time.Since(w.start)
		}
	}
}

// end stops the polling, notes the marks the run printed after its last
// poll, and returns the StopAt string that ended the run and the marks'
// times.
func (w *consoleWatch) end() (string, map[string]time.Duration) {
	close(w.done)
	<-w.ended
	w.mark(w.console.String())
	return w.stopped, w.seen
}
