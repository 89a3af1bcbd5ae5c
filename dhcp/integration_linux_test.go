//go:build linux

package dhcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

// poolFor returns "PREFIX.first-PREFIX.last" in the pair's /24.
func poolFor(p *nstest.Pair, first, last int) string {
	b := p.Prefix.Addr().As4()
	return fmt.Sprintf("%d.%d.%d.%d-%d.%d.%d.%d", b[0], b[1], b[2], first, b[0], b[1], b[2], last)
}

func nthAddr(p *nstest.Pair, n int) string {
	b := p.Prefix.Addr().As4()
	return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], n)
}

// startServe runs the real pxeperf binary in full mode in the server
// namespace and waits until it serves.
func startServe(t *testing.T, p *nstest.Pair, bin, data, root, pool string) *nstest.Proc {
	t.Helper()
	proc := nstest.Start(t, p.Server, bin, "serve", "--dhcp", "full", "--pool", pool, "--iface", p.ServerIf,
		"--addr", p.ServerIP.String(), "--root", root, "--data", data, "--http-addr", "off", "--tftp-addr", "off",
		"--log-level", "debug")
	if !nstest.WaitFor(20*time.Second, func() bool { return strings.Contains(proc.Out.String(), "pxeperf serving") }) {
		t.Fatalf("pxeperf serve did not start:\n%s", proc.Out.String())
	}
	return proc
}

func setMAC(t *testing.T, p *nstest.Pair, mac string) {
	t.Helper()
	nstest.Run(t, p.Client, "ip", "link", "set", "dev", p.ClientIf, "address", mac)
}

// udhcpc gets a lease with busybox udhcpc and returns the address.
func udhcpc(t *testing.T, p *nstest.Pair, extra ...string) (string, error) {
	t.Helper()
	env, err := udhcpcEnv(t, p, extra...)
	return env["ip"], err
}

