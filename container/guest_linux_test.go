package container

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// guestMAC is the QEMU guest's; it reports its verdict through
// isa-debug-exit (nstest.GuestOK, as e2e's guests).
const guestMAC = "52:54:00:e2:c0:01"

// TestImageBootsQEMUGuest boots a QEMU SeaBIOS guest, its e1000 iPXE ROM
// (Debian's ipxe-qemu), from the image run as the README runs it with a
// config mounted at /etc/pxeperf/pxeperf.yaml: DHCP from the container, the
// host entry's iPXE script over HTTP, a 16 MiB image fetched by the guest,
// then an exit image that ends QEMU with guestOK. pxeperf report in the
// container shows the guest's fetch of the whole image.
func TestImageBootsQEMUGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("a QEMU guest takes about a minute; skipped with -short")
	}
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "podman", "runc", "nsenter", "qemu-system-x86_64", "go")
	if _, err := os.Stat("/usr/lib/ipxe/qemu/efi-e1000.rom"); err != nil {
		t.Skip("needs Debian's ipxe-qemu (the e1000 iPXE ROM): apt-get install ipxe-qemu")
	}
	root := buildImage(t)
	caps := imageCaps(t, root)
	p, _, tap := nstest.GuestLAN(t)
	images, data, etc := sharedDir(t, 0o755), sharedDir(t, 0o755), sharedDir(t, 0o755)
	if err := os.Chown(data, uid, uid); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"exit-ok.0": nstest.ExitCode(nstest.GuestOK), "exit-fail.0": nstest.ExitCode(nstest.GuestFail)} {
		if err := os.WriteFile(filepath.Join(images, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nstest.RandomFile(t, filepath.Join(images, "img16"), 16<<20, 7)
	if err := os.Chmod(filepath.Join(images, "img16"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `hosts:
  - mac: ` + guestMAC + `
    name: container-guest
    script: |
      #!ipxe
      echo pxeperf-container: ${net0/mac} ${net0/ip}
      imgfetch {{.ImageURL}}/img16 || goto fail
      echo PXEPERF-IMGFETCH-OK
      chain {{.ImageURL}}/exit-ok.0
      :fail
      chain {{.ImageURL}}/exit-fail.0
`
	if err := os.WriteFile(filepath.Join(etc, "pxeperf.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startContainer(t, root, p, images, data, caps, etc+":/etc/pxeperf:ro -v ")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	status, console, took, err := nstest.X86Guest{NS: p.Client, Tap: tap, Memory: "256",
		Args: []string{"-device", "e1000,netdev=n0,mac=" + guestMAC}}.Run(ctx)
	t.Logf("QEMU exit status %d after %s", status, took.Round(time.Second))
	if status != nstest.QEMUStatus(nstest.GuestOK) {
		t.Fatalf("guest did not report success (QEMU status %d, want %d; %d = fetch failed; err %v)\nguest console (tail):\n%s",
			status, nstest.QEMUStatus(nstest.GuestOK), nstest.QEMUStatus(nstest.GuestFail), err, nstest.Tail(console, 30))
	}
	if !strings.Contains(console, "PXEPERF-IMGFETCH-OK") {
		t.Errorf("guest console lacks the imgfetch marker:\n%s", nstest.Tail(console, 20))
	}
	out, err := c.readmeLine(1, "--table", "fetches")
	t.Logf("podman exec pxeperf report --table fetches:\n%s", out)
	if err != nil || !regexp.MustCompile(`(?m)^.*`+guestMAC+`.*http\s+img16\s+image\s+16777216\s.*ok\s*$`).Match(out) {
		t.Errorf("report: %v; no complete HTTP fetch of img16 (16777216 bytes) by %s", err, guestMAC)
	}
}
