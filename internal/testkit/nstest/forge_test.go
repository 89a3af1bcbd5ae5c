//go:build linux

package nstest

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestForgerSpoofsOnLinkSource: a datagram forged in the client namespace
// arrives in the server namespace from the address it names, one nobody
// holds.
func TestForgerSpoofsOnLinkSource(t *testing.T) {
	p := NewPair(t, Options{})
	var c *net.UDPConn
	if err := Do(p.Server, func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := netip.AddrPortFrom(p.Unanswered(1)[0], 4242)
	f := NewForger(t, p.Client)
	if err := f.UDP(src, netip.AddrPortFrom(p.ServerIP, 9999), []byte("forged")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	b := make([]byte, 64)
	n, from, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:n]) != "forged" || from != src {
		t.Fatalf("got %q from %v, want %q from %v", b[:n], from, "forged", src)
	}
}
