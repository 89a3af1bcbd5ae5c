//go:build linux

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/uboot"
	"github.com/pxeperf/pxeperf/measure"
)

// ubootPeerRounds compares pxeperf's lock-step TFTP (blksize 1468, no
// window) with atftpd's from the same U-Boot, in alternating rounds: atftpd
// listens on port 69 of a second address of the server's interface (this
// U-Boot build has no tftpdstp, so the peer cannot be on another port) and
// U-Boot fetches with `tftpboot ADDR IP:FILE`. It runs only when
// PXEPERF_UBOOT_PEERS is set to the number of rounds, e.g.
//
//	PXEPERF_BENCH=1 PXEPERF_UBOOT_PEERS=3 go test -run 'TestUBoot/arm64' -v ./e2e
//
// and needs atftpd (PXEPERF_ATFTPD, else /tmp/atftpd-root/usr/sbin/atftpd:
// cd /tmp && apt-get download atftpd && dpkg -x atftpd_*.deb /tmp/atftpd-root).
// It returns a table, "" when not asked. bench/peers TestPeers measures the
// same row (PXEPERF_BENCH_ONLY=uboot) beside in.tftpd, with server CPU.
func ubootPeerRounds(t *testing.T, c *uboot.Console, p *nstest.Pair, root, img string, size int64) string {
	rounds, _ := strconv.Atoi(os.Getenv("PXEPERF_UBOOT_PEERS"))
	if rounds <= 0 {
		return ""
	}
	atftpd := os.Getenv("PXEPERF_ATFTPD")
	if atftpd == "" {
		atftpd = "/tmp/atftpd-root/usr/sbin/atftpd"
	}
	if _, err := os.Stat(atftpd); err != nil {
		t.Logf("U-Boot peer rounds skipped: no atftpd at %s (set PXEPERF_ATFTPD, or: cd /tmp && apt-get download atftpd && dpkg -x atftpd_*.deb /tmp/atftpd-root)", atftpd)
		return ""
	}
	a := p.ServerIP.As4()
	a[3]++
	peerIP := netip.AddrFrom4(a)
	nstest.Run(t, p.Server, "ip", "addr", "add", peerIP.String()+"/24", "dev", p.ServerIf)
	nstest.Start(t, p.Server, atftpd, "--daemon", "--no-fork", "--user", "root", "--group", "root",
		"--port", "69", "--bind-address", peerIP.String(), "--logfile", "/dev/null", root)
	c.Run("setenv tftpblocksize 1468; setenv tftpwindowsize 1", 10*time.Second)
	servers := []struct{ name, ip string }{{"pxeperf", p.ServerIP.String()}, {"atftpd", peerIP.String()}}
	mbps := map[string][]float64{}
	for range rounds {
		for _, s := range servers {
			f := c.TFTPBoot(s.ip+":"+img, size, 5*time.Minute)
			mbps[s.name] = append(mbps[s.name], float64(size)*8/f.Wall.Seconds()/1e6)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "U-Boot lock-step 1468x1, %d MiB, tftpboot wall time, %d alternating rounds:\n", size>>20, rounds)
	for _, s := range servers {
		v := mbps[s.name]
		fmt.Fprintf(&b, "  %-8s median %.1f Mbit/s, rounds %s\n", s.name, measure.Median(v), fmtMbps(v))
	}
	return b.String()
}

func fmtMbps(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(s, " ")
}
