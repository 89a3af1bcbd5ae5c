//go:build linux

package e2e

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// The crafted kernels below are the smallest files U-Boot 2023.01 accepts as
// a Linux kernel for each architecture (the header checks are in
// arch/arm/lib/image.c and arch/riscv/lib/image.c for booti,
// arch/arm/lib/zimage.c for bootz, arch/x86/lib/zimage.c for zboot). Their
// code ends QEMU with ubootKernelStatus, so the QEMU exit status proves that
// U-Boot really jumped into the kernel pxeperf served.

// ubootKernelStatus is the QEMU exit status every crafted kernel ends with,
// the same on each arch: x86 writes guestOK to isa-debug-exit (QEMU exits
// with guestOK<<1|1), the others report that number directly.
const ubootKernelStatus = guestOK<<1 | 1 // 85

var le = binary.LittleEndian

func putWords(b []byte, off int, words ...uint32) {
	for i, w := range words {
		le.PutUint32(b[off+4*i:], w)
	}
}

// arm64Kernel is an arm64 "Image" (Documentation/arm64/booting.rst) for
// booti: code0 branches past the 64-byte header to semihostExit (semihosting
// SYS_EXIT; QEMU needs -semihosting-config enable=on,target=native). flags
// bit 3 says the image may sit anywhere in RAM, so booti runs it where it
// was loaded instead of moving it over QEMU's device tree at the start of
// RAM, where `pxe boot` points it (label_boot passes ${fdt_addr}).
func arm64Kernel() []byte {
	b := make([]byte, 0x1000)
	putWords(b, 0x00, 0x14000010) // b 0x40
	le.PutUint64(b[0x08:], 0)     // text_offset
	le.PutUint64(b[0x10:], uint64(len(b)))
	le.PutUint64(b[0x18:], 1<<3) // flags: little endian, any 2 MiB-aligned base
	copy(b[0x38:], "ARM\x64")
	copy(b[0x40:], semihostExit(ubootKernelStatus))
	return b
}

// armKernel is an arm32 zImage for bootz: the magic 0x016f2818 at 0x24 and
// start/end at 0x28/0x2c. Its code calls semihosting SYS_EXIT_EXTENDED (the
// A32 call that carries a status) through hlt #0xf000.
func armKernel() []byte {
	b := make([]byte, 0x1000)
	putWords(b, 0x00, 0xea00000a) // b 0x30
	putWords(b, 0x24, 0x016f2818, 0, uint32(len(b)))
	putWords(b, 0x30,
		0xe3a00020, // mov r0, #0x20 (SYS_EXIT_EXTENDED)
		0xe28f1004, // add r1, pc, #4 (the parameter block at 0x40)
		0xe10f0070, // hlt #0xf000
		0xeafffffe, // b .
		0x20026,    // ADP_Stopped_ApplicationExit
		ubootKernelStatus,
	)
	return b
}

// riscv64Kernel is a RISC-V "Image" (Documentation/riscv/boot-image-header.rst)
// for booti: "RISCV\0\0\0" at 0x30, magic "RSC\x05" at 0x38, a non-zero
// image_size (U-Boot refuses zero). Debian's qemu-riscv64 U-Boot runs in
// M-mode without SBI, so the code writes (85<<16)|0x3333 (FINISHER_FAIL with
// a code) to the virt machine's SiFive test device at 0x100000, which makes
// QEMU exit with status 85.
func riscv64Kernel() []byte {
	b := make([]byte, 0x1000)
	putWords(b, 0x00, 0x0400006f) // j 0x40
	le.PutUint64(b[0x08:], 0x200000)
	le.PutUint64(b[0x10:], uint64(len(b)))
	le.PutUint32(b[0x20:], 0x2) // header version 0.2
	copy(b[0x30:], "RISCV\x00\x00\x00")
	copy(b[0x38:], "RSC\x05")
	putWords(b, 0x40,
		0x001002b7, // lui t0, 0x100 (t0 = 0x100000)
		0x00553337, // lui t1, 0x553 (t1 = 0x00553000)
		0x33330313, // addi t1, t1, 0x333 (t1 = 85<<16 | 0x3333)
		0x0062a023, // sw t1, 0(t0)
		0x0000006f, // j .
	)
	return b
}

// x86Kernel is a bzImage for zboot: boot_flag 0xaa55, "HdrS", boot protocol
// 2.12 with the loaded-high flag, one setup sector. U-Boot copies the
// protected-mode part to 1 MiB and jumps there (in long mode on the 64-bit
// build); exitCode's bytes run in any mode and write to isa-debug-exit.
func x86Kernel() []byte {
	const setupSects = 1
	code := exitCode(guestOK)
	b := make([]byte, (setupSects+1)*512+512)
	b[0x1f1] = setupSects
	le.PutUint32(b[0x1f4:], uint32(len(b)-(setupSects+1)*512)/16) // syssize, 16-byte units
	le.PutUint16(b[0x1fe:], 0xaa55)
	copy(b[0x202:], "HdrS")
	le.PutUint16(b[0x206:], 0x020c)
	b[0x211] = 0x01                   // loadflags: LOADED_HIGH (bzImage)
	le.PutUint32(b[0x214:], 0x100000) // code32_start
	le.PutUint32(b[0x238:], 2047)     // cmdline_size
	copy(b[(setupSects+1)*512:], code)
	return b
}

// TestUBootKernelHeaders checks the crafted kernels against the fields
// U-Boot 2023.01 reads, so a typo shows here rather than as a QEMU hang.
func TestUBootKernelHeaders(t *testing.T) {
	tests := map[string]struct {
		img   []byte
		off   int
		magic []byte
	}{
		"arm64 Image":   {arm64Kernel(), 0x38, []byte("ARM\x64")},
		"arm zImage":    {armKernel(), 0x24, []byte{0x18, 0x28, 0x6f, 0x01}},
		"riscv64 Image": {riscv64Kernel(), 0x38, []byte("RSC\x05")},
		"x86 HdrS":      {x86Kernel(), 0x202, []byte("HdrS")},
		"x86 boot_flag": {x86Kernel(), 0x1fe, []byte{0x55, 0xaa}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.img[tc.off : tc.off+len(tc.magic)]; !bytes.Equal(got, tc.magic) {
				t.Errorf("magic at %#x = %x, want %x", tc.off, got, tc.magic)
			}
			// booti: gzip/lz4/... magic at offset 0 would make U-Boot try to
			// decompress the image first.
			if tc.img[0] == 0x1f && tc.img[1] == 0x8b {
				t.Error("image starts like gzip")
			}
		})
	}
	if n := le.Uint64(arm64Kernel()[0x10:]); n == 0 {
		t.Error("arm64 image_size is 0: booti would assume 16 MiB")
	}
	if n := le.Uint64(riscv64Kernel()[0x10:]); n == 0 {
		t.Error("riscv64 image_size is 0: booti refuses it")
	}
	x := x86Kernel()
	if sys, setup := int(le.Uint32(x[0x1f4:]))*16, (int(x[0x1f1])+1)*512; setup+sys != len(x) {
		t.Errorf("x86: setup %d + syssize*16 %d != file %d", setup, sys, len(x))
	}
}
