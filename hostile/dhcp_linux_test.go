//go:build linux

package hostile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// DHCP's attacks (issue 27, rows 2 and 8): replies aimed at on-link
// addresses that answer no ARP, and clients that take the pool without a
// DISCOVER or spread over forged relays.

var pxeClass = dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001"))

// dhcpLabYAML is a DHCP-only serve: no TFTP or HTTP, the admin listener
// for /metrics, plus extra lines under dhcp:.
func dhcpLabYAML(mode, pool string, extra ...string) string {
	lines := []string{"mode: " + mode}
	if pool != "" {
		lines = append(lines, "pool: "+pool)
	}
	return "tftp:\n  enabled: false\nhttp:\n  enabled: false\n" + yamlSection("dhcp", append(lines, extra...)...)
}

// labPool is FIRST-LAST in the pair's /24 (host numbers first..last).
func labPool(p *nstest.Pair, first, last int) string {
	b := p.Prefix.Addr().As4()
	return fmt.Sprintf("%d.%d.%d.%d-%d.%d.%d.%d", b[0], b[1], b[2], first, b[0], b[1], b[2], last)
}

// floodMAC is the i-th forged client's hardware address.
func floodMAC(tag byte, i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0xee, tag, byte(i >> 16), byte(i >> 8), byte(i)}
}

func ip4(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// dhcpMsg builds a client message or fails t.
func dhcpMsg(t *testing.T, mt dhcpv4.MessageType, hw net.HardwareAddr, mods ...dhcpv4.Modifier) []byte {
	t.Helper()
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(mt)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m.ToBytes()
}

// forgedDatagram is one datagram a flood sends again and again.
type forgedDatagram struct {
	src, dst netip.AddrPort
	b        []byte
}

// forgeRounds sends dgs round after round (each a burst of perRound
// datagrams cycling through dgs, then a pause of gap) until ctx ends or
// rounds are spent, and returns how many datagrams left.
func forgeRounds(ctx context.Context, t *testing.T, l *lab, dgs []forgedDatagram, perRound, rounds int, gap time.Duration) int {
	f := nstest.NewForger(t, l.P.Client)
	sent := 0
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		for i := range perRound {
			d := dgs[(r*perRound+i)%len(dgs)]
			if f.UDP(d.src, d.dst, d.b) == nil {
				sent++
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(gap):
		}
	}
	return sent
}

// floodUnansweredReplies (row 2) sends, from forged on-link sources that
// answer no ARP, every DHCP request whose reply is a unicast to an address
// the packet names: REQUESTs (NAKed) and PXE DISCOVERs with giaddr set to
// such an address, INFORMs and PXE DISCOVERs with that ciaddr, and port
// 4011 REQUESTs from it. 16 client MACs, so a full-mode pool is not what
// runs out; bursts of 6000 datagrams every 400 ms, 8 rounds at most.
func floodUnansweredReplies(ctx context.Context, t *testing.T, l *lab) {
	p := l.P
	srv67, srv4011 := netip.AddrPortFrom(p.ServerIP, 67), netip.AddrPortFrom(p.ServerIP, 4011)
	var dgs []forgedDatagram
	for i, u := range p.Unanswered(100) {
		hw := floodMAC(0x02, i%16)
		src := netip.AddrPortFrom(u, 68)
		relay, ci := dhcpv4.WithGatewayIP(ip4(u)), dhcpv4.WithClientIP(ip4(u))
		off := dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(192, 0, 2, 1)))
		dgs = append(dgs,
			forgedDatagram{src, srv67, dhcpMsg(t, dhcpv4.MessageTypeRequest, hw, relay, off)},
			forgedDatagram{src, srv67, dhcpMsg(t, dhcpv4.MessageTypeDiscover, hw, relay, pxeClass)},
			forgedDatagram{src, srv67, dhcpMsg(t, dhcpv4.MessageTypeInform, hw, ci)},
			forgedDatagram{src, srv67, dhcpMsg(t, dhcpv4.MessageTypeDiscover, hw, ci, pxeClass)},
			forgedDatagram{src, srv4011, dhcpMsg(t, dhcpv4.MessageTypeRequest, hw, ci, pxeClass)},
		)
	}
	n := forgeRounds(ctx, t, l, dgs, 6000, 8, 400*time.Millisecond)
	t.Logf("unanswered-replies flood: %d forged datagrams from %d sources", n, len(dgs)/5)
}

