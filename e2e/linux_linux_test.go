//go:build linux

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// A real Linux guest: SeaBIOS + iPXE boots Debian's kernel with a busybox
// initramfs built here, through pxeperf's built-in iPXE script for the host
// entry; Linux loads e1000, takes a lease from pxeperf with udhcpc and
// fetches the 64 MiB image with busybox wget. The fetch's record must carry
// the guest's MAC and host name, which pxeperf only knows from the lease.

const (
	linuxHost   = "linux-guest"
	linuxSetup  = "sh e2e/linux_setup.sh"
	linuxOK     = "PXEPERF-LINUX-FETCH-OK"
	linuxFail   = "PXEPERF-LINUX-FETCH-FAIL"
	linuxUp     = "pxeperf-init: user space up"
	linuxFetch  = "img64?label.fetcher=linux-wget"
	linuxKernel = "Linux version "
)

// debianKernel returns what linux_setup.sh unpacked: its folder, the
// newest kernel there, its release and a static busybox; it skips the test,
// naming the set-up command, when they are missing.
func debianKernel(t *testing.T) (kdir, kernel, release, busybox string) {
	t.Helper()
	kdir = kernelDir()
	kernels, _ := filepath.Glob(filepath.Join(kdir, "boot", "vmlinuz-*"))
	if len(kernels) == 0 {
		t.Skipf("no Debian kernel in %s (PXEPERF_E2E_KERNEL_DIR): run %s (apt-get download linux-image-*-amd64 busybox-static; dpkg -x)", kdir, linuxSetup)
	}
	kernel = kernels[len(kernels)-1]
	release = strings.TrimPrefix(filepath.Base(kernel), "vmlinuz-")
	return kdir, kernel, release, staticBusybox(t, kdir)
}

// kernelDir is where linux_setup.sh unpacks the kernel and busybox-static.
func kernelDir() string {
	if d := os.Getenv("PXEPERF_E2E_KERNEL_DIR"); d != "" {
		return d
	}
	return "/tmp/pxeperf-e2e-kernel"
}

func TestLinuxKernelFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("a Linux guest takes minutes under TCG; skipped with -short")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "qemu-system-x86_64")
	kdir, kernel, release, busybox := debianKernel(t)

	bin := nstest.Binary(t)
	p, _, tap := nstest.GuestLAN(t)
	mods := moduleClosure(t, filepath.Join(kdir, "lib", "modules", release), "e1000")
	initrd := linuxInitramfs(t, busybox, mods)
	server := fmt.Sprintf("%s:8080", p.ServerIP)
	hosts := fmt.Sprintf(`  - mac: %s
    name: %s
    labels: {firmware: seabios-ipxe-linux}
    kernel: vmlinuz
    initrd: initrd.cpio.gz
    cmdline: console=ttyS0 panic=-1 pxeperf_server=%s
`, guestMAC, linuxHost, server)
	srv := serveGuestLAN(t, p, fullDHCP(p), hosts, func(root string) {
		if err := os.Link(kernel, filepath.Join(root, "vmlinuz")); err != nil {
			copyFile(t, kernel, filepath.Join(root, "vmlinuz"))
		}
		if err := os.WriteFile(filepath.Join(root, "initrd.cpio.gz"), initrd, 0o644); err != nil {
			t.Fatal(err)
		}
		nstest.Run(t, "", bin, "images", "generate", "img64", "--size", "64MiB", "--root", root)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sendRouterAdverts(t, ctx, p.Server, p.ServerIf)
	q := nstest.X86Guest{NS: p.Client, Tap: tap, Memory: "512", Args: []string{"-device", "e1000,netdev=n0,mac=" + guestMAC}}.QEMU()
	q.StopAt = []string{"Kernel panic", "pxeperf: booting vmlinuz failed"}
	q.Marks = []string{linuxKernel, linuxUp, linuxOK}
	run := q.Run(ctx)
	status, console, log, err := run.Status, run.Console, srv.Out.String(), run.Err
	t.Logf("QEMU exit status %d after %s", status, run.Took.Round(time.Second))
	if run.Stopped != "" {
		t.Logf("stopped QEMU: the console shows %q", run.Stopped)
	}
	logBootLines(t, log)
	if status != qemuStatus(guestOK) || !strings.Contains(console, linuxOK) {
		t.Fatalf("Linux did not report a complete fetch (QEMU status %d, want %d; %d = fetch failed; err %v)\nguest console (tail):\n%s\npxeperf log (tail):\n%s",
			status, qemuStatus(guestOK), qemuStatus(guestFail), err, nstest.Tail(console, 50), nstest.Tail(log, 30))
	}
	at := run.Seen
	t.Logf("boot: kernel started %s, user space up %s, fetch done %s after QEMU start",
		at[linuxKernel].Round(100*time.Millisecond), at[linuxUp].Round(100*time.Millisecond), at[linuxOK].Round(100*time.Millisecond))
	for _, l := range strings.Split(console, "\n") {
		if strings.HasPrefix(l, "pxeperf-init:") {
			t.Log("guest: " + l)
		}
	}

	// The record, read back through the real binary: the 64 MiB fetch Linux
	// made (the label comes from its URL; iPXE fetched only kernel and
	// initrd) carries the MAC and host name pxeperf learnt from udhcpc's lease.
	var rec *nstest.Record
	nstest.WaitFor(15*time.Second, func() bool {
		rec = findRecord(t, bin, srv.Data, "img64")
		return rec != nil
	})
	if rec == nil {
		t.Fatalf("no record of img64 in the store after 15 s:\n%s", nstest.Run(t, "", bin, "report", "--data", srv.Data, "--table", "fetches"))
	}
	t.Logf("record %d: %s %s %d bytes in %s = %.1f Mbit/s, client %s %s host %q, labels %v",
		rec.ID, rec.Proto, rec.File, rec.Bytes, rec.Duration.Round(time.Millisecond), rec.Mbps,
		rec.ClientMAC, rec.ClientIP, rec.Host, rec.Labels)
	if rec.Proto != "http" || rec.Bytes != imageSize || rec.Outcome != "ok" {
		t.Errorf("record %d: %s %d bytes, outcome %q; want http, %d bytes, ok", rec.ID, rec.Proto, rec.Bytes, rec.Outcome, imageSize)
	}
	if rec.ClientMAC != guestMAC || rec.Host != linuxHost {
		t.Errorf("record %d is on client %q host %q; want %s, %s (from the lease udhcpc took)", rec.ID, rec.ClientMAC, rec.Host, guestMAC, linuxHost)
	}
	if rec.Labels["fetcher"] != "linux-wget" {
		t.Errorf("record %d labels %v lack fetcher=linux-wget from Linux's URL", rec.ID, rec.Labels)
	}
	if !regexp.MustCompile(fmt.Sprintf(`msg=lease .*client_mac=%s .*arch=65535 host=%s`, guestMAC, linuxHost)).MatchString(log) {
		t.Errorf("pxeperf log has no lease for udhcpc (no option 93) on %s", guestMAC)
	}
}

// findRecord returns the newest record of file, or nil.
func findRecord(t *testing.T, bin, data, file string) *nstest.Record {
	t.Helper()
	out, err := exec.Command(bin, "report", "--data", data, "--table", "fetches", "--format", "json", "--file", file).Output()
	if err != nil {
		t.Logf("pxeperf report: %v", err)
		return nil
	}
	var tbl struct {
		Rows []nstest.Record `json:"rows"`
	}
	if err := json.Unmarshal(out, &tbl); err != nil {
		t.Fatalf("pxeperf report --format json: %v\n%s", err, out)
	}
	if len(tbl.Rows) == 0 {
		return nil
	}
	return &tbl.Rows[0]
}

// staticBusybox returns a statically linked busybox: the one linux_setup.sh
// unpacked from busybox-static, else /bin/busybox when it is static. A
// static binary needs nothing else in the initramfs; Debian's default
// busybox is dynamic and would need libc and the loader copied beside it.
func staticBusybox(t *testing.T, kdir string) string {
	t.Helper()
	for _, p := range []string{filepath.Join(kdir, "bin", "busybox"), "/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p
		}
	}
	t.Skipf("no static busybox in %s/bin or /bin: run %s (apt-get download busybox-static; dpkg -x)", kdir, linuxSetup)
	return ""
}

