package bootcfg

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const ubootARM64 = "/usr/lib/u-boot/qemu_arm64/u-boot.bin"

// TestUBootQEMU sources the built-in script in Debian 12's U-Boot 2023.01
// (u-boot-qemu) under QEMU, with QEMU's user network serving DHCP and TFTP,
// so distro boot's bootcmd_dhcp fetches boot.scr.uimg as on a board. It
// checks what U-Boot itself does with the script: the quoting of bootargs,
// the ADDR:SIZE initrd, the fall-through from booti to bootm, and the
// failure line.
func TestUBootQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots U-Boot in QEMU (about 15 s per case); skipped with -short")
	}
	qemu, err := exec.LookPath("qemu-system-aarch64")
	if err != nil {
		t.Skip("needs qemu-system-aarch64: apt-get install qemu-system-arm")
	}
	if _, err := os.Stat(ubootARM64); err != nil {
		t.Skipf("needs %s: apt-get install u-boot-qemu", ubootARM64)
	}
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
			out := runUBoot(t, qemu, dir, tt.endMarker)
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("console lacks %q (in order); console:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			script := out[strings.Index(out, "## Executing script"):]
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

// runUBoot boots U-Boot with dir as QEMU's TFTP root and returns the
// console up to the first line containing end (or what came in 120 s).
func runUBoot(t *testing.T, qemu, dir, end string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-M", "virt", "-cpu", "cortex-a57", "-m", "512",
		"-nographic", "-no-reboot", "-bios", ubootARM64,
		"-nic", "user,model=virtio-net-pci,tftp="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		out.WriteString(line + "\n")
		if strings.Contains(line, end) {
			return out.String()
		}
	}
	t.Fatalf("U-Boot ended or timed out before %q; console:\n%s", end, out.String())
	return ""
}
