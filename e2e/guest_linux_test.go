//go:build linux

package e2e

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// The exit codes a guest reports through QEMU's isa-debug-exit device
// (nstest.GuestOK, GuestFail).
const (
	guestOK   = nstest.GuestOK
	guestFail = nstest.GuestFail
)

func qemuStatus(v byte) int { return nstest.QEMUStatus(v) }

func exitCode(v byte) []byte { return nstest.ExitCode(v) }

// pxeExitImage is a raw PXE image (loaded at 0:7c00, run in real mode).
func pxeExitImage(v byte) []byte { return exitCode(v) }

// efiExitImage is a minimal PE32+ EFI application (x86-64) whose entry point
// runs exitCode(v).
func efiExitImage(v byte) []byte { return efiApp(0x8664, exitCode(v)) }

// efiApp is a minimal PE32+ EFI application for a machine type (0x8664
// x86-64, 0xaa64 AArch64): one 4 KiB-aligned .text section holding code (at
// most 512 bytes, position independent: there are no relocations), entered at
// its first byte.
func efiApp(machine uint16, code []byte) []byte {
	b := make([]byte, 0x400)
	le := binary.LittleEndian
	copy(b, "MZ")
	le.PutUint32(b[0x3c:], 0x40) // e_lfanew
	copy(b[0x40:], "PE\x00\x00")
	coff := b[0x44:]
	le.PutUint16(coff[0:], machine)
	le.PutUint16(coff[2:], 1)    // one section
	le.PutUint16(coff[16:], 240) // SizeOfOptionalHeader (PE32+, 16 dirs)
	le.PutUint16(coff[18:], 0x0022)
	opt := b[0x58:]
	le.PutUint16(opt[0:], 0x20b)       // PE32+
	le.PutUint32(opt[4:], 0x200)       // SizeOfCode
	le.PutUint32(opt[16:], 0x1000)     // AddressOfEntryPoint
	le.PutUint32(opt[20:], 0x1000)     // BaseOfCode
	le.PutUint64(opt[24:], 0x10000000) // ImageBase
	le.PutUint32(opt[32:], 0x1000)     // SectionAlignment
	le.PutUint32(opt[36:], 0x200)      // FileAlignment
	le.PutUint32(opt[56:], 0x2000)     // SizeOfImage
	le.PutUint32(opt[60:], 0x200)      // SizeOfHeaders
	le.PutUint16(opt[68:], 10)         // EFI application
	le.PutUint64(opt[72:], 0x10000)    // stack reserve
	le.PutUint64(opt[80:], 0x10000)    // stack commit
	le.PutUint64(opt[88:], 0x10000)    // heap reserve
	le.PutUint64(opt[96:], 0x1000)     // heap commit
	le.PutUint32(opt[108:], 16)        // NumberOfRvaAndSizes
	sec := b[0x58+240:]
	copy(sec, ".text")
	le.PutUint32(sec[8:], 0x200)       // VirtualSize
	le.PutUint32(sec[12:], 0x1000)     // VirtualAddress
	le.PutUint32(sec[16:], 0x200)      // SizeOfRawData
	le.PutUint32(sec[20:], 0x200)      // PointerToRawData
	le.PutUint32(sec[36:], 0x60000020) // code, execute, read
	if len(code) > 0x200 {
		panic("efiApp: code larger than its section")
	}
	copy(b[0x200:], code)
	return b
}

// guestScript is the iPXE script every guest runs: fetch the image, then
// chain the exit image for its platform. A failed fetch exits with guestFail.
const guestScript = `#!ipxe
echo pxeperf-e2e: ${net0/mac} ${net0/ip} platform ${platform} arch {{.Arch}}
imgfetch {{.ImageURL}}/img64 || goto fail
echo PXEPERF-IMGFETCH-OK
iseq ${platform} efi && chain {{.ImageURL}}/exit-ok.efi || chain {{.ImageURL}}/exit-ok.0
:fail
echo PXEPERF-IMGFETCH-FAIL
iseq ${platform} efi && chain {{.ImageURL}}/exit-fail.efi || chain {{.ImageURL}}/exit-fail.0
`

func writeExitImages(t *testing.T, root string) {
	t.Helper()
	for name, b := range map[string][]byte{
		"exit-ok.0": pxeExitImage(guestOK), "exit-fail.0": pxeExitImage(guestFail),
		"exit-ok.efi": efiExitImage(guestOK), "exit-fail.efi": efiExitImage(guestFail),
	} {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sendRouterAdverts sends an IPv6 router advertisement (no prefix, lifetime
// 0) every 500 ms from inside namespace ns on iface until ctx ends. iPXE
// waits ~15 s for IPv6 autoconfiguration on a link without one.
func sendRouterAdverts(t *testing.T, ctx context.Context, ns, iface string) {
	t.Helper()
	var pc *ipv6.PacketConn
	var c net.PacketConn
	ifi := &net.Interface{}
	err := nstest.Do(ns, func() error {
		var err error
		ifi, err = net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		c, err = net.ListenPacket("ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		pc = ipv6.NewPacketConn(c)
		if err := pc.SetMulticastHopLimit(255); err != nil {
			return err
		}
		return pc.SetMulticastInterface(ifi)
	})
	if err != nil {
		t.Logf("no router advertisements (iPXE will wait ~15 s for IPv6): %v", err)
		return
	}
	msg := icmp.Message{Type: ipv6.ICMPTypeRouterAdvertisement, Body: &icmp.RawBody{
		// cur hop limit 64, no M/O flags, router lifetime 0, reachable 0, retrans 0
		Data: []byte{64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	}}
	b, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
	if err != nil {
		t.Fatal(err)
	}
	dst := &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: iface}
	go func() {
		defer c.Close()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 2000; i++ { // bounded: 1000 s at most
			_, _ = pc.WriteTo(b, nil, dst)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}