// kmod is a kernel module ready for the initramfs: its name and the
// uncompressed .ko.
type kmod struct {
	name string
	ko   []byte
}

// moduleClosure returns module name and everything it depends on,
// dependencies first, read from modDir (lib/modules/RELEASE). dpkg -x leaves
// no modules.dep (depmod runs in the package's postinst), so dependencies
// come from each module's own .modinfo "depends=", which modpost wrote from
// the same symbols depmod would resolve. Modules may be plain (bookworm) or
// compressed .ko.xz (trixie), .ko.zst or .ko.gz.
func moduleClosure(t *testing.T, modDir, name string) []kmod {
	t.Helper()
	paths := map[string]string{} // module name ("-" as "_") -> file
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		if i := strings.Index(base, ".ko"); i > 0 && !d.IsDir() {
			paths[strings.ReplaceAll(base[:i], "-", "_")] = p
		}
		return nil
	})
	if err != nil {
		t.Fatalf("modules of the kernel in %s: %v (re-run %s)", modDir, err, linuxSetup)
	}
	var out []kmod
	done := map[string]bool{}
	var add func(n string, depth int)
	add = func(n string, depth int) {
		n = strings.ReplaceAll(n, "-", "_")
		if done[n] {
			return
		}
		if depth > 20 {
			t.Fatalf("module dependencies of %s do not end", name)
		}
		done[n] = true
		p, ok := paths[n]
		if !ok {
			t.Fatalf("module %s not under %s (is it built in? see boot/config-*)", n, modDir)
		}
		ko := readModule(t, p)
		for _, dep := range modinfo(t, p, ko)["depends"] {
			if dep != "" {
				add(dep, depth+1)
			}
		}
		out = append(out, kmod{name: n, ko: ko})
	}
	add(name, 0)
	return out
}

// readModule returns a module file uncompressed.
func readModule(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.HasSuffix(p, ".ko"):
		return b
	case strings.HasSuffix(p, ".ko.gz"):
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err == nil {
			b, err = io.ReadAll(r)
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return b
	case strings.HasSuffix(p, ".ko.zst"):
		d, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		b, err = d.DecodeAll(b, nil)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return b
	case strings.HasSuffix(p, ".ko.xz"):
		nstest.RequireTool(t, "xz")
		out, err := exec.Command("xz", "-dc", p).Output()
		if err != nil {
			t.Fatalf("xz -dc %s: %v", p, err)
		}
		return out
	}
	t.Fatalf("%s: unknown module compression", p)
	return nil
}

// modinfo reads a module's .modinfo section: NUL-separated key=value
// strings; "depends" is comma-separated.
func modinfo(t *testing.T, p string, ko []byte) map[string][]string {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		t.Fatalf("%s has no .modinfo", p)
	}
	b, err := sec.Data()
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	info := map[string][]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if ok {
			info[k] = append(info[k], strings.Split(v, ",")...)
		}
	}
	return info
}

