//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
)

// default_boot local and shell in the firmware's own hands, against the
// built binary: SeaBIOS with Debian's iPXE ROM and a second boot device (a
// raw disk whose boot sector prints a marker), U-Boot arm64's distro boot,
// and OVMF with iPXE. Each guest is bounded to a couple of minutes under
// TCG and stopped as soon as its console shows the outcome.

// localDiskMarker is what the test disk's boot sector prints on the serial
// port before it ends QEMU with nstest.GuestOK.
const localDiskMarker = "PXEPERF-LOCAL-DISK-OK"

// bootSector is a 512-byte MBR boot sector: real-mode code at 0:7C00 that
// writes localDiskMarker to COM1 (port 0x3f8, QEMU's serial needs no set-up)
// and then nstest.GuestOK to isa-debug-exit.
func bootSector() []byte {
	const msgAt = 27 // offset of the message in the sector
	code := []byte{
		0x31, 0xc0, // xor ax,ax
		0x8e, 0xd8, // mov ds,ax
		0xbe, msgAt, 0x7c, // mov si,0x7c00+msgAt
		0xba, 0xf8, 0x03, // mov dx,0x3f8
		0xfc,       // cld
		0xac,       // loop: lodsb
		0x84, 0xc0, // test al,al
		0x74, 0x03, // jz done
		0xee,       // out dx,al
		0xeb, 0xf8, // jmp loop
	}
	code = append(code, nstest.ExitCode(nstest.GuestOK)...) // done: offset 19
	if len(code) != msgAt {
		panic(fmt.Sprintf("boot sector code is %d bytes, message offset %d", len(code), msgAt))
	}
	b := make([]byte, 512)
	copy(b, code)
	copy(b[msgAt:], "\r\n"+localDiskMarker+"\r\n\x00")
	b[510], b[511] = 0x55, 0xaa
	return b
}

