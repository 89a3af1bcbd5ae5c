package metrics

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/dhcp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/tftp"
)

// liveServers runs a real TFTP and HTTP boot server on loopback and a DHCP
// server fed through Handle (its replies are never sent), watches them on
// reg, makes each counter move (garbage, repeated and replaced requests,
// an exhausted pool, a release, ...) and returns the series that must now
// read what it caused. A gauge that moves only while something runs is
// checked on reg there and then.
func liveServers(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	ts, rec := startTFTP(t)
	hs := startHTTP(t)
	ds := startDHCP(t)
	if err := Watch(reg, Sources{TFTP: ts, HTTP: hs, DHCP: ds}); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for k, v := range tftpMoves(t, reg, ts, rec) {
		want[k] = v
	}
	for k, v := range dhcpMoves(t, ds) {
		want[k] = v
	}
	for k, v := range httpMoves(t, reg, hs) {
		want[k] = v
	}
	return want
}

func imageStore(t *testing.T, files map[string]int) (*images.Store, string) {
	t.Helper()
	root := t.TempDir()
	for name, n := range files {
		if err := os.WriteFile(filepath.Join(root, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := images.Open(root, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store, root
}

func startTFTP(t *testing.T) (*tftp.Server, *event.Recorder) {
	t.Helper()
	store, _ := imageStore(t, map[string]int{"f": 100, "g": 200})
	rec := &event.Recorder{}
	s, err := tftp.New(tftp.Config{Listen: "127.0.0.1:0", MTU: 1500, Timeout: 10 * time.Second,
		Files: bootcfg.RootOnly(store), Sink: rec, TransferThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "tftp", 30*time.Second, s.Serve)
	return s, rec
}

func rrq(file string) []byte {
	b := []byte{0, 1}
	b = append(append(b, file...), 0)
	return append(append(b, "octet"...), 0)
}

// udpClient is a loopback UDP socket speaking TFTP by hand.
type udpClient struct {
	t    *testing.T
	conn *net.UDPConn
}

func newUDPClient(t *testing.T) *udpClient {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &udpClient{t: t, conn: c}
}

func (c *udpClient) send(to netip.AddrPort, b []byte) {
	c.t.Helper()
	if _, err := c.conn.WriteToUDPAddrPort(b, to); err != nil {
		c.t.Fatal(err)
	}
}

// data waits (10 s at most, 20 packets at most) for a DATA packet of n
// bytes of payload and returns its block number and source.
func (c *udpClient) data(n int) (uint16, netip.AddrPort) {
	c.t.Helper()
	b := make([]byte, 2048)
	for range 20 {
		_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, from, err := c.conn.ReadFromUDPAddrPort(b)
		if err != nil {
			c.t.Fatalf("no DATA of %d bytes: %v", n, err)
		}
		if got == 4+n && binary.BigEndian.Uint16(b) == 3 {
			return binary.BigEndian.Uint16(b[2:]), from
		}
	}
	c.t.Fatalf("no DATA of %d bytes in 20 packets", n)
	return 0, netip.AddrPort{}
}

func ackPkt(block uint16) []byte { return binary.BigEndian.AppendUint16([]byte{0, 4}, block) }

// waitFetches waits (10 s at most) for n fetch events.
func waitFetches(t *testing.T, rec *event.Recorder, n int) []event.Fetch {
	t.Helper()
	f, ok := rec.WaitFetches(n, 10*time.Second)
	if !ok {
		t.Fatalf("%d TFTP fetch events, want %d", len(f), n)
	}
	return f
}

// tftpMoves: one malformed packet, a transfer that gets its own request
// again and a stray datagram before its ACK, and a transfer replaced by
// the same port's next request.
func tftpMoves(t *testing.T, reg *prometheus.Registry, s *tftp.Server, rec *event.Recorder) map[string]float64 {
	t.Helper()
	srv := s.Addr()
	garbage := newUDPClient(t)
	garbage.send(srv, []byte{0, 9, 'x'}) // no such opcode: malformed

	a := newUDPClient(t)
	a.send(srv, rrq("f"))
	blk, tid := a.data(100)
	wantBusy, wantCap := 1.0, 2.0
	if runtime.GOOS != "linux" {
		wantBusy, wantCap = 0, 0 // no lock-step threads off Linux
	}
	// A is waiting for its ACK now, on a thread of its own.
	mid := gather(t, reg)
	if mid[lsBusy+`{}`] != wantBusy || mid[lsCap+`{}`] != wantCap {
		t.Errorf("while a lock-step transfer runs: %s %v, %s %v; want %v and %v",
			lsBusy, mid[lsBusy+`{}`], lsCap, mid[lsCap+`{}`], wantBusy, wantCap)
	}
	a.send(srv, rrq("f")) // its request again: dropped as a repeat
	// The repeat comes to another socket than the ACK: it must be seen
	// while the transfer still runs.
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Duplicates == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	a.send(tid, []byte{0, 9, 1, 2}) // neither ACK nor ERROR: stray, twice
	a.send(tid, []byte{0xff})
	a.send(tid, ackPkt(blk)) // the last block: done
	waitFetches(t, rec, 1)

	b := newUDPClient(t)
	b.send(srv, rrq("f"))
	b.data(100)
	b.send(srv, rrq("g")) // the same port moves on: f is replaced
	blk, tid = b.data(200)
	b.send(tid, ackPkt(blk))
	evs := waitFetches(t, rec, 3)
	outcomes := map[string]int{}
	for _, f := range evs {
		outcomes[f.File+" "+f.Outcome]++
	}
	if outcomes["f ok"] != 1 || outcomes["f aborted"] != 1 || outcomes["g ok"] != 1 {
		t.Errorf("TFTP outcomes %v, want f ok, f aborted (replaced), g ok", outcomes)
	}
	return map[string]float64{
		malformed + `{proto="tftp"}`:             1,
		tRequests + `{}`:                         3,
		tDropped + `{reason="repeated-request"}`: 1,
		tDropped + `{reason="stray"}`:            2,
		tReplaced + `{}`:                         1,
		lsCap + `{}`:                             wantCap,
	}
}

func startDHCP(t *testing.T) *dhcp.Server {
	t.Helper()
	cfg := configs.Default()
	cfg.DHCP.Mode = configs.ModeFull
	cfg.DHCP.Pool, _ = configs.ParsePool("10.0.0.10-10.0.0.10") // one address
	cfg.DHCP.Port = 0                                           // never sent to: packets go through Handle
	cfg.Data = t.TempDir()
	cfg.HTTP.Listen = ":8080"
	s, err := dhcp.New(context.Background(), dhcp.Options{Config: cfg, Addr: netip.MustParseAddr("10.0.0.1"),
		Prefix: netip.MustParsePrefix("10.0.0.0/24"), Hosts: hosts.New(nil), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "dhcp", 30*time.Second, s.Serve) // closes the socket and the lease journal
	return s
}

// dhcpMoves: garbage, an exhausted pool, a reclaimed offer, a REQUEST
// for another server, a release and a decline.
func dhcpMoves(t *testing.T, s *dhcp.Server) map[string]float64 {
	t.Helper()
	t0 := time.Now()
	src := netip.MustParseAddrPort("0.0.0.0:68")
	ours := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP{10, 0, 0, 1}))
	theirs := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP{10, 0, 0, 99}))
	addr := net.IP{10, 0, 0, 10}
	want := dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(addr))
	mac := func(i byte) net.HardwareAddr { return net.HardwareAddr{0x52, 0x54, 0, 0x77, 0, i} }
	send := func(at time.Duration, mt dhcpv4.MessageType, m net.HardwareAddr, wantReply dhcpv4.MessageType, mods ...dhcpv4.Modifier) {
		t.Helper()
		p, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(m), dhcpv4.WithMessageType(mt)}, mods...)...)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := s.Handle(p.ToBytes(), src, false, t0.Add(at))
		got := dhcpv4.MessageTypeNone
		if out != nil {
			r, err := dhcpv4.FromBytes(out)
			if err != nil {
				t.Fatalf("%s from %s: the reply does not parse: %v", mt, m, err)
			}
			got = r.MessageType()
		}
		if got != wantReply {
			t.Fatalf("%s from %s at +%v: reply %s, want %s", mt, m, at, got, wantReply)
		}
	}
	none := dhcpv4.MessageTypeNone
	if out, _ := s.Handle([]byte("not dhcp"), src, false, t0); out != nil {
		t.Fatal("garbage was answered")
	}
	send(0, dhcpv4.MessageTypeDiscover, mac(1), dhcpv4.MessageTypeOffer)
	send(0, dhcpv4.MessageTypeDiscover, mac(2), none) // the one address is offered: exhausted
	send(6*time.Second, dhcpv4.MessageTypeDiscover, mac(2), dhcpv4.MessageTypeOffer)
	send(6*time.Second, dhcpv4.MessageTypeRequest, mac(1), none, want, theirs) // took another server's offer
	send(6*time.Second, dhcpv4.MessageTypeRequest, mac(2), dhcpv4.MessageTypeAck, want, ours)
	send(6*time.Second, dhcpv4.MessageTypeRelease, mac(2), none, dhcpv4.WithClientIP(addr))
	send(7*time.Second, dhcpv4.MessageTypeDiscover, mac(3), dhcpv4.MessageTypeOffer)
	send(7*time.Second, dhcpv4.MessageTypeRequest, mac(3), dhcpv4.MessageTypeAck, want, ours)
	send(7*time.Second, dhcpv4.MessageTypeDecline, mac(3), none, want)
	return map[string]float64{
		dReceived + `{}`:             10,
		malformed + `{proto="dhcp"}`: 1,
		dIgnored + `{}`:              1,
		dErrors + `{}`:               1,
		reclaimed + `{}`:             1,
		ended + `{by="release"}`:     1,
		ended + `{by="decline"}`:     1,
	}
}

func startHTTP(t *testing.T) *httpboot.Server {
	t.Helper()
	store, _ := imageStore(t, map[string]int{"k": 10})
	s, err := httpboot.New(httpboot.Options{Images: store, HTTP: configs.HTTP{Enabled: true, Listen: "127.0.0.1:0",
		ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, StallTimeout: 10 * time.Second, ShutdownGrace: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "http", 30*time.Second, s.Serve)
	return s
}

// httpMoves: a connection kept open after its request shows in
// http_connections until it closes; its bad ?mac= is a malformed request.
func httpMoves(t *testing.T, reg *prometheus.Registry, s *httpboot.Server) map[string]float64 {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /k?mac=zz HTTP/1.1\r\nHost: pxeperf\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := gather(t, reg)[hConns+`{}`]; got != 1 {
		t.Errorf("%s = %v with one connection open, want 1", hConns, got)
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); s.Conns() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return map[string]float64{
		hConns + `{}`:                0,
		malformed + `{proto="http"}`: 1,
	}
}