// linuxInit is the initramfs's /init. It reports through the console marker
// and QEMU's isa-debug-exit port (the x86 guests' exit codes), then powers
// off in case the port is missing.
const linuxInit = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo "pxeperf-init: user space up at uptime $(cut -d' ' -f1 /proc/uptime) s"
result() {
	echo "$1"
	printf "$2" | dd of=/dev/port bs=1 seek=244 2>/dev/null
	poweroff -f
}
server=
for a in $(cat /proc/cmdline); do
	case "$a" in pxeperf_server=*) server=${a#pxeperf_server=} ;; esac
done
[ -n "$server" ] || { echo "pxeperf-init: no pxeperf_server= on the kernel command line"; result %[1]s '\0%[3]o'; }
for m in %[4]s; do
	insmod /lib/modules/$m.ko || { echo "pxeperf-init: insmod $m failed"; result %[1]s '\0%[3]o'; }
done
ip link set eth0 up
udhcpc -i eth0 -f -q -n -t 20 -T 1 -s /udhcpc.sh || { echo "pxeperf-init: no lease"; result %[1]s '\0%[3]o'; }
t0=$(cut -d' ' -f1 /proc/uptime)
if wget -O /dev/null "http://$server/%[5]s"; then
	echo "pxeperf-init: fetched in $t0 .. $(cut -d' ' -f1 /proc/uptime) s uptime"
	result %[2]s '\0%[6]o'
fi
result %[1]s '\0%[3]o'
`

// udhcpcScript configures the address udhcpc got.
const udhcpcScript = `#!/bin/busybox sh
case "$1" in
bound|renew)
	ifconfig "$interface" "$ip" netmask "$subnet" up
	echo "pxeperf-init: lease $ip/$subnet on $interface from $serverid"
	;;
esac
`

// linuxInitramfs builds the gzipped newc initramfs: static busybox, /init,
// the udhcpc script, /dev/console (so init has a console before devtmpfs is
// mounted) and the modules in load order.
func linuxInitramfs(t *testing.T, busybox string, mods []kmod) []byte {
	t.Helper()
	var names []string
	for _, m := range mods {
		names = append(names, m.name)
	}
	initScript := fmt.Sprintf(linuxInit, linuxFail, linuxOK, guestFail, strings.Join(names, " "), linuxFetch, guestOK)
	return initramfs(t, busybox, initScript, mods, map[string][]byte{"udhcpc.sh": []byte(udhcpcScript)})
}

// initramfs builds a gzipped newc initramfs: static busybox as
// /bin/busybox, /init, /dev/console, the modules as lib/modules/NAME.ko and
// the extra files (path -> content, mode 0755) at the top.
func initramfs(t *testing.T, busybox, init string, mods []kmod, extra map[string][]byte) []byte {
	t.Helper()
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	c := &cpioWriter{w: gz}
	c.dir("bin")
	c.dir("dev")
	c.node("dev/console", 0o020600, 5, 1)
	c.dir("lib")
	c.dir("lib/modules")
	c.file("bin/busybox", 0o755, bb)
	c.file("init", 0o755, []byte(init))
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		c.file(name, 0o755, extra[name])
	}
	for _, m := range mods {
		c.file("lib/modules/"+m.name+".ko", 0o644, m.ko)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// cpioWriter writes the "newc" cpio format the kernel unpacks as an
// initramfs (Documentation/driver-api/early-userspace/buffer-format.rst):
// a 110-byte ASCII header, the NUL-terminated name and the data, each padded
// to 4 bytes; "TRAILER!!!" ends the archive.
type cpioWriter struct {
	w   io.Writer
	ino int
	err error
}

func (c *cpioWriter) entry(name string, mode uint32, rdevMajor, rdevMinor int, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	b.WriteString(name)
	b.WriteByte(0)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	_, c.err = c.w.Write(b.Bytes())
}

func (c *cpioWriter) dir(name string)                         { c.entry(name, 0o040755, 0, 0, nil) }
func (c *cpioWriter) file(name string, perm uint32, b []byte) { c.entry(name, 0o100000|perm, 0, 0, b) }
func (c *cpioWriter) node(name string, mode uint32, major, minor int) {
	c.entry(name, mode, major, minor, nil)
}
func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, 0, 0, nil)
	return c.err
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}