// floodPoolGrab (row 8) takes the pool without a DISCOVER, INIT-REBOOT
// REQUESTs (no server identifier, no ciaddr) from new MACs for every pool
// address, and spreads new clients over random relays: PXE DISCOVERs from
// new MACs with a random giaddr in 10.99.0.0/16. 3000 datagrams at most.
func floodPoolGrab(ctx context.Context, t *testing.T, l *lab) {
	p := l.P
	srv := netip.AddrPortFrom(p.ServerIP, 67)
	src := netip.MustParseAddrPort("0.0.0.0:68")
	var dgs []forgedDatagram
	rng := rand.New(rand.NewPCG(27, 8))
	for i := range 1500 {
		want := p.Prefix.Addr().As4()
		want[3] = byte(219 - i%200) // from the top, away from the offers' cursor
		dgs = append(dgs, forgedDatagram{src, srv, dhcpMsg(t, dhcpv4.MessageTypeRequest, floodMAC(0x08, i),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IP(want[:]))))})
		giaddr := net.IPv4(10, 99, byte(rng.IntN(256)), byte(1+rng.IntN(254)))
		dgs = append(dgs, forgedDatagram{src, srv, dhcpMsg(t, dhcpv4.MessageTypeDiscover, floodMAC(0x09, i),
			dhcpv4.WithGatewayIP(giaddr), pxeClass)})
	}
	n := forgeRounds(ctx, t, l, dgs, 500, len(dgs)/500, 400*time.Millisecond)
	t.Logf("pool-grab flood: %d forged datagrams", n)
}

// udhcpcDORA runs busybox udhcpc in the client namespace, as a client
// the server never saw (a fresh MAC each call), until it is bound (or ctx
// ends) and returns the address it was given.
func udhcpcDORA(ctx context.Context, t *testing.T, l *lab) (string, error) {
	udhcpcSeq++
	mac := fmt.Sprintf("02:00:00:aa:%02x:%02x", byte(udhcpcSeq>>8), byte(udhcpcSeq))
	nstest.Run(t, l.P.Client, "ip", "link", "set", "dev", l.P.ClientIf, "address", mac)
	dir := t.TempDir()
	out, script := filepath.Join(dir, "ip"), filepath.Join(dir, "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && echo \"$ip\" > "+out+"\nexit 0\n"), 0o755); err != nil {
		return "", err
	}
	cmd := nstest.Command(ctx, l.P.Client, "busybox", "udhcpc", "-n", "-q", "-f", "-i", l.P.ClientIf, "-s", script,
		"-t", "5", "-T", "1", "-A", "1")
	cmd.WaitDelay = 200 * time.Millisecond
	log, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("udhcpc: %v: %s", err, strings.TrimSpace(string(log)))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return "", fmt.Errorf("udhcpc bound no address: %s", log)
	}
	return strings.TrimSpace(string(b)), nil
}

// dora is udhcpcDORA as a board.
func dora(t *testing.T, l *lab) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := udhcpcDORA(ctx, t, l)
		return err
	}
}

var (
	udhcpcSeq int
	relaySeq  byte
)

// pxeClient is a PXE ROM in the client namespace: a DISCOVER broadcast
// on port 67 until the proxy OFFER comes, then a REQUEST to port 4011
// until its ACK, one try every 200 ms, until ctx ends.
func pxeClient(ctx context.Context, l *lab, hw net.HardwareAddr) error {
	disc, err := dhcpv4.NewDiscovery(hw, pxeClass)
	if err != nil {
		return err
	}
	if _, err := exchangeOn(ctx, l, 68, disc, netip.MustParseAddrPort("255.255.255.255:67"), dhcpv4.MessageTypeOffer); err != nil {
		return fmt.Errorf("proxy OFFER: %w", err)
	}
	req, err := dhcpv4.New(dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), pxeClass,
		dhcpv4.WithClientIP(ip4(l.P.ClientIP)))
	if err != nil {
		return err
	}
	if _, err := exchangeOn(ctx, l, 68, req, netip.AddrPortFrom(l.P.ServerIP, 4011), dhcpv4.MessageTypeAck); err != nil {
		return fmt.Errorf("port 4011 ACK: %w", err)
	}
	return nil
}