// udhcpcEnv gets a lease with busybox udhcpc and returns the environment
// its script was run with when bound: ip, and an entry per option it
// received (rootpath, ntpsrv, hostname, opt224 in hex...).
func udhcpcEnv(t *testing.T, p *nstest.Pair, extra ...string) (map[string]string, error) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	script := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && env -0 > "+out+"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"udhcpc", "-n", "-q", "-f", "-i", p.ClientIf, "-s", script, "-t", "4", "-T", "1", "-A", "1"}, extra...)
	log, err := nstest.Output(p.Client, 30*time.Second, "busybox", args...)
	if err != nil {
		return nil, fmt.Errorf("udhcpc: %v\n%s", err, log)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("udhcpc bound no address: %v\n%s", err, log)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

var fixedAddrRE = regexp.MustCompile(`fixed-address ([0-9.]+);`)

// dhclient gets a lease with ISC dhclient (lease file lf, kept by the caller
// to test INIT-REBOOT) and returns the address.
func dhclient(t *testing.T, p *nstest.Pair, lf string, conf string) string {
	t.Helper()
	dir := t.TempDir()
	cf := filepath.Join(dir, "dhclient.conf")
	if err := os.WriteFile(cf, []byte("timeout 20;\nretry 1;\n"+conf), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(lf)
	proc := nstest.Start(t, p.Client, "dhclient", "-4", "-1", "-d", "-v", "-cf", cf, "-lf", lf,
		"-pf", filepath.Join(dir, "pid"), "-sf", "/bin/true", p.ClientIf)
	defer proc.Kill()
	var addr string
	ok := nstest.WaitFor(25*time.Second, func() bool {
		b, _ := os.ReadFile(lf)
		if len(b) <= len(before) {
			return false
		}
		m := fixedAddrRE.FindAllStringSubmatch(string(b[len(before):]), -1)
		if len(m) == 0 || !strings.Contains(string(b[len(before):]), "}") {
			return false
		}
		addr = m[len(m)-1][1]
		return true
	})
	if !ok {
		t.Fatalf("dhclient got no lease:\n%s", proc.Out.String())
	}
	return addr
}

// TestClientsKeepAddressAcrossKill: udhcpc and dhclient get leases from the
// real binary; pxeperf is SIGKILLed and restarted; each client, asking
// again in the opposite order without any memory of its own, gets the same
// address back. Without the journal the first to ask would get the first
// pool address.
func TestClientsKeepAddressAcrossKill(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "busybox", "dhclient")
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	bin := nstest.Binary(t)
	data, root := t.TempDir(), t.TempDir()
	pool := poolFor(p, 100, 120)
	const macU, macD = "02:00:00:aa:00:01", "02:00:00:aa:00:02"

	srv := startServe(t, p, bin, data, root, pool)
	setMAC(t, p, macU)
	ipU, err := udhcpc(t, p)
	if err != nil {
		t.Fatal(err)
	}
	setMAC(t, p, macD)
	lf := filepath.Join(t.TempDir(), "dhclient.leases")
	ipD := dhclient(t, p, lf, "")
	if ipU != nthAddr(p, 100) || ipD != nthAddr(p, 101) {
		t.Fatalf("first round: udhcpc %s, dhclient %s; want %s and %s", ipU, ipD, nthAddr(p, 100), nthAddr(p, 101))
	}
	if !strings.Contains(srv.Out.String(), "msg=lease ") {
		t.Errorf("no lease event logged:\n%s", srv.Out.String())
	}

	srv.Kill() // SIGKILL: no chance to flush anything
	startServe(t, p, bin, data, root, pool)

	// dhclient first, with a fresh lease file: a plain DISCOVER.
	if got := dhclient(t, p, filepath.Join(t.TempDir(), "fresh.leases"), ""); got != ipD {
		t.Errorf("after kill -9, dhclient (DISCOVER) got %s, want its old %s", got, ipD)
	}
	// dhclient with its old lease file: INIT-REBOOT, REQUEST for the old address.
	if got := dhclient(t, p, lf, ""); got != ipD {
		t.Errorf("after kill -9, dhclient (INIT-REBOOT) got %s, want %s", got, ipD)
	}
	setMAC(t, p, macU)
	got, err := udhcpc(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if got != ipU {
		t.Errorf("after kill -9, udhcpc got %s, want its old %s", got, ipU)
	}
	b, err := os.ReadFile(filepath.Join(data, JournalName))
	if err != nil || !strings.Contains(string(b), macU) || !strings.Contains(string(b), macD) {
		t.Errorf("lease journal %s: %v\n%s", JournalName, err, b)
	}
}

// startInProcess runs a Server inside the server namespace of p.
func startInProcess(t testing.TB, p *nstest.Pair, mode string, mut func(*configs.Config)) *Server {
	t.Helper()
	cfg := configs.Default()
	cfg.DHCP.Mode = mode
	cfg.Data = t.TempDir()
	cfg.HTTP.Listen = ":8080"
	if mut != nil {
		mut(cfg)
	}
	var s *Server
	err := nstest.Do(p.Server, func() (err error) {
		s, err = New(context.Background(), Options{Config: cfg, Iface: p.ServerIf, Addr: p.ServerIP, Prefix: p.Prefix,
			Hosts: hosts.New(cfg.Hosts), Workers: 2})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "dhcp", 30*time.Second, s.Serve)
	return s
}

// broadcast67 is where a client without an address sends its requests.
var broadcast67 = netip.MustParseAddrPort("255.255.255.255:67")

// startFullMode runs a full-mode Server in a new pair, its pool .50 to
// .last of the pair's /24, and opens the client's socket on port 68.
func startFullMode(t testing.TB, last int) (*nstest.Pair, *Server, *net.UDPConn) {
	t.Helper()
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	s := startInProcess(t, p, configs.ModeFull, func(c *configs.Config) {
		c.DHCP.Pool, _ = configs.ParsePool(poolFor(p, 50, last))
	})
	return p, s, clientConn(t, p, ClientPort)
}

// mustOffer4 broadcasts disc and returns the OFFER, or fails the test with
// the server's counts.
func mustOffer4(t *testing.T, s *Server, c *net.UDPConn, disc *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	offer := exchange(t, c, disc, broadcast67)
	if offer == nil {
		t.Fatalf("%v: no OFFER; stats %+v", disc.ClientHWAddr, s.Stats())
	}
	return offer
}

// clientConn opens a UDP socket inside the client namespace.
func clientConn(t testing.TB, p *nstest.Pair, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := nstest.Do(p.Client, func() error {
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = setSockOpts(int(fd), p.ClientIf) }); err != nil {
				return err
			}
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", port))
		if err != nil {
			return err
		}
		c = pc.(*net.UDPConn)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends req to dst up to 3 times and returns the first reply with
// req's transaction ID.
func exchange(t *testing.T, c *net.UDPConn, req *dhcpv4.DHCPv4, dst netip.AddrPort) *dhcpv4.DHCPv4 {
	t.Helper()
	buf := make([]byte, 1500)
	for try := 0; try < 3; try++ {
		if _, err := c.WriteToUDPAddrPort(req.ToBytes(), dst); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Second)
		for {
			c.SetReadDeadline(deadline)
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				break
			}
			r, err := dhcpv4.FromBytes(buf[:n])
			if err == nil && r.OpCode == dhcpv4.OpcodeBootReply && r.TransactionID == req.TransactionID {
				return r
			}
		}
	}
	return nil
}

// TestProxyModeRealClients: proxy mode stays silent to busybox udhcpc (no
// PXE vendor class) and answers a PXE DISCOVER on 67 and a REQUEST on 4011.
func TestProxyModeRealClients(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "busybox")
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	s := startInProcess(t, p, configs.ModeProxy, nil)

	if ip, err := udhcpc(t, p, "-t", "3"); err == nil {
		t.Fatalf("proxy mode gave plain udhcpc an address %s", ip)
	}
	if st := s.Stats(); st.Offers != 0 || st.Ignored == 0 {
		t.Fatalf("after plain udhcpc: stats %+v, want no offers and some ignored", st)
	}

	c := clientConn(t, p, ClientPort)
	hw, _ := net.ParseMAC("02:00:00:bb:00:01")
	disc, err := dhcpv4.NewDiscovery(hw, pxeVendor, biosArch)
	if err != nil {
		t.Fatal(err)
	}
	offer := exchange(t, c, disc, netip.MustParseAddrPort("255.255.255.255:67"))
	if offer == nil {
		t.Fatalf("no proxy OFFER to a PXE DISCOVER; stats %+v", s.Stats())
	}
	got := fmt.Sprintf("%s yiaddr=%s siaddr=%s file=%s 60=%s 43=%x", offer.MessageType(), offer.YourIPAddr, offer.ServerIPAddr,
		offer.BootFileName, offer.ClassIdentifier(), offer.Options.Get(dhcpv4.OptionVendorSpecificInformation))
	want := fmt.Sprintf("OFFER yiaddr=0.0.0.0 siaddr=%s file=undionly.kpxe 60=PXEClient 43=060108ff", p.ServerIP)
	if got != want {
		t.Errorf("proxy OFFER:\n got %s\nwant %s", got, want)
	}

	// With an address (from the "real" DHCP server), the ROM asks port 4011.
	nstest.Run(t, p.Client, "ip", "addr", "add", p.ClientIP.String()+"/24", "dev", p.ClientIf)
	c2 := clientConn(t, p, 0)
	req, err := dhcpv4.New(dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), pxeVendor,
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optClientArch), []byte{0, 7}), dhcpv4.WithClientIP(net.IP(p.ClientIP.AsSlice())))
	if err != nil {
		t.Fatal(err)
	}
	ack := exchange(t, c2, req, netip.AddrPortFrom(p.ServerIP, 4011))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || ack.BootFileName != "ipxe.efi" {
		t.Fatalf("port 4011 REQUEST: reply %v, want ACK with ipxe.efi", ack)
	}
}