// writeDisk writes a 1 MiB raw disk image whose first sector is bootSector.
func writeDisk(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.img")
	img := make([]byte, 1<<20)
	copy(img, bootSector())
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// localGuest is one host entry of the local/shell tests and what its
// console must show.
type localGuest struct {
	mac, name, mode string
}

func (g localGuest) hostYAML() string {
	return fmt.Sprintf("  - mac: %s\n    name: %s\n    default_boot: %s\n", g.mac, g.name, g.mode)
}

// TestLocalBootSeaBIOS: SeaBIOS boots the network first (iPXE ROM), then
// the disk. default_boot local: pxeperf's built-in script sanboots drive
// 0x80 and the disk's boot sector runs; shell: iPXE's prompt, the disk
// untouched.
func TestLocalBootSeaBIOS(t *testing.T) {
	requireX86Guest(t, "/usr/lib/ipxe/qemu/efi-e1000.rom", "ipxe-qemu")
	local := localGuest{"52:54:00:e2:1b:01", "lb-local", "local"}
	shell := localGuest{"52:54:00:e2:1b:02", "lb-shell", "shell"}
	p, _, tap := nstest.GuestLAN(t)
	srv := serveGuestLAN(t, p, fullDHCP(p), local.hostYAML()+shell.hostYAML(), nil)
	disk := writeDisk(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sendRouterAdverts(t, ctx, p.Server, p.ServerIf)

	run := func(g localGuest, disk string, stopAt ...string) nstest.QEMURun {
		args := []string{
			"-accel", "tcg", "-m", "256", "-nographic", "-no-reboot", "-boot", "order=nc",
			"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
			"-device", "e1000,netdev=n0,mac=" + g.mac,
			"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"}
		if disk != "" {
			args = append(args, "-drive", "file="+disk+",format=raw,if=ide,snapshot=on")
		}
		q := nstest.QEMU{NS: p.Client, Binary: "qemu-system-x86_64", StopAt: stopAt, Args: args}
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Minute)
		defer gcancel()
		r := q.Run(gctx)
		t.Logf("%s: QEMU status %d after %s, stopped at %q", g.name, r.Status, r.Took.Round(time.Second), r.Stopped)
		return r
	}
	fail := func(g localGuest, r nstest.QEMURun, format string, a ...any) {
		t.Helper()
		t.Errorf("%s: %s\nguest console (tail):\n%s\npxeperf log (tail):\n%s", g.name, fmt.Sprintf(format, a...),
			nstest.Tail(r.Console, 30), nstest.Tail(srv.Out.String(), 20))
	}

	t.Run("local", func(t *testing.T) {
		r := run(local, disk)
		if r.Status != nstest.QEMUStatus(nstest.GuestOK) {
			fail(local, r, "QEMU status %d, want %d (the disk's boot sector did not run)", r.Status, nstest.QEMUStatus(nstest.GuestOK))
		}
		inOrder(t, r.Console, "pxeperf: lb-local "+local.mac+" boots from its local disk (default_boot: local)", localDiskMarker)
		checkScriptFetch(t, srv.Out.String(), local.mac)
	})
	// Without a disk sanboot fails and iPXE exits to the BIOS, which has
	// no other device left to boot.
	t.Run("local without a disk", func(t *testing.T) {
		const noBoot = "No bootable device"
		r := run(local, "", noBoot)
		if r.Stopped != noBoot {
			fail(local, r, "SeaBIOS did not go on to %q after iPXE (QEMU status %d)", noBoot, r.Status)
		}
		inOrder(t, r.Console, "boots from its local disk (default_boot: local)",
			"pxeperf: no boot sector on drive 0x80, exiting to the BIOS for its next boot device", noBoot)
	})
	t.Run("shell", func(t *testing.T) {
		r := run(shell, disk, "iPXE>")
		if r.Stopped != "iPXE>" {
			fail(shell, r, "no iPXE> prompt (QEMU status %d)", r.Status)
		}
		inOrder(t, r.Console, "pxeperf: lb-shell "+shell.mac+" stops at the iPXE shell for a person (default_boot: shell)", "iPXE>")
		if strings.Contains(r.Console, localDiskMarker) {
			t.Errorf("shell booted the disk:\n%s", nstest.Tail(r.Console, 20))
		}
		checkScriptFetch(t, srv.Out.String(), shell.mac)
	})
}

// requireX86Guest skips t under -short, without root or QEMU, or without
// one of files, given as path and package pairs ("/usr/share/OVMF/...",
// "ovmf").
func requireX86Guest(t *testing.T, files ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("QEMU guests take a minute each; skipped with -short")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "qemu-system-x86_64")
	for i := 0; i+1 < len(files); i += 2 {
		if _, err := os.Stat(files[i]); err != nil {
			t.Skipf("needs %s: apt-get install %s", files[i], files[i+1])
		}
	}
}

// inOrder fails t unless console shows each of want, in order. Spaces and
// line breaks are left out of the search: iPXE wraps its lines at 80
// columns, GRUB at a space near 100.
func inOrder(t *testing.T, console string, want ...string) {
	t.Helper()
	squeeze := strings.NewReplacer(" ", "", "\n", "")
	rest := squeeze.Replace(console)
	for _, w := range want {
		w := squeeze.Replace(w)
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("console lacks %q (in order %q):\n%s", w, want, nstest.Tail(console, 30))
			return
		}
		rest = rest[i+len(w):]
	}
}

// checkScriptFetch fails t unless pxeperf logged a complete fetch of
// boot.ipxe put on mac: the script came from pxeperf, not from a root file.
func checkScriptFetch(t *testing.T, log, mac string) {
	t.Helper()
	re := regexp.MustCompile(`msg=fetch proto=http .*file=/?boot\.ipxe .*outcome=ok .*client_mac=` + regexp.QuoteMeta(mac))
	if !re.MatchString(log) {
		t.Errorf("pxeperf logged no fetch of boot.ipxe by %s:\n%s", mac, nstest.Tail(log, 20))
	}
}

