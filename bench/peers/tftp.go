//go:build linux

package peers

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/netlab"
)

// AtftpdPath finds atftpd, which is not installed with the other tools
// (its Debian package conflicts with tftpd-hpa): PXEPERF_ATFTPD, else the
// binary unpacked from the package without installing it:
//
//	cd /tmp && apt-get download atftpd && dpkg -x atftpd_*.deb /tmp/atftpd-root
func AtftpdPath() string {
	for _, p := range []string{os.Getenv("PXEPERF_ATFTPD"), "/tmp/atftpd-root/usr/sbin/atftpd"} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// AtftpdHint is the skip message when AtftpdPath finds nothing.
const AtftpdHint = "atftpd not found: set PXEPERF_ATFTPD, or: cd /tmp && apt-get download atftpd && dpkg -x atftpd_*.deb /tmp/atftpd-root"

// TFTPServer is a TFTP server under test and the address and port it
// listens on.
type TFTPServer struct {
	*Server
	IP, Port string
}

// StartTFTP starts one of "pxeperf" (bin), "atftpd" or "in.tftpd" on
// p.ServerIP:port in p.Server serving root, waits until it answers (from
// p.Client), and returns it. yaml, when not empty, is a pxeperf config
// file's text.
func StartTFTP(t testing.TB, p *nstest.Pair, kind, bin, root, port, yaml string) *TFTPServer {
	t.Helper()
	return StartTFTPAt(t, p, p.ServerIP.String(), kind, bin, root, port, yaml)
}

// StartTFTPAt is StartTFTP on ip, an address of p.ServerIf, which the
// client namespace must reach for the readiness probe.
func StartTFTPAt(t testing.TB, p *nstest.Pair, ip, kind, bin, root, port, yaml string) *TFTPServer {
	t.Helper()
	var s *Server
	switch kind {
	case "pxeperf":
		data := t.TempDir()
		args := []string{"serve", "--admin-addr", "off", "--dhcp", "off", "--http-addr", "off", "--tftp-addr", ip + ":" + port,
			"--root", root, "--data", data, "--iface", p.ServerIf, "--log-level", LogLevel()}
		if yaml != "" {
			cfg := filepath.Join(data, "c.yaml")
			if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--config", cfg)
		}
		s = Start(t, p.Server, kind, bin, args...)
	case "atftpd":
		atftpd := AtftpdPath()
		if atftpd == "" {
			t.Skip(AtftpdHint)
		}
		s = Start(t, p.Server, kind, atftpd, "--daemon", "--no-fork", "--user", "root", "--group", "root",
			"--port", port, "--bind-address", ip, "--logfile", "-", "--verbose=3", root)
	case "in.tftpd":
		s = Start(t, p.Server, kind, "in.tftpd", "-L", "-s", root, "-a", ip+":"+port)
	default:
		t.Fatalf("peers: no TFTP server %q (want pxeperf, atftpd or in.tftpd)", kind)
	}
	// Ready when it answers a missing-file request.
	if !nstest.WaitFor(20*time.Second, func() bool {
		o, _ := nstest.Output(p.Client, 5*time.Second, "atftp", "-g", "-r", "none", "-l", "/dev/null", ip, port)
		return strings.Contains(strings.ToLower(o), "not found")
	}) {
		t.Fatalf("%s on port %s did not come up:\n%s", kind, port, s.Proc.Out.String())
	}
	return &TFTPServer{Server: s, IP: ip, Port: port}
}

// TFTPGet is one fetch: the client ("curl", "atftp" or "tftp-hpa"), block
// size and window size (0 and 1 both mean lock-step; curl has no window
// option). tftp-hpa is the `tftp` command of Debian's tftp-hpa, which sends
// no options (RFC 1350 as it is): blksize 512 and lock-step only.
type TFTPGet struct {
	Client           string
	Blksize, Windows int
}

// TFTPRun is one fetch's figures.
type TFTPRun struct {
	Mbps      float64 // file bits over the client's wall time
	CPUPerGiB float64 // server CPU seconds per GiB sent
}

// FetchTFTP fetches file (size bytes) from s with g's client in the client
// namespace, checks the size, and returns throughput and server CPU.
func FetchTFTP(t testing.TB, p *nstest.Pair, s *TFTPServer, g TFTPGet, file string, size int64) TFTPRun {
	t.Helper()
	ip := s.IP
	out := filepath.Join(t.TempDir(), "got.bin")
	var prog string
	var args []string
	switch g.Client {
	case "curl":
		prog = "curl"
		args = []string{"-sS", "-o", out, "--tftp-blksize", strconv.Itoa(g.Blksize),
			fmt.Sprintf("tftp://%s:%s/%s", ip, s.Port, file)}
	case "atftp":
		prog = "atftp"
		args = []string{"--option", fmt.Sprintf("blksize %d", g.Blksize), "--option", "tsize 0"}
		if g.Windows > 1 {
			args = append(args, "--option", fmt.Sprintf("windowsize %d", g.Windows))
		}
		args = append(args, "-g", "-r", file, "-l", out, ip, s.Port)
	case "tftp-hpa":
		if g.Blksize != 512 || g.Windows > 1 {
			t.Fatalf("peers: tftp-hpa sends no options, so it fetches at blksize 512 in lock-step only (asked for %dx%d): "+
				"use Blksize 512 and Windows 0, or curl or atftp for other sizes", g.Blksize, g.Windows)
		}
		prog = "tftp"
		args = []string{"-m", "binary", ip, s.Port, "-c", "get", file, out}
	default:
		t.Fatalf("peers: no TFTP client %q (want curl, atftp or tftp-hpa)", g.Client)
	}
	cpu0 := s.CPU(t)
	start := time.Now()
	if o, err := nstest.Output(p.Client, 10*time.Minute, prog, args...); err != nil {
		t.Fatalf("%s: %s %s: %v\n%s", s.Name, prog, strings.Join(args, " "), err, o)
	}
	wall := time.Since(start).Seconds()
	cpu := s.CPU(t) - cpu0
	fi, err := os.Stat(out)
	if err != nil || fi.Size() != size {
		t.Fatalf("%s: %s fetched a wrong file (%v, %d of %d bytes)", s.Name, prog, err, fileSize(fi), size)
	}
	return TFTPRun{Mbps: float64(size) * 8 / wall / 1e6, CPUPerGiB: cpu / (float64(size) / (1 << 30))}
}

func fileSize(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// ShapeBoth puts (on) or takes off a 1 Gbit/s tbf on both veth ends of p,
// through netlab's Testbed.SetRate (its sizing: see netlab/tbf.go), as
// `pxeperf bench` shapes streams.
func ShapeBoth(t testing.TB, p *nstest.Pair, on bool) {
	t.Helper()
	for _, side := range []netlab.Side{netlab.Server, netlab.Client} {
		Shape(t, p, side, on)
	}
}

// Shape puts (on) or takes off a 1 Gbit/s tbf on one veth end of p
// (netlab.Server: what the client receives).
func Shape(t testing.TB, p *nstest.Pair, side netlab.Side, on bool) {
	t.Helper()
	var err error
	if on {
		_, err = p.Testbed.SetRate(side, 1e9)
	} else {
		err = p.Testbed.ClearRate(side)
	}
	if err != nil {
		t.Fatal(err)
	}
}
