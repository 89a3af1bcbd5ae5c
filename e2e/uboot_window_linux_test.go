//go:build linux

package e2e

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
)

// ubootWindowImageSize keeps the TCG guest's one transfer within a minute.
const ubootWindowImageSize = 4 << 20

// TestUBootWindowCap: Debian's U-Boot arm64 on virtio-net (virtio-mmio,
// which reads the MAC right), the NIC whose driver hangs at windowsize 32
// and over, sets tftpwindowsize 32 and fetches an image from `pxeperf
// serve --dhcp full`. pxeperf knows it is U-Boot from option 60 and agrees
// 16 (tftp.uboot_max_windowsize's default): the transfer finishes, U-Boot's
// own crc32 matches the file's, the fetch pxeperf logs says windowsize 16
// and a log line says it was capped from 32.
func TestUBootWindowCap(t *testing.T) {
	b := arm64Board(t)
	b.NIC = "virtio-net-device"
	bin := nstest.Binary(t)
	p, _, tap := nstest.GuestLAN(t)
	const img = "img4m"
	var wantCRC uint32
	srv := serveGuestLAN(t, p, fullDHCP(p), "  []", func(root string) {
		nstest.Run(t, "", bin, "images", "generate", img, "--size", fmt.Sprint(ubootWindowImageSize), "--root", root)
		data, err := os.ReadFile(filepath.Join(root, img))
		if err != nil || len(data) != ubootWindowImageSize {
			t.Fatalf("images generate: %v, %d bytes", err, len(data))
		}
		wantCRC = crc32.ChecksumIEEE(data)
	})

	c := uboot.Boot(t, b, "arm64 virtio-net", p.Client, tap, srv.Out.String)
	c.StopAutoboot(90 * time.Second)
	// Not c.Env: its ethact names the board's e1000; virtio-net is the only NIC.
	for _, cmd := range []string{"setenv autoload no", "setenv ethrotate no", "setenv netretry no", "setenv serverip"} {
		c.Run(cmd, 10*time.Second)
	}
	if out := c.Run("dhcp", 60*time.Second); !strings.Contains(out, "DHCP client bound to address") {
		c.Fatalf("dhcp over virtio-net did not bind:\n%s", out)
	}
	if !strings.Contains(c.Console(), "virtio-net#") {
		c.Fatalf("U-Boot named no virtio-net device: the test would not try the NIC that hangs")
	}
	c.Run("setenv tftpblocksize 1468; setenv tftpwindowsize 32", 10*time.Second)
	tf := c.TFTPBoot(img, ubootWindowImageSize, 3*time.Minute)
	c.CheckCRC32(wantCRC, "windowsize 32 asked")

	fe := waitFetch(t, srv.Proc, img, func(map[string]string) bool { return true })
	if fe == nil {
		c.Fatalf("pxeperf logged no completed fetch of %s:\n%s", img, nstest.Tail(srv.Out.String(), 20))
	}
	if fe["windowsize"] != "16" || fe["blksize"] != "1468" {
		t.Errorf("pxeperf's fetch of %s: windowsize %q blksize %q, want 16 and 1468", img, fe["windowsize"], fe["blksize"])
	}
	var capped string
	for _, l := range strings.Split(srv.Out.String(), "\n") {
		if strings.Contains(l, "windowsize capped for U-Boot") {
			capped = l
		}
	}
	if !strings.Contains(capped, "asked=32") || !strings.Contains(capped, "windowsize=16") {
		t.Errorf("pxeperf's log has no cap line with asked=32 windowsize=16: %q", capped)
	}
	t.Logf("arm64 virtio-net asked windowsize 32, got %s: %d bytes, crc32 %08x ok, tftpboot %s, U-Boot says %s; pxeperf %s Mbit/s",
		fe["windowsize"], ubootWindowImageSize, wantCRC, tf.Wall.Round(time.Millisecond), tf.Rate, fe["mbps"])
}
