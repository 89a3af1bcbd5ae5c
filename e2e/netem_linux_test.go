//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// netlab delays with netem where the kernel has sch_netem, and with its own
// delay line where not. This CI's kernel has no netem, so the netem path
// runs here under Debian's kernel (which has it as a module): netlab's own
// tests, built static, in a QEMU guest booted straight into a busybox
// initramfs that loads veth, sch_netem and sch_tbf.

const (
	netemPass = "PXEPERF-NETEM-PASS"
	netemFail = "PXEPERF-NETEM-FAIL"
	// The netlab tests the guest runs: TestNetemDelay skips without netem,
	// so the guest also checks that it ran (--- PASS, not --- SKIP).
	netemTests = "^(TestDelayVia|TestNetemDelay)$"
)

const netemInit = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
for m in %[1]s; do
	insmod /lib/modules/$m.ko || { echo "pxeperf-init: insmod $m failed"; echo %[3]s; poweroff -f; }
done
echo "pxeperf-init: modules loaded"
if /netlab.test -test.run '%[4]s' -test.v -test.count=1 > /tmp/out 2>&1; then
	cat /tmp/out
	if grep -q -- '--- PASS: TestNetemDelay' /tmp/out; then echo %[2]s; else echo "pxeperf-init: TestNetemDelay did not run"; echo %[3]s; fi
else
	cat /tmp/out
	echo %[3]s
fi
poweroff -f
`

func TestNetemInGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("a Linux guest takes a minute under TCG; skipped with -short")
	}
	nstest.RequireTool(t, "qemu-system-x86_64")
	kdir, kernel, release, busybox := debianKernel(t)
	modDir := filepath.Join(kdir, "lib", "modules", release)

	// The modules and what they need, each once, dependencies first.
	var mods []kmod
	seen := map[string]bool{}
	for _, name := range []string{"veth", "sch_netem", "sch_tbf"} {
		for _, m := range moduleClosure(t, modDir, name) {
			if !seen[m.name] {
				seen[m.name] = true
				mods = append(mods, m)
			}
		}
	}
	var names []string
	for _, m := range mods {
		names = append(names, m.name)
	}

	// netlab's tests, static, for the guest.
	dir := t.TempDir()
	testBin := filepath.Join(dir, "netlab.test")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go" // where .ci/run's Go is, when PATH lacks it
	}
	build := exec.Command(goTool, "test", "-c", "-o", testBin, "github.com/pxeperf/pxeperf/netlab")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building netlab's tests: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(testBin)
	if err != nil {
		t.Fatal(err)
	}
	init := fmt.Sprintf(netemInit, strings.Join(names, " "), netemPass, netemFail, netemTests)
	initrd := filepath.Join(dir, "initrd.gz")
	if err := os.WriteFile(initrd, initramfs(t, busybox, init, mods, map[string][]byte{"netlab.test": bin}), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := nstest.QEMU{Binary: "qemu-system-x86_64", Args: []string{"-accel", "tcg", "-m", "1024", "-nographic", "-no-reboot",
		"-kernel", kernel, "-initrd", initrd, "-append", "console=ttyS0 panic=-1 quiet"},
		StopAt: []string{"Kernel panic", netemPass, netemFail}}.Run(ctx)
	console := run.Console
	t.Logf("QEMU ended after %s (%v); %s", run.Took.Round(time.Second), run.Err, run.Stopped)
	if !strings.Contains(console, netemPass) {
		t.Fatalf("netlab's netem tests did not pass in the guest (kernel %s, modules %v); console (tail):\n%s", release, names, nstest.Tail(console, 60))
	}
	for _, l := range strings.Split(console, "\n") {
		if strings.Contains(l, "--- ") || strings.Contains(l, "netem probe") || strings.Contains(l, "RTT") {
			t.Log("guest: " + strings.TrimSpace(l))
		}
	}
}