// TestFullModePXEClientInProcess: a crafted iPXE DISCOVER/REQUEST over real
// sockets gets the script URL and option 175.
func TestFullModePXEClientInProcess(t *testing.T) {
	p, s, c := startFullMode(t, 60)
	hw, _ := net.ParseMAC("02:00:00:cc:00:01")
	disc, _ := dhcpv4.NewDiscovery(hw, pxeVendor, biosArch, ipxeUC)
	offer := mustOffer4(t, s, c, disc)
	req, _ := dhcpv4.NewRequestFromOffer(offer, pxeVendor, biosArch, ipxeUC)
	ack := exchange(t, c, req, broadcast67)
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("no ACK: %v", ack)
	}
	wantURL := "http://" + p.ServerIP.String() + ":8080/boot.ipxe?mac=${net0/mac}"
	if ack.YourIPAddr.String() != nthAddr(p, 50) || ack.BootFileName != wantURL ||
		string(ack.Options.Get(dhcpv4.GenericOptionCode(optIPXEEncap))) != "\xb0\x01\x01" {
		t.Errorf("ACK: yiaddr %s file %q 175=%x; want %s %q b00101", ack.YourIPAddr, ack.BootFileName,
			ack.Options.Get(dhcpv4.GenericOptionCode(optIPXEEncap)), nthAddr(p, 50), wantURL)
	}
	if l := s.Leases(); len(l) != 1 || l[0].MAC.String() != hw.String() {
		t.Errorf("leases = %+v", l)
	}
}

