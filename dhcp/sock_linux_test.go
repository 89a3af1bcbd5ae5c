//go:build linux

package dhcp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// BenchmarkSockExchange is DHCP exchanges through the server's socket
// thread (serveSock) over a veth pair: "offer" a DISCOVER answered at once,
// "dora" a DISCOVER and a REQUEST whose ACK waits for its journal write
// (without fsync: the socket path, not the disk). One client, one exchange
// at a time, so ns/op is the round trip.
//
//	go test -run '^$' -bench SockExchange ./dhcp/
func BenchmarkSockExchange(b *testing.B) {
	nstest.RequireRoot(b)
	p := nstest.NewPair(b, nstest.Options{NoClientIP: true})
	s := startInProcess(b, p, configs.ModeFull, func(c *configs.Config) {
		c.DHCP.Pool, _ = configs.ParsePool(poolFor(p, 50, 80))
	})
	s.leases.j.noSync = true
	c := clientConn(b, p, ClientPort)
	bcast := netip.MustParseAddrPort("255.255.255.255:67")
	hw := net.HardwareAddr{2, 0, 0, 0xbe, 0, 1}
	disc, _ := dhcpv4.NewDiscovery(hw)
	buf := make([]byte, 1500)
	// ask sends req and waits for the reply with its transaction ID.
	ask := func(req []byte, xid dhcpv4.TransactionID) *dhcpv4.DHCPv4 {
		if _, err := c.WriteToUDPAddrPort(req, bcast); err != nil {
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
