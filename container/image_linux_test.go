package container

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// uid is the image's non-root user (Dockerfile: USER 10001:10001).
const uid = 10001

// sh runs a shell command line (as the README writes it) in dir, failing t
// on error; it returns the combined output and logs how long it took.
func sh(t *testing.T, dir, line string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ec", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/local/go/bin:/usr/sbin:/sbin")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, nstest.Tail(string(out), 30))
	}
	t.Logf("%s (%v)", line, time.Since(start).Round(time.Millisecond))
	return string(out)
}

// built is the repository root once buildImage has built the image in this
// test process (the tests share one build).
var built string

// buildImage runs the README's "without Docker Hub" build: the binary on the
// host into dist/, the builder base from the host, podman build. Returns the
// repository root.
func buildImage(t *testing.T) string {
	t.Helper()
	if built != "" {
		return built
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("the README's build line is written for amd64 hosts (this is %s)", runtime.GOARCH)
	}
	// The README's build block, line by line, as written there.
	block := readmeBlock(t, root, "podman import")
	if len(block) != 3 {
		t.Fatalf("README's build block has %d commands, want 3 (go build, local-base.sh | podman import, podman build): %q", len(block), block)
	}
	for _, line := range block {
		sh(t, root, line, 3*time.Minute)
	}
	built = root
	return root
}

type imageInfo struct {
	Config struct {
		User       string
		Labels     map[string]string
		Volumes    map[string]struct{}
		Entrypoint []string
	}
	Healthcheck struct{ Test []string } // docker format only
}