// TestSockBatchesAcksAfterFsync: an ACK leaves only once its lease's
// journal write has returned, and REQUESTs that arrive while one write is
// under way share the next one (serveSock's batch): 1 + 15 REQUESTs, two
// flushes, 16 ACKs.
func TestSockBatchesAcksAfterFsync(t *testing.T) {
	_, s, c := startFullMode(t, 80)
	const n = 16
	var reqs []*dhcpv4.DHCPv4
	for i := range n {
		hw := net.HardwareAddr{2, 0, 0, 0xbb, 0, byte(i + 1)}
		disc, _ := dhcpv4.NewDiscovery(hw)
		req, _ := dhcpv4.NewRequestFromOffer(mustOffer4(t, s, c, disc))
		reqs = append(reqs, req)
	}

	entered, release := make(chan struct{}, 4), make(chan struct{})
	hook := func() {
		entered <- struct{}{}
		<-release
	}
	testHookSync.Store(&hook)
	t.Cleanup(func() { testHookSync.Store(nil) })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	flushes0 := s.Stats().JournalFlushes

	send := func(r *dhcpv4.DHCPv4) {
		if _, err := c.WriteToUDPAddrPort(r.ToBytes(), broadcast67); err != nil {
			t.Fatal(err)
		}
	}
	send(reqs[0])
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the first REQUEST's lease write never started")
	}
	for _, r := range reqs[1:] {
		send(r)
	}
	// Nothing may be ACKed while the write is held.
	buf := make([]byte, 1500)
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		m, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		if r, err := dhcpv4.FromBytes(buf[:m]); err == nil && r.MessageType() == dhcpv4.MessageTypeAck {
			t.Fatalf("an ACK (%s) left before its lease was written", r.YourIPAddr)
		}
	}
	testHookSync.Store(nil) // the next write is not held
	close(release)
	released = true

	acked := map[dhcpv4.TransactionID]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(acked) < n && time.Now().Before(deadline) {
		c.SetReadDeadline(deadline)
		m, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		if r, err := dhcpv4.FromBytes(buf[:m]); err == nil && r.MessageType() == dhcpv4.MessageTypeAck {
			acked[r.TransactionID] = true
		}
	}
	if len(acked) != n {
		t.Fatalf("%d ACKs of %d; stats %+v", len(acked), n, s.Stats())
	}
	if got := s.Stats().JournalFlushes - flushes0; got != 2 {
		t.Errorf("%d journal flushes for the %d ACKs, want 2 (the held one, then one for the %d that came meanwhile)", got, n, n-1)
	}
	if l := s.Leases(); len(l) != n {
		t.Errorf("%d leases, want %d", len(l), n)
	}
}

// BenchmarkSockExchange is DHCP exchanges through the server's socket
// thread (serveSock) over a veth pair: "offer" a DISCOVER answered at once,
// "dora" a DISCOVER and a REQUEST whose ACK waits for its journal write
// (without fsync: the socket path, not the disk). One client, one exchange
// at a time, so ns/op is the round trip.
//
//	go test -run '^$' -bench SockExchange ./dhcp/
func BenchmarkSockExchange(b *testing.B) {
	nstest.RequireRoot(b)
	_, s, c := startFullMode(b, 80)
	s.leases.j.noSync = true
	hw := net.HardwareAddr{2, 0, 0, 0xbe, 0, 1}
	disc, _ := dhcpv4.NewDiscovery(hw)
	buf := make([]byte, 1500)
	// ask sends req and waits for the reply with its transaction ID.
	ask := func(req []byte, xid dhcpv4.TransactionID) *dhcpv4.DHCPv4 {
		if _, err := c.WriteToUDPAddrPort(req, broadcast67); err != nil {
			b.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				b.Fatalf("no reply: %v; stats %+v", err, s.Stats())
			}
			if r, err := dhcpv4.FromBytes(buf[:n]); err == nil && r.OpCode == dhcpv4.OpcodeBootReply && r.TransactionID == xid {
				return r
			}
		}
	}
	offer := ask(disc.ToBytes(), disc.TransactionID)
	req, _ := dhcpv4.NewRequestFromOffer(offer)
	b.Run("offer", func(b *testing.B) {
		for b.Loop() {
			ask(disc.ToBytes(), disc.TransactionID)
		}
	})
	b.Run("dora", func(b *testing.B) {
		for b.Loop() {
			ask(disc.ToBytes(), disc.TransactionID)
			if r := ask(req.ToBytes(), req.TransactionID); r.MessageType() != dhcpv4.MessageTypeAck {
				b.Fatalf("reply %v, want ACK", r.MessageType())
			}
		}
	})
}
