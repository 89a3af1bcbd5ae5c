//go:build linux

// Package uboot runs Debian's U-Boot builds for QEMU (u-boot-qemu 2023.01)
// under TCG on a test LAN (nstest.GuestLAN), or on QEMU's own user network,
// and drives their serial console: the board table (QEMU machine, NIC,
// what each build sends in DHCP), a Console that types one command at a
// time and waits for the prompt, and the tftpboot and crc32 steps with
// their checks. e2e's TestUBoot (boots, configs, crafted kernels),
// bench/peers's U-Boot lab (the lock-step row of bench/peers
// TestPeers) and bootcfg's TestUBootQEMU (the built-in boot script in
// U-Boot's own hands) share it.
package uboot

import (
	"os"
	"os/exec"
	"testing"
)

// Board is one U-Boot build and the QEMU machine it runs on.
type Board struct {
	Name     string // arm64, arm, x86_64, riscv64
	QEMU     string // QEMU binary
	QEMUPkg  string // Debian package with that binary
	Firmware string // U-Boot image, from u-boot-qemu
	MAC      string
	// Machine is the QEMU machine, CPU and firmware arguments.
	Machine []string
	// NIC is the QEMU network device. U-Boot 2023.01 reads the MAC of a
	// virtio-net-pci device as 52:52:52:52:52:52 (so DHCP carries the wrong
	// chaddr and no host entry matches); e1000 and virtio-mmio read it
	// right. U-Boot's virtio-net hangs at TFTP windowsize >= 32.
	NIC    string
	Ethact string // U-Boot's name for that device
	// ExitArgs let a guest kernel end QEMU with a status.
	ExitArgs []string
	Arch93   int    // option 93 the build sends, -1 for none
	Vendor   string // option 60 it sends (CONFIG_BOOTP_VCI_STRING)
	Cmdline  string // kernel console for this machine
	// Env is set after the prompt, for variables a build lacks.
	Env []string
}

// Boards is the table of Debian's QEMU builds, arm64 first.
func Boards() []Board {
	return []Board{
		armVirt("arm64", "qemu-system-aarch64", "cortex-a57", "52:54:00:e2:b0:01", 22, "U-Boot.armv8"),
		armVirt("arm", "qemu-system-arm", "cortex-a15", "52:54:00:e2:b0:02", 21, "U-Boot.armv7"),
		{
			Name: "x86_64", QEMU: "qemu-system-x86_64", QEMUPkg: "qemu-system-x86",
			Firmware: "/usr/lib/u-boot/qemu-x86_64/u-boot.rom", MAC: "52:54:00:e2:b0:03",
			Machine: []string{"-M", "pc"},
			NIC:     "e1000", Ethact: "e1000#0",
			ExitArgs: []string{"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"},
			Arch93:   -1, Vendor: "U-Boot", Cmdline: "console=ttyS0",
			// The x86 build has no pxefile_addr_r, which `pxe get` needs; above
			// scriptaddr (0x7000000), clear of loadaddr + 64 MiB.
			Env: []string{"setenv pxefile_addr_r 0x7800000"},
		},
		{
			Name: "riscv64", QEMU: "qemu-system-riscv64", QEMUPkg: "qemu-system-misc",
			Firmware: "/usr/lib/u-boot/qemu-riscv64/u-boot.bin", MAC: "52:54:00:e2:b0:04",
			Machine: []string{"-M", "virt"},
			// The riscv64 build has no e1000 driver; virtio-mmio gets the MAC right.
			NIC: "virtio-net-device", Ethact: "virtio-net#0",
			Arch93: -1, Vendor: "U-Boot", Cmdline: "console=ttyS0",
		},
	}
}

// armVirt is an Arm build on QEMU's virt board (qemu-system-arm's
// package has both QEMUs): e1000, the console on the PL011, and Arm
// semihosting for the crafted kernel's exit.
func armVirt(name, qemu, cpu, mac string, arch93 int, vendor string) Board {
	return Board{
		Name: name, QEMU: qemu, QEMUPkg: "qemu-system-arm",
		Firmware: "/usr/lib/u-boot/qemu_" + name + "/u-boot.bin", MAC: mac,
		Machine: []string{"-M", "virt", "-cpu", cpu},
		NIC:     "e1000", Ethact: "e1000#0",
		ExitArgs: []string{"-semihosting-config", "enable=on,target=native"},
		Arch93:   arch93, Vendor: vendor, Cmdline: "console=ttyAMA0",
	}
}

// BoardNamed is the board called name; ok is false for none.
func BoardNamed(name string) (b Board, ok bool) {
	for _, b := range Boards() {
		if b.Name == name {
			return b, true
		}
	}
	return Board{}, false
}

// Require skips the test when the board's QEMU or firmware is missing.
func (b Board) Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(b.QEMU); err != nil {
		t.Skipf("needs %s: apt-get install %s", b.QEMU, b.QEMUPkg)
	}
	if _, err := os.Stat(b.Firmware); err != nil {
		t.Skipf("needs %s: apt-get install u-boot-qemu", b.Firmware)
	}
}

// QEMUArgs are the arguments that run the board under TCG (not KVM: the
// figures must not depend on the host having it), its serial port on
// stdio, its NIC on tap.
func (b Board) QEMUArgs(tap string) []string {
	return b.qemuArgs("tap,id=n0,ifname=" + tap + ",script=no,downscript=no")
}

// QEMUArgsUserNet are QEMUArgs with QEMU's own user network in place of a
// tap: its DHCP server hands out 10.0.2.15 with 10.0.2.2 as the TFTP
// server, which serves tftpRoot (a path without commas). The guest is
// restricted to those: it reaches neither the host nor anything beyond,
// and no root is needed. For tests of what U-Boot does with a file, not of
// pxeperf's servers.
func (b Board) QEMUArgsUserNet(tftpRoot string) []string {
	return b.qemuArgs("user,id=n0,restrict=on,tftp=" + tftpRoot)
}

func (b Board) qemuArgs(netdev string) []string {
	args := append([]string{"-accel", "tcg", "-m", "512", "-no-reboot",
		"-display", "none", "-serial", "stdio", "-monitor", "none",
		"-bios", b.Firmware,
		"-netdev", netdev,
		"-device", b.NIC + ",netdev=n0,mac=" + b.MAC}, b.Machine...)
	return append(args, b.ExitArgs...)
}
