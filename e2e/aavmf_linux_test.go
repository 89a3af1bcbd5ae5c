//go:build linux

package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// ARM64 UEFI guests: AAVMF (EDK2's ArmVirtQemu, Debian's qemu-efi-aarch64)
// on QEMU's virt board, booting over virtio-net with its own driver. The boot
// file is not iPXE but a tiny AArch64 EFI application that ends QEMU through
// Arm semihosting, so QEMU's exit status proves the firmware loaded and ran
// what pxeperf served.

const (
	aavmfCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	aavmfVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
	// arm64App is the one boot file configured for ARM64 (dhcp.boot_files.efi-arm64).
	arm64App = "exit-arm64.efi"
)

type aavmfBoot struct {
	name     string
	archCode int    // option 93 pxeperf must see
	proto    string // how the app is fetched: tftp or http
	banner   string // what AAVMF prints when it starts that boot option
	fwCfg    []string
}

var (
	aavmfPXE = aavmfBoot{name: "aavmf-pxe", archCode: 11, proto: "tftp", banner: "Start PXE over IPv4", fwCfg: []string{
		"name=opt/org.tianocore/IPv6PXESupport,string=n",
	}}
	// With IPv4 and IPv6 PXE off, the only boot option left on the NIC is
	// UEFI HTTP boot (IPv4). AAVMF takes these knobs from fw_cfg like OVMF
	// (ArmVirtQemu links OvmfPkg's PxeBcPcdProducerLib into UefiPxeBcDxe).
	aavmfHTTP = aavmfBoot{name: "aavmf-http", archCode: 19, proto: "http", banner: "Start HTTP Boot over IPv4", fwCfg: []string{
		"name=opt/org.tianocore/IPv4PXESupport,string=n",
		"name=opt/org.tianocore/IPv6PXESupport,string=n",
	}}
)

func TestAAVMFPXE(t *testing.T)      { bootAAVMF(t, aavmfPXE) }
func TestAAVMFHTTPBoot(t *testing.T) { bootAAVMF(t, aavmfHTTP) }

// semihostExit is AArch64 code that ends QEMU with exit status `status`:
// Arm semihosting SYS_EXIT (w0 = 0x18) with x1 pointing at the parameter
// block {ADP_Stopped_ApplicationExit, status} (QEMU needs
// -semihosting-config enable=on,target=native). Position independent: the
// block is built on the stack.
func semihostExit(status uint16) []byte {
	ins := []uint32{
		0xd28004c2,                     // mov  x2, #0x26
		0xf2a00042,                     // movk x2, #0x2, lsl #16   ADP_Stopped_ApplicationExit 0x20026
		0xd2800003 | uint32(status)<<5, // mov  x3, #status
		0xa9bf0fe2,                     // stp  x2, x3, [sp, #-16]!
		0x910003e1,                     // mov  x1, sp
		0x52800300,                     // mov  w0, #0x18            SYS_EXIT
		0xd45e0000,                     // hlt  #0xf000              semihosting call
		0x14000000,                     // b    .
	}
	b := make([]byte, 4*len(ins))
	for i, in := range ins {
		binary.LittleEndian.PutUint32(b[4*i:], in)
	}
	return b
}

// arm64ExitImage is an AArch64 EFI application that exits QEMU with status
// qemuStatus(guestOK), the same figure the x86 guests report.
func arm64ExitImage() []byte { return efiApp(0xaa64, semihostExit(uint16(qemuStatus(guestOK)))) }

func bootAAVMF(t *testing.T, b aavmfBoot) {
	if testing.Short() {
		t.Skip("AAVMF guests take minutes under TCG; skipped with -short")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "qemu-system-aarch64")
	for _, f := range []string{aavmfCode, aavmfVars} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("needs AAVMF (%s): apt-get install qemu-efi-aarch64 qemu-system-arm", f)
		}
	}
	p, _, tap := nstest.GuestLAN(t)
	vars := filepath.Join(t.TempDir(), "AAVMF_VARS.fd")
	if v, err := os.ReadFile(aavmfVars); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(vars, v, 0o644); err != nil {
		t.Fatal(err)
	}

	// One line configures ARM64: PXE (arch 11) and HTTP boot (arch 19) both
	// get it.
	dhcp := fullDHCP(p) + "\n  boot_files:\n    efi-arm64: " + arm64App
	hosts := fmt.Sprintf("  - mac: %s\n    name: arm64-guest\n    labels: {firmware: %s}\n", guestMAC, b.name)
	srv := serveGuestLAN(t, p, dhcp, hosts, func(root string) {
		if err := os.WriteFile(filepath.Join(root, arm64App), arm64ExitImage(), 0o644); err != nil {
			t.Fatal(err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := []string{"-M", "virt", "-cpu", "cortex-a57", "-accel", "tcg", "-m", "512",
		"-nographic", "-no-reboot",
		"-drive", "if=pflash,format=raw,readonly=on,file=" + aavmfCode,
		"-drive", "if=pflash,format=raw,file=" + vars,
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
		// AAVMF's own virtio-net driver, no option ROM; bootindex puts the NIC
		// first (fw_cfg bootorder), so no shell or menu comes before it.
		"-device", "virtio-net-pci,netdev=n0,romfile=,bootindex=0,mac=" + guestMAC,
		"-semihosting-config", "enable=on,target=native",
	}
	for _, c := range b.fwCfg {
		args = append(args, "-fw_cfg", c)
	}
	// Every boot option failed: AAVMF falls back to its shell and waits there.
	run := nstest.QEMU{NS: p.Client, Binary: "qemu-system-aarch64", Args: args, StopAt: []string{`"EFI Internal Shell"`}}.Run(ctx)
	status, console, log, err := run.Status, run.Console, srv.Out.String(), run.Err
	t.Logf("%s: QEMU exit status %d after %s", b.name, status, run.Took.Round(time.Second))
	if run.Stopped != "" {
		t.Logf("stopped QEMU: the console shows %s", run.Stopped)
	}
	logBootLines(t, log)
	if status != qemuStatus(guestOK) {
		t.Fatalf("%s: the ARM64 app did not run (QEMU status %d, want %d from semihosting; err %v)\nguest console (tail):\n%s\npxeperf log (tail):\n%s",
			b.name, status, qemuStatus(guestOK), err, nstest.Tail(console, 40), nstest.Tail(log, 40))
	}
	// The firmware took the boot path under test (AAVMF tries HTTP boot
	// after PXE, and that would work too).
	if !strings.Contains(console, b.banner) {
		t.Errorf("guest console lacks %q:\n%s", b.banner, nstest.Tail(console, 30))
	}
	if b.proto == "tftp" && strings.Contains(console, "HTTP Boot") {
		t.Errorf("the app came through HTTP boot, not PXE:\n%s", nstest.Tail(console, 30))
	}
	checkLease(t, log, guestMAC, b.archCode)
	fetch := fmt.Sprintf(`msg=fetch proto=%s .*file=/?%s bytes=%d .*outcome=ok client_mac=%s host=arm64-guest`,
		b.proto, regexp.QuoteMeta(arm64App), len(arm64ExitImage()), guestMAC)
	if !regexp.MustCompile(fetch).MatchString(log) {
		t.Errorf("pxeperf log has no complete %s fetch of %s put on the guest (want %q):\n%s", b.proto, arm64App, fetch, nstest.Tail(log, 30))
	}
}
