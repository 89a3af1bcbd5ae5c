//go:build linux

package uboot

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestBoards checks the table against what Debian's builds are known to
// do: qemu_arm64 sends option 93 = 22 and "U-Boot.armv8"; every board runs
// under TCG (never KVM) with its NIC on the tap it is given.
func TestBoards(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range Boards() {
		if seen[b.Name] || seen[b.MAC] {
			t.Errorf("%s: name or MAC %s used twice", b.Name, b.MAC)
		}
		seen[b.Name], seen[b.MAC] = true, true
		args := strings.Join(b.QEMUArgs("tpX"), " ")
		for _, want := range []string{"-accel tcg", "-bios " + b.Firmware, "ifname=tpX,", b.NIC + ",netdev=n0,mac=" + b.MAC} {
			if !strings.Contains(args, want) {
				t.Errorf("%s: QEMU args lack %q: %s", b.Name, want, args)
			}
		}
		if strings.Contains(args, "kvm") {
			t.Errorf("%s: QEMU args ask for KVM: %s", b.Name, args)
		}
		user := strings.Join(b.QEMUArgsUserNet("/srv/tftp"), " ")
		for _, want := range []string{"-accel tcg", "-netdev user,id=n0,restrict=on,tftp=/srv/tftp ", b.NIC + ",netdev=n0,mac=" + b.MAC} {
			if !strings.Contains(user, want) {
				t.Errorf("%s: user-network QEMU args lack %q: %s", b.Name, want, user)
			}
		}
		if strings.Contains(user, "tap") {
			t.Errorf("%s: user-network QEMU args name a tap: %s", b.Name, user)
		}
		if got, ok := BoardNamed(b.Name); !ok || got.Firmware != b.Firmware {
			t.Errorf("BoardNamed(%q) = %v, %v", b.Name, got.Name, ok)
		}
	}
	arm64, ok := BoardNamed("arm64")
	if !ok || arm64.Arch93 != 22 || arm64.Vendor != "U-Boot.armv8" {
		t.Errorf("arm64 board: option 93 %d, option 60 %q; want 22 and U-Boot.armv8", arm64.Arch93, arm64.Vendor)
	}
	if _, ok := BoardNamed("sparc"); ok {
		t.Error("BoardNamed found a board that is not in the table")
	}
	// Boards returns a fresh table: a caller's edit does not leak.
	b := Boards()
	b[0].Machine[0] = "changed"
	if slices.Contains(Boards()[0].Machine, "changed") {
		t.Error("Boards shares its slices between calls")
	}
}

// TestConsoleStop boots the arm64 board, stops autoboot, runs a command,
// and checks that Stop ends QEMU.
func TestConsoleStop(t *testing.T) {
	if testing.Short() {
		t.Skip("boots U-Boot under TCG; skipped with -short")
	}
	b, _ := BoardNamed("arm64")
	b.Require(t)
	p, _, tap := nstest.GuestLAN(t)
	c := Boot(t, b, "arm64", p.Client, tap, nil)
	c.StopAutoboot(90 * time.Second)
	c.Env(b)
	if out := c.Run("echo pxeperf", 10*time.Second); strings.TrimSpace(out) != "pxeperf" {
		t.Fatalf("echo printed %q", out)
	}
	if out := c.Run("version", 10*time.Second); !strings.Contains(out, "U-Boot 20") {
		t.Fatalf("version printed %q", out)
	}
	c.Stop()
	select {
	case <-c.exited:
	default:
		t.Fatal("QEMU still running after Stop")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", c.cmd.Process.Pid)); err == nil {
		t.Errorf("QEMU's pid %d still exists after Stop", c.cmd.Process.Pid)
	}
}

func TestRateMbps(t *testing.T) {
	tests := map[string]struct {
		in   string
		want float64
		ok   bool
	}{
		"MiB":       {"6.2 MiB/s", 6.2 * (1 << 20) * 8 / 1e6, true},
		"KiB":       {"512 KiB/s", 512 * 1024 * 8 / 1e6, true},
		"bytes":     {"100 B/s", 800 / 1e6, true},
		"GiB":       {"1 GiB/s", (1 << 30) * 8 / 1e6, true},
		"not rate":  {"Bytes transferred = 5", 0, false},
		"empty":     {"", 0, false},
		"no number": {"x MiB/s", 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := RateMbps(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("RateMbps(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