// relayedClient is a relay agent at the client's address (port 67, giaddr
// its own address) passing on a new client's DISCOVER, until the OFFER
// comes back to it, or ctx ends.
func relayedClient(ctx context.Context, l *lab, hw net.HardwareAddr) error {
	disc, err := dhcpv4.NewDiscovery(hw, dhcpv4.WithGatewayIP(ip4(l.P.ClientIP)))
	if err != nil {
		return err
	}
	r, err := exchangeOn(ctx, l, 67, disc, netip.AddrPortFrom(l.P.ServerIP, 67), dhcpv4.MessageTypeOffer)
	if err != nil {
		return fmt.Errorf("relayed OFFER: %w", err)
	}
	if r.YourIPAddr.IsUnspecified() {
		return fmt.Errorf("relayed OFFER without an address: %v", r)
	}
	return nil
}

// exchangeOn is pxeExchange from a socket of its own on port in the
// client namespace.
func exchangeOn(ctx context.Context, l *lab, port int, m *dhcpv4.DHCPv4, dst netip.AddrPort, want dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	pc, err := clientSocket(l, port)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	return pxeExchange(ctx, pc, m, dst, want)
}

// clientSocket is a UDP socket on port in the client namespace, tied to
// its interface, allowed to broadcast.
func clientSocket(l *lab, port int) (net.PacketConn, error) {
	var fd int
	if err := nstest.Do(l.P.Client, func() (err error) {
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0); err != nil {
			return err
		}
		for _, o := range []int{unix.SO_REUSEADDR, unix.SO_BROADCAST} {
			if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1); err != nil {
				return err
			}
		}
		if err = unix.BindToDevice(fd, l.P.ClientIf); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrInet4{Port: port})
	}); err != nil {
		return nil, fmt.Errorf("client socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "dhcp client")
	defer f.Close()
	return net.FilePacketConn(f)
}

// pxeExchange sends m to dst every 200 ms until a reply of type want with
// m's transaction ID comes back, or ctx ends.
func pxeExchange(ctx context.Context, pc net.PacketConn, m *dhcpv4.DHCPv4, dst netip.AddrPort, want dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		if _, err := pc.WriteTo(m.ToBytes(), net.UDPAddrFromAddrPort(dst)); err != nil {
			return nil, err
		}
		_ = pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			r, err := dhcpv4.FromBytes(buf[:n])
			if err == nil && r.TransactionID == m.TransactionID && r.MessageType() == want {
				return r, nil
			}
		}
	}
	return nil, ctx.Err()
}

// dhcpBounds is what serve may hold during a DHCP flood: one socket
// thread per port and no goroutine or buffer per forged source.
var dhcpBounds = nstest.Usage{RSS: 96 << 20, FDs: 48}

// dhcpSiege is a DHCP siege: the boards once without a flood (the
// control), then fl for its rounds (d at most) and the boards again once it
// has run for lead, within dhcpBounds and 16 more goroutines than before:
// one socket thread per port, nothing per forged source.
func dhcpSiege(t *testing.T, l *lab, fl flood, d, lead time.Duration, boards ...board) sieged {
	t.Helper()
	return siege(t, l, siegeOpts{Flood: fl, For: d, UntilFlood: true, Control: true, Warm: lead, Boards: boards,
		Bound: dhcpBounds, MaxGrowth: 16})
}

// TestDHCPUnansweredReplies (row 2): replies to addresses that answer no
// ARP must not stall a DHCP socket. Full mode with the whole segment
// trusted as relays (giaddr vectors reach the send path) and proxy mode
// with none (giaddr dropped): a real udhcpc DORA, a relay's DISCOVER (full)
// and a PXE ROM's proxy OFFER and port 4011 ACK (proxy) are served within
// 1 s during the flood.
func TestDHCPUnansweredReplies(t *testing.T) {
	nstest.RequireTool(t, "busybox")
	t.Run("full", func(t *testing.T) {
		p := nstest.NewPair(t, nstest.Options{})
		l := &lab{P: p, S: p.Serve(t, dhcpLabYAML("full", labPool(p, 20, 60), "relays: ["+p.Prefix.String()+"]"), nil)}
		dhcpSiege(t, l, floodUnansweredReplies, 8*time.Second, 500*time.Millisecond,
			board{"udhcpc DORA (full mode)", dora(t, l)},
			board{"OFFER through the configured relay", func(ctx context.Context) error {
				relaySeq++
				return relayedClient(ctx, l, net.HardwareAddr{0x02, 0x00, 0x00, 0xcc, 0x00, relaySeq})
			}})
		checkUnansweredCounted(t, l)
	})
	t.Run("proxy", func(t *testing.T) {
		p := nstest.NewPair(t, nstest.Options{})
		l := &lab{P: p, S: p.Serve(t, dhcpLabYAML("proxy", ""), nil)}
		dhcpSiege(t, l, floodUnansweredReplies, 8*time.Second, 500*time.Millisecond,
			board{"PXE ROM proxy OFFER + 4011 ACK", func(ctx context.Context) error {
				return pxeClient(ctx, l, net.HardwareAddr{0x02, 0x00, 0x00, 0xbb, 0x00, 0x01})
			}})
		checkUnansweredCounted(t, l)
		if n := metric(t, l, "pxeperf_refusals_total", `proto="dhcp"`, "configured relay"); n == 0 {
			t.Errorf("no refusal for giaddr outside dhcp.relays counted on /metrics")
		}
	})
}