func inspect(t *testing.T) imageInfo {
	t.Helper()
	out, err := exec.Command("podman", "image", "inspect", "pxeperf").Output()
	if err != nil {
		t.Fatalf("podman image inspect: %v", err)
	}
	var info []imageInfo
	if err := json.Unmarshal(out, &info); err != nil || len(info) != 1 {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	return info[0]
}

// TestImageBootsClient builds the image with podman (no registry: a builder
// made from the host, a host-built binary), runs it with the network of a
// test namespace (nsenter --net=, not ip netns exec, which remounts /sys and
// breaks the runtime; --runtime runc; a nofile ulimit the runtime may set)
// as its non-root user with the three capabilities, and boots a real client
// from it in the other namespace: a udhcpc lease, the boot file by TFTP
// (tftp-hpa) and an image by HTTP (curl), byte-exact. `podman exec ...
// pxeperf report` shows the fetches; `podman healthcheck run` (the image's
// HEALTHCHECK, pxeperf healthcheck) says healthy.
func TestImageBootsClient(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "podman", "runc", "nsenter", "busybox", "tftp", "curl", "go")
	root := buildImage(t)
	caps := checkImageConfig(t, root)

	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	images, data := sharedDir(t, 0o755), sharedDir(t, 0o755)
	if err := os.Chown(data, uid, uid); err != nil {
		t.Fatal(err)
	}
	nstest.RandomFile(t, filepath.Join(images, "vmlinuz"), 3<<20, 29)
	if err := os.Chmod(filepath.Join(images, "vmlinuz"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startContainer(t, root, p, images, data, caps, "")
	clientIP, bootFile := bootClient(t, p, images)
	checkReports(t, c, clientIP, bootFile)
	checkHealth(t, c)
}

// checkImageConfig checks what `podman image inspect` says of the image:
// its non-root user, volumes, HEALTHCHECK, OCI labels and the
// capabilities label (the Dockerfile's capabilities, which it returns).
func checkImageConfig(t *testing.T, root string) []string {
	t.Helper()
	info := inspect(t)
	if info.Config.User != fmt.Sprintf("%d:%d", uid, uid) {
		t.Errorf("image user %q, want %d:%d (non-root)", info.Config.User, uid, uid)
	}
	for _, v := range []string{"/images", "/data"} {
		if _, ok := info.Config.Volumes[v]; !ok {
			t.Errorf("image volumes %v lack %s", info.Config.Volumes, v)
		}
	}
	if got := strings.Join(info.Healthcheck.Test, " "); got != "CMD /usr/local/bin/pxeperf healthcheck" {
		t.Errorf("image HEALTHCHECK %q, want CMD /usr/local/bin/pxeperf healthcheck", got)
	}
	for _, k := range []string{"version", "revision", "source"} {
		if info.Config.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("image lacks label org.opencontainers.image.%s (labels %v)", k, info.Config.Labels)
		}
	}
	if v := info.Config.Labels["org.opencontainers.image.version"]; v != "test" {
		t.Errorf("label version %q, want test (the build arg)", v)
	}
	caps := imageCaps(t, root)
	if l := info.Config.Labels["io.github.pxeperf.capabilities"]; l != strings.Join(caps, " ") {
		t.Errorf("label io.github.pxeperf.capabilities %q, want %q", l, strings.Join(caps, " "))
	}
	return caps
}

// bootClient is the client in p.Client: a DHCP lease (udhcpc sets the
// address), then the boot file the lease names by TFTP and the image by
// HTTP, each checked byte for byte. It returns the client's address and
// the boot file.
func bootClient(t *testing.T, p *nstest.Pair, images string) (clientIP, bootFile string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "udhcpc.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
[ "$1" = bound ] || exit 0
ip addr add "$ip/$mask" dev "$interface"
echo "$ip $siaddr $boot_file" > `+filepath.Join(dir, "lease")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := nstest.Output(p.Client, 30*time.Second, "busybox", "udhcpc", "-n", "-q", "-f", "-i", p.ClientIf,
		"-s", script, "-t", "5", "-T", "1", "-A", "1",
		// A BIOS PXE client (option 60 and 93 = 0), answered undionly.kpxe.
		"-V", "PXEClient:Arch:00000:UNDI:002001", "-x", "0x5d:0000"); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, out)
	}
	lease, err := os.ReadFile(filepath.Join(dir, "lease"))
	if err != nil {
		t.Fatalf("udhcpc bound no address: %v", err)
	}
	f := strings.Fields(string(lease))
	if len(f) != 3 {
		t.Fatalf("lease %q: want ip, next-server and boot file", lease)
	}
	clientIP, server, bootFile := f[0], f[1], f[2]
	t.Logf("lease: %s from next-server %s, boot file %s", clientIP, server, bootFile)
	if server != p.ServerIP.String() {
		t.Errorf("next-server %s, want the namespace's %s", server, p.ServerIP)
	}
	got := filepath.Join(dir, "boot")
	nstest.Run(t, p.Client, "tftp", "-m", "binary", server, "-c", "get", bootFile, got)
	// Served from the image's /usr/lib/ipxe: Debian's file, byte for byte.
	if want := "/usr/lib/ipxe/" + filepath.Base(bootFile); fileExists(want) {
		if nstest.FileSHA256(t, got) != nstest.FileSHA256(t, want) {
			t.Errorf("TFTP %s differs from the host's %s", bootFile, want)
		}
	} else {
		t.Errorf("boot file %s is not one of Debian's /usr/lib/ipxe files", bootFile)
	}
	img := filepath.Join(dir, "vmlinuz")
	curl := nstest.Run(t, p.Client, "curl", "-sS", "-f", "-o", img, "-w", "%{size_download}", "http://"+server+"/vmlinuz")
	if curl != "3145728" || nstest.FileSHA256(t, img) != nstest.FileSHA256(t, filepath.Join(images, "vmlinuz")) {
		t.Errorf("HTTP vmlinuz: curl got %s bytes, or the content differs", curl)
	}
	return clientIP, bootFile
}

// checkReports checks the README's `podman exec ... pxeperf report` on the
// container: the fetches table shows both fetches, the summary the client.
func checkReports(t *testing.T, c *container, clientIP, bootFile string) {
	t.Helper()
	var report string
	if !nstest.WaitFor(10*time.Second, func() bool {
		out, err := c.readmeLine(1, "--table", "fetches")
		report = string(out)
		return err == nil && strings.Contains(report, "vmlinuz") && strings.Contains(report, bootFile)
	}) {
		t.Errorf("podman exec %s pxeperf report --data /data --table fetches does not show both fetches:\n%s", c.name, report)
	}
	t.Logf("podman exec pxeperf report --table fetches:\n%s", report)
	out, err := c.readmeLine(1)
	if err != nil || !strings.Contains(string(out), clientIP) {
		t.Errorf("podman exec %s pxeperf report --data /data: %v, does not name the client %s:\n%s", c.name, err, clientIP, out)
	}
	t.Logf("podman exec pxeperf report:\n%s", out)
}

// checkHealth checks the README's `podman healthcheck run`: healthy inside
// the test's namespace, unhealthy outside it, and serve running as the
// image's user.
func checkHealth(t *testing.T, c *container) {
	t.Helper()
	name := c.name
	out, err := c.readmeLine(2)
	status, _ := exec.Command("podman", "inspect", "--format", "{{.State.Health.Status}}", name).Output()
	if err != nil || strings.TrimSpace(string(status)) != "healthy" {
		hc, _ := c.in("exec", name, "pxeperf", "healthcheck").CombinedOutput()
		t.Errorf("podman healthcheck run %s: %v %q, status %q, want healthy (pxeperf healthcheck: %s)", name, err, out, status, hc)
	} else {
		t.Logf("podman healthcheck run: exit 0, status %s", status)
	}
	// The HEALTHCHECK is what fails when serve is gone: not a test that
	// cannot fail. From the root namespace nothing listens on its :80.
	if out, err := exec.Command("podman", "healthcheck", "run", name).CombinedOutput(); err == nil {
		t.Errorf("podman healthcheck run outside the container's network: %q, want unhealthy", out)
	}
	// It ran as the image's user, not root.
	if ps, err := exec.Command("podman", "top", name, "user", "args").CombinedOutput(); err != nil || !strings.Contains(string(ps), "\npxeperf ") {
		t.Errorf("podman top %s: %v\n%s (want the pxeperf user)", name, err, ps)
	} else {
		t.Logf("podman top:\n%s", ps)
	}
}

// startContainer runs the README's podman run line in p.Server, adapted:
// the test's folders, interface and a pool of .100-.120 of p's subnet,
// extraMount ("A:B -v ": volumes put before the data volume), the three
// workarounds, and returns the running container.
func startContainer(t *testing.T, root string, p *nstest.Pair, images, data string, caps []string, extraMount string) *container {
	t.Helper()
	b := p.Prefix.Addr().As4()
	pool := fmt.Sprintf("%d.%d.%d.100-%d.%d.%d.120", b[0], b[1], b[2], b[0], b[1], b[2])
	name := fmt.Sprintf("pxeperf-test-%d-%s", os.Getpid(), p.ServerIf)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("podman", "logs", name).CombinedOutput()
			t.Logf("podman logs %s:\n%s", name, nstest.Tail(string(out), 40))
		}
		_ = exec.Command("podman", "rm", "-f", "-t", "2", name).Run()
	})
	// The README's run block: its podman run with this test's folders,
	// interface and pool, inside the test namespace with the workarounds
	// the README names.
	run := readmeBlock(t, root, "podman run -d")
	if len(run) != 3 || !strings.HasPrefix(run[1], "podman exec pxeperf pxeperf report") || run[2] != "podman healthcheck run pxeperf" {
		t.Fatalf("README's run block %q: want podman run, podman exec ... report, podman healthcheck run", run)
	}
	for _, c := range caps {
		if !strings.Contains(run[0], "--cap-add "+c) {
			t.Errorf("README's podman run lacks --cap-add %s", c)
		}
	}
	line := strings.NewReplacer(
		"podman run -d --name pxeperf ", fmt.Sprintf("nsenter --net=/run/netns/%s podman run -d --name %s --runtime runc --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 ", p.Server, name),
		"/srv/pxeperf/images:", images+":", "/var/lib/pxeperf:", extraMount+data+":",
		"--iface eth0", fmt.Sprintf("--iface %s --dhcp full --pool %s", p.ServerIf, pool),
	).Replace(run[0])
	if line == run[0] || !strings.Contains(line, p.ServerIf) || !strings.Contains(line, images) {
		t.Fatalf("README's podman run %q is not of the form this test adapts", run[0])
	}
	sh(t, root, line, time.Minute)
	if !nstest.WaitFor(20*time.Second, func() bool {
		out, _ := exec.Command("podman", "logs", name).CombinedOutput()
		return strings.Contains(string(out), "pxeperf serving")
	}) {
		t.Fatal("the container's pxeperf serve did not start within 20 s")
	}

	// podman exec (and podman
	// healthcheck run) of a --network host container runs in the caller's
	// network namespace: enter the test's, as the README's host would be.
	in := func(args ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{"--net=/run/netns/" + p.Server, "podman"}, args...)...)
	}
	return &container{name: name, in: in, run: run}
}

// container is the README's container running in a test's namespace.
type container struct {
	name string
	in   func(args ...string) *exec.Cmd // a podman command inside the namespace
	run  []string                       // the README's run block
}

// readmeLine runs line i of the README's run block (1: podman exec ...
// pxeperf report, 2: podman healthcheck run) on this container inside the
// test's namespace, extra after it, and returns its combined output.
func (c *container) readmeLine(i int, extra ...string) ([]byte, error) {
	args := strings.Fields(strings.Replace(strings.TrimPrefix(c.run[i], "podman "), "pxeperf", c.name, 1))
	return c.in(append(args, extra...)...).CombinedOutput()
}

// readmeBlock returns the commands of the code block in README.md's "In a
// container" section that contains want, continuation lines joined.
func readmeBlock(t *testing.T, root, want string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## In a container\n")
	if !ok {
		t.Fatal(`README.md has no "## In a container" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var blocks [][]string
	var cur []string
	cont := false
	for _, l := range strings.Split(sec, "\n") {
		code, isCode := strings.CutPrefix(l, "    ")
		if !isCode {
			if len(cur) > 0 {
				blocks = append(blocks, cur)
			}
			cur, cont = nil, false
			continue
		}
		code = strings.TrimSpace(code)
		if cont {
			cur[len(cur)-1] += " " + code
		} else {
			cur = append(cur, code)
		}
		cont = strings.HasSuffix(code, "\\")
		if cont {
			cur[len(cur)-1] = strings.TrimSpace(strings.TrimSuffix(cur[len(cur)-1], "\\"))
		}
	}
	if len(cur) > 0 {
		blocks = append(blocks, cur)
	}
	for _, bl := range blocks {
		if strings.Contains(strings.Join(bl, "\n"), want) {
			return bl
		}
	}
	t.Fatalf("README's In a container section has no code block with %q", want)
	return nil
}

// sharedDir is a temporary folder the container's user can reach (t.TempDir
// is 0700 under a 0700 parent).
func sharedDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("", "pxeperf-container-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