// arm64Board is U-Boot's qemu_arm64 board for a guest test; it skips t
// under -short (a TCG guest takes a minute), without root, or without the
// board's files.
func arm64Board(t *testing.T) uboot.Board {
	t.Helper()
	if testing.Short() {
		t.Skip("U-Boot guests under TCG take a minute each; skipped with -short")
	}
	nstest.RequireRoot(t)
	b, _ := uboot.BoardNamed("arm64")
	b.Require(t)
	return b
}

// ubootNextMarker is what the stand-in for the board's next boot target
// (bootcmd_pxeperfnext, after dhcp in boot_targets) prints when it runs.
const ubootNextMarker = "PXEPERF-NEXT-TARGET"

// TestLocalBootUBoot: U-Boot arm64 (qemu_arm64 2023.01) runs distro boot
// with boot_targets "dhcp pxeperfnext", where bootcmd_pxeperfnext stands
// for the board's disk (it echoes ubootNextMarker). The boot script pxeperf
// generates for default_boot local ends, so distro boot goes on to the next
// target; with local_boot it runs that target itself first; for shell the
// next target is skipped and U-Boot is back at its prompt.
func TestLocalBootUBoot(t *testing.T) {
	b := arm64Board(t)
	guests := []struct {
		localGuest
		localBoot string
		want      []string // console lines after `run distro_bootcmd`, in order
		wantNot   string
	}{
		{localGuest{"52:54:00:e2:1c:01", "ub-local", "local"}, "", []string{
			"pxeperf: ub-local (52:54:00:e2:1c:01 ", "boots from its local disk (default_boot: local)",
			"pxeperf: distro boot goes on with its next target", ubootNextMarker}, ""},
		{localGuest{"52:54:00:e2:1c:02", "ub-target", "local"}, "pxeperfnext", []string{
			"boots from its local disk (default_boot: local)", "pxeperf: running bootcmd_pxeperfnext (local_boot)",
			ubootNextMarker, "pxeperf: bootcmd_pxeperfnext returned", ubootNextMarker}, ""},
		{localGuest{"52:54:00:e2:1c:03", "ub-shell", "shell"}, "", []string{
			"pxeperf: ub-shell (52:54:00:e2:1c:03 ", "stops at the U-Boot prompt for a person (default_boot: shell)",
			"pxeperf: default_boot shell skips boot target pxeperfnext"}, ubootNextMarker},
	}
	var hosts string
	for _, g := range guests {
		hosts += g.hostYAML()
		if g.localBoot != "" {
			hosts += "    local_boot: " + g.localBoot + "\n"
		}
	}
	p, _, tap := nstest.GuestLAN(t)
	srv := serveGuestLAN(t, p, fullDHCP(p), hosts, nil)
	for _, g := range guests {
		t.Run(g.name, func(t *testing.T) {
			gb := b
			gb.MAC = g.mac
			c := uboot.Boot(t, gb, g.name, p.Client, tap, srv.Out.String)
			c.StopAutoboot(90 * time.Second)
			c.Env(gb, "setenv bootcmd_pxeperfnext echo "+ubootNextMarker, "setenv boot_targets dhcp pxeperfnext")
			if out := c.Run("printenv bootcmd_dhcp", 10*time.Second); !strings.HasPrefix(strings.TrimSpace(out), "bootcmd_dhcp=") {
				t.Skipf("this U-Boot build has no bootcmd_dhcp: %s", out)
			}
			t0 := time.Now()
			out := c.Run("run distro_bootcmd", 2*time.Minute)
			t.Logf("%s: distro boot back at the prompt after %s", g.name, time.Since(t0).Round(time.Second))
			_, script, ok := strings.Cut(out, "## Executing script")
			if !ok {
				c.Fatalf("distro boot did not source pxeperf's boot.scr.uimg")
			}
			inOrder(t, script, g.want...)
			if g.wantNot != "" && strings.Contains(script, g.wantNot) {
				t.Errorf("console shows %q:\n%s", g.wantNot, nstest.Tail(script, 30))
			}
			ubootPXELocal(t, c, g.localGuest)
			c.Stop()
		})
	}
	if !regexp.MustCompile(`msg=fetch proto=tftp .*file=/?boot\.scr\.uimg .*outcome=ok .*client_mac=52:54:00:e2:1c:03`).MatchString(srv.Out.String()) {
		t.Errorf("pxeperf logged no fetch of boot.scr.uimg by ub-shell:\n%s", nstest.Tail(srv.Out.String(), 20))
	}
}

