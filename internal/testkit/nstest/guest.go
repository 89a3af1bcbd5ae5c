//go:build linux

package nstest

import (
	"context"
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

// Run boots the guest until it exits or ctx ends and returns QEMU's exit
// status, the guest's serial console (cleaned), how long it ran, and the
// error of the run.
func (g X86Guest) Run(ctx context.Context) (status int, console string, took time.Duration, err error) {
	args := []string{"-accel", "tcg", "-m", g.Memory, "-nographic", "-no-reboot", "-boot", "n",
		"-netdev", "tap,id=n0,ifname=" + g.Tap + ",script=no,downscript=no",
		"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"}
	cmd := Command(ctx, g.NS, "qemu-system-x86_64", append(args, g.Args...)...)
	var serial SyncBuffer
	cmd.Stdout, cmd.Stderr = &serial, &serial
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	return cmd.ProcessState.ExitCode(), CleanConsole(serial.String()), time.Since(start), err
}