// checkUnansweredCounted: the replies the kernel could not take at once
// were dropped and counted, and serve logged no flood of lines.
func checkUnansweredCounted(t *testing.T, l *lab) {
	t.Helper()
	recv := metric(t, l, "pxeperf_dhcp_datagrams_received_total")
	dropped := metric(t, l, "pxeperf_refusals_total", `proto="dhcp"`)
	t.Logf("after the flood: %.0f datagrams read, %.0f replies refused or dropped (pxeperf_refusals_total)", recv, dropped)
	if dropped == 0 {
		t.Errorf("no dropped reply counted on /metrics (pxeperf_refusals_total{proto=\"dhcp\"})")
	}
	if body, err := l.S.Get("/metrics"); err == nil {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "pxeperf_refusals_total{") && strings.Contains(line, `proto="dhcp"`) {
				t.Logf("  %s", line)
			}
		}
	}
	if n := strings.Count(l.S.Out.String(), "\n"); n > 400 {
		t.Errorf("serve logged %d lines during the flood, want a few (refusals once per minute)", n)
	}
}

// TestDHCPPoolGrab (row 8): INIT-REBOOT REQUESTs from MACs the server
// never saw bind nothing, and new clients behind forged relays share
// their trusted relay's budget: the pool keeps room, a real udhcpc is
// served within 1 s, and the new-client budget refuses what is over it.
func TestDHCPPoolGrab(t *testing.T) {
	nstest.RequireTool(t, "busybox")
	p := nstest.NewPair(t, nstest.Options{})
	l := &lab{P: p, S: p.Serve(t,
		dhcpLabYAML("full", labPool(p, 20, 219), "relays: [10.99.0.0/16]", "new_clients_per_second: 2"), nil)}
	dhcpSiege(t, l, floodPoolGrab, 8*time.Second, 1200*time.Millisecond, board{"udhcpc DORA", dora(t, l)})
	acks := metric(t, l, "pxeperf_dhcp_packets_total", `type="request"`, `outcome="ack"`)
	offers := metric(t, l, "pxeperf_dhcp_packets_total", `type="discover"`, `outcome="offer"`)
	inUse := metric(t, l, "pxeperf_dhcp_leases_in_use")
	budget := metric(t, l, "pxeperf_refusals_total", `proto="dhcp"`, "new clients over budget")
	t.Logf("after 1500 INIT-REBOOTs and 1500 DISCOVERs over random relays: %.0f ACKs, %.0f OFFERs, %.0f leases in use, %.0f new-client refusals",
		acks, offers, inUse, budget)
	// udhcpc's own exchanges (the control and the one under the flood):
	// two ACKs, two leases, four OFFERs at most. The relay's budget: a
	// burst of 20 and 2 a second for the 8 s.
	if inUse > 2 || acks > 4 {
		t.Errorf("%.0f leases in use, %.0f ACKs: INIT-REBOOT from unknown clients took the pool (want udhcpc's one)", inUse, acks)
	}
	if offers > 4+20+2*8 {
		t.Errorf("%.0f OFFERs to new clients behind random relays, want at most the relay budget's %d", offers, 4+20+2*8)
	}
	if budget < 1000 {
		t.Errorf("%.0f new-client refusals, want most of the 1500 forged relays' DISCOVERs", budget)
	}
}
