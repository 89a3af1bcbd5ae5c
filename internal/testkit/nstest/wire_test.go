//go:build linux

package nstest

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWireTimesTFTP times a real lock-step transfer (curl from in.tftpd,
// blksize 1468) through a 20 Mbit/s tbf with a capture on the server's
// veth, among decoys: another file before, a missing one after, and idle
// time on both sides inside the capture. The span must be the transfer's
// own: its datagrams and bytes are the file's, it lies within curl's run,
// and it cannot be shorter than the tbf lets the file's frames through (a
// span that ended at an earlier ACK, or started at a later datagram, would
// be; one that took in the idle time or the decoys would leave curl's run).
func TestWireTimesTFTP(t *testing.T) {
	RequireRoot(t)
	RequireTool(t, "in.tftpd", "curl", "tc")
	p := NewPair(t, Options{})
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // in.tftpd drops to nobody
		t.Fatal(err)
	}
	const size, decoy, blk = 4 << 20, 256 << 10, 1468
	RandomFile(t, filepath.Join(root, "img.bin"), size, 3)
	RandomFile(t, filepath.Join(root, "decoy.bin"), decoy, 4)
	ip := p.ServerIP.String()
	Start(t, p.Server, "in.tftpd", "-L", "-s", root, "-a", ip+":69")
	out := filepath.Join(t.TempDir(), "got")
	get := func(file string) error {
		_, err := Output(p.Client, time.Minute, "curl", "-sS", "-o", out, "--tftp-blksize", "1468", "tftp://"+ip+"/"+file)
		return err
	}
	if !WaitFor(10*time.Second, func() bool { return get("decoy.bin") == nil }) {
		t.Fatal("in.tftpd does not serve")
	}
	const rate = 20e6 // bit/s
	Run(t, p.Server, "tc", "qdisc", "replace", "dev", p.ServerIf, "root", "tbf", "rate", "20mbit", "burst", "16kb", "latency", "100ms")

	w := StartWire(t, p.Server, p.ServerIf)
	if err := get("decoy.bin"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	if err := get("img.bin"); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	time.Sleep(300 * time.Millisecond)
	_ = get("missing.bin")
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}

	server := netip.AddrPortFrom(p.ServerIP, 69)
	s, err := w.TFTPOne(p.ClientIP, server, "img.bin")
	if err != nil {
		t.Fatal(err)
	}
	blocks := size/blk + 1
	if s.Blksize != blk || s.Datagrams != blocks || s.Bytes != size || s.LastBlock != uint16(blocks) {
		t.Errorf("span has blksize %d, %d datagrams, %d bytes, last block %d; want %d, %d, %d, %d",
			s.Blksize, s.Datagrams, s.Bytes, s.LastBlock, blk, blocks, size, blocks)
	}
	if s.Client.Addr() != p.ClientIP || s.Server.Addr() != p.ServerIP || s.Server.Port() == 69 {
		t.Errorf("span from %v to %v, want the client's TID and the server's transfer port", s.Server, s.Client)
	}
	if s.RRQ.Before(t0) || s.ACK.After(t1) {
		t.Errorf("span %s..%s lies outside curl's run %s..%s", s.RRQ.Format(time.StampMicro), s.ACK.Format(time.StampMicro),
			t0.Format(time.StampMicro), t1.Format(time.StampMicro))
	}
	// Every DATA frame (payload + TFTP, UDP, IP and Ethernet headers)
	// passes the tbf: the span holds them all, less the bucket's 16 KiB.
	wire := float64(size + blocks*(4+8+20+14))
	least := time.Duration((wire - 16<<10) * 8 / rate * float64(time.Second))
	if s.Duration() < least {
		t.Errorf("span %s, shorter than the %s the tbf needs for the file", s.Duration(), least)
	}
	// The capture sees a frame as it leaves the tbf, so the bucket's
	// pacing (~600 us a frame at 20 Mbit/s) falls in the server's time;
	// curl answers each block in tens of microseconds.
	if s.ServerTime+s.ClientTime != s.Duration() || s.ServerTime <= s.ClientTime || s.ClientTime <= 0 ||
		s.First <= 0 || s.First > s.ServerTime {
		t.Errorf("span %s split into server %s (first reply after %s) and client %s; want the two to add up, the server's the larger",
			s.Duration(), s.ServerTime, s.First, s.ClientTime)
	}
	t.Logf("span %s (%.1f Mbit/s; server %s, first reply after %s; client %s), curl's run %s",
		s.Duration(), s.Mbps(size), s.ServerTime, s.First, s.ClientTime, t1.Sub(t0))

	if d, err := w.TFTPOne(p.ClientIP, server, "decoy.bin"); err != nil || d.Bytes != decoy {
		t.Errorf("decoy: %+v, %v; want one transfer of %d bytes", d, err, decoy)
	}
	if m, err := w.TFTP(p.ClientIP, server, "missing.bin"); err != nil || len(m) != 0 {
		t.Errorf("missing file: %d transfers, %v; want none", len(m), err)
	}
}
