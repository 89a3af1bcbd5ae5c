//go:build linux

package bootcfg

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
)

// TestUBootQEMU sources the built-in script in Debian 12's U-Boot 2023.01
// (u-boot-qemu, internal/testkit/uboot's arm64 board) under QEMU, with QEMU's user
// network serving DHCP and TFTP, so distro boot's bootcmd_dhcp fetches
// boot.scr.uimg as on a board. It checks what U-Boot itself does with the
// script: the quoting of bootargs, the ADDR:SIZE initrd, the fall-through
// from booti to bootm, and the failure line.
func TestUBootQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots U-Boot in QEMU (about 5 s per case); skipped with -short")
	}
	b, _ := uboot.BoardNamed("arm64")
	b.Require(t)
	cmdline := `console=ttyAMA0 root=/dev/nfs foo="a b" x=$y ${z} it's back\slash ; reset # c`
	tests := map[string]struct {
		data      Data
		kernel    []byte
		want      []string // lines, in order
		wantNot   string
		endMarker string
	}{
		"arm64 Image boots with booti": {
			data:   Data{MAC: "52:54:00:12:34:56", IP: "10.0.2.15", Hostname: "board1", Kernel: "boot/Image", Initrd: "boot/initrd.img", Cmdline: cmdline, FDTDir: "boot/dtbs"},
			kernel: fakeARM64Image(),
			want: []string{
				"pxeperf: boot script for board1 (52:54:00:12:34:56 10.0.2.15): kernel boot/Image",
				"bootargs=" + cmdline,
				"pxeperf: fdt_addr_r is not set, no device tree is loaded from boot/dtbs",
				"pxeperf: booting 0x40400000 0x44000000:3e8 ", // then fdtcontroladdr
				"## Flattened Device Tree blob at ",
				"Starting kernel ...",
			},
			wantNot:   "pxeperf: boot failed",
			endMarker: "Starting kernel",
		},
		"not a kernel falls through to the failure line": {
			data:   Data{MAC: "52:54:00:12:34:56", IP: "10.0.2.15", Kernel: "boot/Image", Cmdline: "quiet"},
			kernel: bytes.Repeat([]byte{0x5a}, 8192),
			want: []string{
				"bootargs=quiet",
				"pxeperf: booting 0x40400000 - ",
				"Bad Linux ARM64 Image magic!",
				"Wrong Image Format for bootm command",
				"pxeperf: boot failed for 52:54:00:12:34:56 10.0.2.15: boot/Image did not boot with booti, bootz, zboot or bootm",
			},
			wantNot:   "Starting kernel",
			endMarker: "pxeperf: boot failed",
		},
		"missing kernel": {
			data: Data{MAC: "52:54:00:12:34:56", IP: "10.0.2.15", Kernel: "boot/missing"},
			want: []string{
				"pxeperf: boot failed for 52:54:00:12:34:56 10.0.2.15: could not load boot/missing",
			},
			wantNot:   "pxeperf: booting",
			endMarker: "pxeperf: boot failed",
		},
	}
	tmpl, err := Parse(UBoot, "built-in", 0, Builtin(UBoot))
	if err != nil {
		t.Fatal(err)
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			img, err := Render(UBoot, tmpl, tt.data, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "boot.scr.uimg"), img)
			if tt.kernel != nil {
				write(t, filepath.Join(dir, tt.data.Kernel), tt.kernel)
			}
			if tt.data.Initrd != "" {
				write(t, filepath.Join(dir, tt.data.Initrd), bytes.Repeat([]byte{1}, 1000))
			}
			c := uboot.Start(t, "arm64 "+name, "", nil, b.QEMU, b.QEMUArgsUserNet(dir)...)
			c.StopAutoboot(90 * time.Second)
			c.Env(b)
			from := c.Send("run bootcmd_dhcp")
			out := c.WaitFor(from, 2*time.Minute, "a whole line with "+tt.endMarker, func(s string) bool {
				i := strings.Index(s, tt.endMarker)
				return i >= 0 && strings.Contains(s[i:], "\n")
			})
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("console lacks %q (in order); console:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			_, script, ok := strings.Cut(out, "## Executing script")
			if !ok {
				t.Fatalf("console lacks \"## Executing script\"; console:\n%s", out)
			}
			if tt.wantNot != "" && strings.Contains(script, tt.wantNot) {
				t.Errorf("console has %q:\n%s", tt.wantNot, out)
			}
		})
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeARM64Image is an arm64 Linux Image header (magic "ARM\x64" at 56,
// Documentation/arch/arm64/booting.rst) before zeros: booti accepts it and
// jumps; the CPU then faults, after "Starting kernel ...". With flags bit 3
// clear booti would move it to the start of RAM, over QEMU's device tree.
func fakeARM64Image() []byte {
	b := make([]byte, 64*1024)
	binary.LittleEndian.PutUint64(b[8:], 0)           // text_offset
	binary.LittleEndian.PutUint64(b[16:], 128*1024)   // image_size
	binary.LittleEndian.PutUint32(b[56:], 0x644d5241) // magic
	return b
}
