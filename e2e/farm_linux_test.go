//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
)

// A board farm's CI job, as README's "Drive it from CI" runs it: the built
// binary's own CLI against `serve --dhcp full`, a real board under QEMU.
// TestFarmCIJob (SeaBIOS + iPXE with a local disk, the boot sector of
// localboot_linux_test.go, which prints localDiskMarker):
//  1. `hosts set` a new MAC whose default is its local disk;
//  2. `hosts next-boot --once` a Debian kernel and busybox initramfs;
//  3. kill -9 serve and start it again: the next boot is exactly as set;
//  4. boot the guest: Linux runs, and `hosts wait --booted` (started before
//     the power-on) prints the kernel's fetch record;
//  5. boot it again: the once next boot was consumed, so it boots its disk.
// TestFarmCIJobUBoot runs 1, 2, 4 and 5 with U-Boot arm64's distro boot.

const farmMAC = "52:54:00:fa:0b:01"

// farmLab is the serve process of the job and how the CLI reaches it.
type farmLab struct {
	bin, tokenFile, admin string
	p                     *nstest.Pair
	srv                   *nstest.Served
}

// cli runs `pxeperf hosts ARGS` against the lab's admin listener, in the
// server's namespace, and returns its standard output.
func (l *farmLab) cli(t *testing.T, args ...string) string {
	t.Helper()
	args = append(append([]string{"hosts"}, args...), "--admin", l.admin, "--token-file", l.tokenFile)
	out, err := nstest.Output(l.p.Server, time.Minute, l.bin, args...)
	if err != nil {
		t.Fatalf("pxeperf %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// nextBoot is `hosts show MAC --json`'s next boot, compact, "" when none.
func (l *farmLab) nextBoot(t *testing.T, mac string) string {
	t.Helper()
	out := l.cli(t, "show", mac, "--json")
	var e struct {
		NextBoot json.RawMessage `json:"next_boot"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &e); err != nil {
		t.Fatalf("hosts show --json: %v\n%s", err, out)
	}
	if string(e.NextBoot) == "null" || len(e.NextBoot) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, e.NextBoot); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// newFarmLab serves p's guest LAN in full DHCP mode with an admin token
// and no host entries: the job makes them. before fills the root.
func newFarmLab(t *testing.T, p *nstest.Pair, before func(root string)) *farmLab {
	t.Helper()
	l := &farmLab{bin: nstest.Binary(t), tokenFile: filepath.Join(t.TempDir(), "token"), p: p}
	if err := os.WriteFile(l.tokenFile, []byte("farm-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("log_level: debug\ndhcp:\n  %s\nhttp:\n  listen: %s:8080\ntftp:\n  listen: %s:69\nadmin:\n  token_file: %s\n",
		fullDHCP(p), p.ServerIP, p.ServerIP, l.tokenFile)
	l.srv = p.Serve(t, yaml, before)
	l.admin = l.srv.Admin
	return l
}

// startWait starts `hosts wait MAC --booted` as the job does before the
// power-on; the func returned waits for it (a minute at most once the
// board has booted) and returns what it printed.
func (l *farmLab) startWait(t *testing.T, mac string) func() string {
	t.Helper()
	wait := exec.Command("ip", "netns", "exec", l.p.Server, l.bin, "hosts", "wait", mac, "--booted", "--timeout", "8m",
		"--admin", l.admin, "--token-file", l.tokenFile)
	var out bytes.Buffer
	wait.Stdout, wait.Stderr = &out, &out
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- wait.Wait() }()
	t.Cleanup(func() { _ = wait.Process.Kill() })
	return func() string {
		t.Helper()
		select {
		case err := <-waited:
			if err != nil {
				t.Fatalf("hosts wait --booted: %v\n%s", err, out.String())
			}
		case <-time.After(time.Minute):
			t.Fatalf("hosts wait --booted had not returned a minute after the board booted:\n%s", out.String())
		}
		return out.String()
	}
}

func TestFarmCIJob(t *testing.T) {
	requireX86Guest(t, "/usr/lib/ipxe/qemu/efi-e1000.rom", "ipxe-qemu")
	kdir, kernel, release, busybox := debianKernel(t)
	p, _, tap := nstest.GuestLAN(t)
	initrd := linuxInitramfs(t, busybox, moduleClosure(t, filepath.Join(kdir, "lib", "modules", release), "e1000"))
	l := newFarmLab(t, p, func(root string) {
		copyFile(t, kernel, filepath.Join(root, "vmlinuz"))
		if err := os.WriteFile(filepath.Join(root, "initrd.cpio.gz"), initrd, 0o644); err != nil {
			t.Fatal(err)
		}
		nstest.Run(t, "", nstest.Binary(t), "images", "generate", "img64", "--size", "64MiB", "--root", root)
	})

	// 1-3: the job sets the board up; serve dies and comes back.
	l.cli(t, "set", farmMAC, "--name", "farm-board", "--default-boot", "local", "--label", "rack=r7")
	cmdline := fmt.Sprintf("console=ttyS0 panic=-1 pxeperf_server=%s:8080", l.p.ServerIP)
	l.cli(t, "next-boot", farmMAC, "--kernel", "vmlinuz", "--initrd", "initrd.cpio.gz", "--cmdline", cmdline, "--once")
	set := l.nextBoot(t, farmMAC)
	if !strings.Contains(set, `"kernel":"vmlinuz"`) || !strings.Contains(set, `"once":true`) {
		t.Fatalf("next boot as set: %s", set)
	}
	l.srv.Restart(t)
	if got := l.nextBoot(t, farmMAC); got != set {
		t.Fatalf("next boot after kill -9 and a restart:\n got %s\nwant %s", got, set)
	}

	// 4: power on, with the job waiting for the kernel's fetch.
	waited := l.startWait(t, farmMAC)
	disk := writeDisk(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	sendRouterAdverts(t, ctx, l.p.Server, l.p.ServerIf)
	boot := func(name string, limit time.Duration, marks ...string) nstest.QEMURun {
		q := nstest.X86Guest{NS: l.p.Client, Tap: tap, Memory: "512", Args: []string{
			"-device", "e1000,netdev=n0,mac=" + farmMAC, "-boot", "order=nc",
			"-drive", "file=" + disk + ",format=raw,if=ide,snapshot=on"}}.QEMU()
		q.StopAt = []string{"Kernel panic", "No bootable device"}
		q.Marks = marks
		gctx, gcancel := context.WithTimeout(ctx, limit)
		defer gcancel()
		r := q.Run(gctx)
		t.Logf("%s: QEMU status %d after %s, stopped at %q", name, r.Status, r.Took.Round(time.Second), r.Stopped)
		return r
	}
	first := boot("boot 1 (next boot: the kernel, once)", 8*time.Minute, linuxKernel, linuxOK)
	if first.Status != qemuStatus(guestOK) || !strings.Contains(first.Console, linuxOK) || strings.Contains(first.Console, localDiskMarker) {
		t.Fatalf("boot 1 did not run Linux to its fetch (QEMU status %d)\nguest console (tail):\n%s\npxeperf log (tail):\n%s",
			first.Status, nstest.Tail(first.Console, 40), nstest.Tail(l.srv.Out.String(), 30))
	}
	checkBootedRecord(t, waited(), farmMAC, "vmlinuz")
	if got := l.nextBoot(t, farmMAC); got != "" {
		t.Errorf("the once next boot is still set after the kernel's fetch: %s", got)
	}

	// 5: the board is handed back and boots its own disk.
	second := boot("boot 2 (default_boot local)", 3*time.Minute)
	if second.Status != qemuStatus(guestOK) || !strings.Contains(second.Console, localDiskMarker) || strings.Contains(second.Console, linuxKernel) {
		t.Fatalf("boot 2 did not boot the local disk (QEMU status %d)\nguest console (tail):\n%s", second.Status, nstest.Tail(second.Console, 30))
	}
	inOrder(t, second.Console, "boots from its local disk (default_boot: local)", localDiskMarker)
	events := l.cli(t, "list")
	t.Logf("hosts list after the job:\n%s", events)
}

// checkBootedRecord fails t unless out (what `hosts wait --booted`
// printed) holds the ok fetch of kernel by mac as JSON.
func checkBootedRecord(t *testing.T, out, mac, kernel string) {
	t.Helper()
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("hosts wait --booted printed no JSON:\n%s", out)
	}
	var rec nstest.Record
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&rec); err != nil {
		t.Fatalf("hosts wait --booted: %v\n%s", err, out)
	}
	t.Logf("hosts wait --booted: %s %s %d bytes, %.1f Mbit/s, client %s", rec.File, rec.Outcome, rec.Bytes, rec.Mbps, rec.ClientMAC)
	if !strings.HasSuffix(rec.File, kernel) || rec.Outcome != "ok" || rec.ClientMAC != mac || rec.Bytes <= 0 {
		t.Errorf("hosts wait --booted returned %+v; want the ok fetch of %s by %s", rec, kernel, mac)
	}
}

func TestFarmCIJobUBoot(t *testing.T) {
	b := arm64Board(t)
	b.MAC = "52:54:00:fa:0b:02"
	const kernel = "kernel-farm-arm64.img"
	p, _, tap := nstest.GuestLAN(t)
	l := newFarmLab(t, p, func(root string) {
		if err := os.WriteFile(filepath.Join(root, kernel), arm64Kernel(), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	l.cli(t, "set", b.MAC, "--name", "farm-uboot", "--default-boot", "local")
	l.cli(t, "next-boot", b.MAC, "--kernel", kernel, "--cmdline", b.Cmdline, "--once")
	waited := l.startWait(t, b.MAC)
	// The board's own next boot target stands for its disk (as in
	// TestLocalBootUBoot): distro boot reaches it only when pxeperf's boot
	// script lets it go on.
	distro := func(name string) *uboot.Console {
		c := uboot.Boot(t, b, name, p.Client, tap, l.srv.Out.String)
		c.StopAutoboot(90 * time.Second)
		c.Env(b, "setenv bootcmd_pxeperfnext echo "+ubootNextMarker, "setenv boot_targets dhcp pxeperfnext")
		if out := c.Run("printenv bootcmd_dhcp", 10*time.Second); !strings.HasPrefix(strings.TrimSpace(out), "bootcmd_dhcp=") {
			t.Skipf("this U-Boot build has no bootcmd_dhcp: %s", out)
		}
		return c
	}

	c := distro("farm boot 1 (next boot: the kernel, once)")
	from := c.Send("run distro_bootcmd")
	c.WaitFor(from, 3*time.Minute, `"Starting kernel"`, func(s string) bool { return strings.Contains(s, "Starting kernel") })
	if st := c.WaitExit(time.Minute); st != ubootKernelStatus {
		c.Fatalf("boot 1: QEMU exit status %d, want %d (the next boot's kernel did not run)", st, ubootKernelStatus)
	}
	checkBootedRecord(t, waited(), b.MAC, kernel)
	if got := l.nextBoot(t, b.MAC); got != "" {
		t.Errorf("the once next boot is still set after the kernel's fetch: %s", got)
	}

	c = distro("farm boot 2 (default_boot local)")
	out := c.Run("run distro_bootcmd", 2*time.Minute)
	_, script, ok := strings.Cut(out, "## Executing script")
	if !ok {
		c.Fatalf("boot 2: distro boot did not source pxeperf's boot.scr.uimg")
	}
	inOrder(t, script, "boots from its local disk (default_boot: local)", ubootNextMarker)
	if strings.Contains(script, "Starting kernel") {
		t.Errorf("boot 2 started a kernel although the once next boot was consumed:\n%s", nstest.Tail(script, 30))
	}
	c.Stop()
}