// ubootPXELocal runs `pxe get` and `pxe boot` of the pxelinux config
// pxeperf generates for g: for local, its `localboot 0` label runs the
// board's ${localcmd}; for shell, with no label, pxe boot returns.
func ubootPXELocal(t *testing.T, c *uboot.Console, g localGuest) {
	t.Helper()
	const localcmd = "PXEPERF-LOCALCMD"
	c.Run("setenv localcmd echo "+localcmd, 10*time.Second)
	if out := c.Run("pxe get", time.Minute); !strings.Contains(out, "Retrieving file: "+ubootPXEConfig(g.mac)) {
		c.Fatalf("pxe get did not load %s:\n%s", ubootPXEConfig(g.mac), out)
	}
	out := c.Run("pxe boot", time.Minute)
	t.Logf("%s: pxe boot:\n%s", g.name, out)
	switch g.mode {
	case "local":
		inOrder(t, out, "pxeperf-local", localcmd)
	case "shell":
		if strings.Contains(out, localcmd) {
			t.Errorf("pxe boot of the shell config ran localcmd:\n%s", out)
		}
	}
}

// TestLocalBootOVMF: OVMF network-boots iPXE (ipxe.efi over TFTP), whose
// built-in script for default_boot local skips sanboot (not a BIOS) and
// runs `exit 1`: iPXE leaves the script as a failed boot ("No more network
// devices") instead of stopping at its shell. What OVMF does next is not
// checked: with Debian's iPXE 1.0.0+git-20190125 its console shows nothing
// more within minutes (httpboot/DESIGN.md, "Local boot").
func TestLocalBootOVMF(t *testing.T) {
	requireX86Guest(t, ovmfCode, "ovmf", "/usr/lib/ipxe/ipxe.efi", "ipxe")
	g := localGuest{guestMAC, "lb-uefi", "local"}
	p, _, tap := nstest.GuestLAN(t)
	srv := serveGuestLAN(t, p, fullDHCP(p), g.hostYAML(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sendRouterAdverts(t, ctx, p.Server, p.ServerIf)
	args := append(ovmfArgs(t.TempDir()), "-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	q := nstest.X86Guest{NS: p.Client, Tap: tap, Memory: "512", Args: args}.QEMU()
	const left = "No more network devices"
	q.StopAt = []string{left, "iPXE>"}
	r := q.Run(ctx)
	t.Logf("%s: QEMU status %d after %s, stopped at %q", g.name, r.Status, r.Took.Round(time.Second), r.Stopped)
	if r.Stopped != left {
		t.Errorf("iPXE did not leave the script (stopped at %q)\nguest console (tail):\n%s\npxeperf log (tail):\n%s",
			r.Stopped, nstest.Tail(r.Console, 30), nstest.Tail(srv.Out.String(), 20))
	}
	inOrder(t, r.Console, "pxeperf: lb-uefi "+guestMAC+" boots from its local disk (default_boot: local)", left)
	if strings.Contains(r.Console, "sanboot") || strings.Contains(r.Console, "SAN device") {
		t.Errorf("the script tried sanboot under UEFI:\n%s", nstest.Tail(r.Console, 20))
	}
	checkScriptFetch(t, srv.Out.String(), guestMAC)
}

// syslinux's BIOS pxelinux and the module it loads first, from Debian's
// pxelinux and syslinux-common.
const (
	pxelinuxBin = "/usr/lib/PXELINUX/pxelinux.0"
	ldlinuxC32  = "/usr/lib/syslinux/modules/bios/ldlinux.c32"
)

// TestLocalBootPXELinux: SeaBIOS's iPXE ROM chains syslinux's pxelinux.0
// (the host's script, with option 210 as the path prefix: pxeperf hands
// iPXE its script URL, whose folder pxelinux would use otherwise), which
// reads the pxelinux.cfg/01-MAC pxeperf generates. local: `localboot 0`
// hands the boot back through iPXE and SeaBIOS boots the disk's boot
// sector; shell: pxelinux waits at its boot: prompt.
func TestLocalBootPXELinux(t *testing.T) {
	requireX86Guest(t, "/usr/lib/ipxe/qemu/efi-e1000.rom", "ipxe-qemu", pxelinuxBin, "pxelinux", ldlinuxC32, "syslinux-common")
	local := localGuest{"52:54:00:e2:1d:01", "px-local", "local"}
	shell := localGuest{"52:54:00:e2:1d:02", "px-shell", "shell"}
	var hosts string
	for _, g := range []localGuest{local, shell} {
		hosts += g.hostYAML() + "    script: |\n      #!ipxe\n      set 210:string tftp://${next-server}/\n      chain tftp://${next-server}/pxelinux.0\n"
	}
	p, _, tap := nstest.GuestLAN(t)
	srv := serveGuestLAN(t, p, fullDHCP(p), hosts, func(root string) {
		for _, f := range []string{pxelinuxBin, ldlinuxC32} {
			b, err := os.ReadFile(f)
			if err == nil {
				err = os.WriteFile(filepath.Join(root, filepath.Base(f)), b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	disk := writeDisk(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sendRouterAdverts(t, ctx, p.Server, p.ServerIf)
	run := func(g localGuest, stopAt ...string) nstest.QEMURun {
		stopAt = append(stopAt, "Boot failed")
		q := nstest.QEMU{NS: p.Client, Binary: "qemu-system-x86_64", StopAt: stopAt, Args: []string{
			"-accel", "tcg", "-m", "256", "-nographic", "-no-reboot", "-boot", "order=nc",
			"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
			"-device", "e1000,netdev=n0,mac=" + g.mac,
			"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
			"-drive", "file=" + disk + ",format=raw,if=ide,snapshot=on"}}
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Minute)
		defer gcancel()
		r := q.Run(gctx)
		t.Logf("%s: QEMU status %d after %s, stopped at %q", g.name, r.Status, r.Took.Round(time.Second), r.Stopped)
		return r
	}
	t.Run("local", func(t *testing.T) {
		r := run(local)
		if r.Status != nstest.QEMUStatus(nstest.GuestOK) {
			t.Errorf("QEMU status %d, want %d (the disk's boot sector did not run)\npxeperf log (tail):\n%s",
				r.Status, nstest.QEMUStatus(nstest.GuestOK), nstest.Tail(srv.Out.String(), 20))
		}
		inOrder(t, r.Console, "pxeperf: px-local (52:54:00:e2:1d:01 ", "boots from its local disk (default_boot: local)", localDiskMarker)
	})
	t.Run("shell", func(t *testing.T) {
		// The say line leaves "boot: " out, so the prompt is the first.
		r := run(shell, "boot: ")
		if r.Stopped != "boot: " {
			t.Errorf("no boot: prompt (QEMU status %d)", r.Status)
		}
		inOrder(t, r.Console, "waits at the pxelinux prompt for a person (default_boot shell)", "boot: ")
		if strings.Contains(r.Console, localDiskMarker) {
			t.Errorf("shell booted the disk")
		}
	})
}

// grubNetEFI is Debian's monolithic network GRUB for UEFI x64
// (grub-efi-amd64-bin).
const grubNetEFI = "/usr/lib/grub/x86_64-efi/monolithic/grubnetx64.efi"

// TestLocalBootGRUB: OVMF network-boots GRUB (grubnetx64.efi as the host's
// boot_file), which reads the grub.cfg-01-MAC pxeperf generates for
// default_boot local. With a disk holding \EFI\BOOT\BOOTX64.EFI (QEMU's
// vvfat view of a folder; the loader is e2e's exit image) GRUB chainloads
// it; without one GRUB exits, and OVMF, given success, starts its boot
// manager menu (UiApp) rather than another boot option.
func TestLocalBootGRUB(t *testing.T) {
	requireX86Guest(t, ovmfCode, "ovmf", grubNetEFI, "grub-efi-amd64-bin")
	g := localGuest{guestMAC, "gr-local", "local"}
	p, _, tap := nstest.GuestLAN(t)
	srv := serveGuestLAN(t, p, fullDHCP(p), g.hostYAML()+"    boot_file: grubnetx64.efi\n", func(root string) {
		b, err := os.ReadFile(grubNetEFI)
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "grubnetx64.efi"), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	esp := filepath.Join(t.TempDir(), "esp")
	if err := os.MkdirAll(filepath.Join(esp, "EFI", "BOOT"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(esp, "EFI", "BOOT", "BOOTX64.EFI"), efiExitImage(guestOK), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(disk bool, stopAt ...string) nstest.QEMURun {
		args := ovmfArgs(t.TempDir())
		// The NIC first in the boot order, the disk after it.
		args[len(args)-1] += ",bootindex=1"
		args = append(args, "-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
		if disk {
			args = append(args, "-drive", "if=none,id=esp,format=raw,snapshot=on,file=fat:"+esp,
				"-device", "ide-hd,drive=esp,bootindex=2")
		}
		q := nstest.X86Guest{NS: p.Client, Tap: tap, Memory: "512", Args: args}.QEMU()
		q.StopAt = stopAt
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r := q.Run(ctx)
		t.Logf("%s (disk %v): QEMU status %d after %s, stopped at %q", g.name, disk, r.Status, r.Took.Round(time.Second), r.Stopped)
		return r
	}
	t.Run("disk", func(t *testing.T) {
		r := run(true)
		if r.Status != nstest.QEMUStatus(guestOK) {
			t.Errorf("QEMU status %d, want %d (GRUB did not chainload the disk's loader)\n%s\npxeperf log (tail):\n%s",
				r.Status, nstest.QEMUStatus(guestOK), nstest.Tail(r.Console, 30), nstest.Tail(srv.Out.String(), 15))
		}
		inOrder(t, r.Console, "pxeperf: gr-local (52:54:00:e2:e2:01 ", "boots from its local disk (default_boot: local)",
			"pxeperf: chainloading (", ")/EFI/BOOT/BOOTX64.EFI")
	})
	t.Run("no disk", func(t *testing.T) {
		const menu = `Boot0000 "UiApp"`
		r := run(false, menu)
		if r.Stopped != menu {
			t.Errorf("OVMF did not go on after GRUB's exit (stopped at %q)\n%s", r.Stopped, nstest.Tail(r.Console, 30))
		}
		inOrder(t, r.Console, "boots from its local disk (default_boot: local)", "pxeperf: GRUB exits to the firmware", menu)
	})
	if !regexp.MustCompile(`msg=fetch proto=tftp .*file=/?grub/grub\.cfg.* outcome=ok .*client_mac=` + guestMAC).MatchString(srv.Out.String()) {
		t.Errorf("pxeperf logged no generated GRUB config fetch:\n%s", nstest.Tail(srv.Out.String(), 15))
	}
}
