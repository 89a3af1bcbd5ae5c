//go:build linux

package nstest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// Forger sends IPv4 UDP datagrams with any source address from inside a
// test's namespace, through a raw socket (IPPROTO_RAW: the test writes the
// IP header), as an attacker on the LAN forges them: a forged source costs
// nothing, and the server's reply goes to whoever the source names.
type Forger struct {
	fd  int
	buf []byte
}

// NewForger opens a raw socket in namespace ns, closed at cleanup.
func NewForger(t testing.TB, ns string) *Forger {
	t.Helper()
	f := &Forger{buf: make([]byte, 0, 65535)}
	if err := Do(ns, func() (err error) {
		f.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		t.Fatalf("nstest: raw socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { unix.Close(f.fd) })
	return f
}

// UDP sends one datagram from src to dst with payload. The UDP checksum is
// left 0 (optional in IPv4); the kernel fills the IP header's checksum and
// ID.
func (f *Forger) UDP(src, dst netip.AddrPort, payload []byte) error {
	if !src.Addr().Is4() || !dst.Addr().Is4() {
		return fmt.Errorf("nstest: Forger.UDP: IPv4 only (%v -> %v)", src, dst)
	}
	n := 20 + 8 + len(payload)
	if n > 65535 {
		return fmt.Errorf("nstest: Forger.UDP: %d bytes is more than an IPv4 datagram holds", n)
	}
	b := f.buf[:n]
	b[0], b[1] = 0x45, 0
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	binary.BigEndian.PutUint32(b[4:], 0) // ID (kernel), no fragment flags
	b[8], b[9] = 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(b[10:], 0)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(b[12:16], s4[:])
	copy(b[16:20], d4[:])
	binary.BigEndian.PutUint16(b[20:], src.Port())
	binary.BigEndian.PutUint16(b[22:], dst.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	binary.BigEndian.PutUint16(b[26:], 0)
	copy(b[28:], payload)
	sa := &unix.SockaddrInet4{Addr: d4}
	return unix.Sendto(f.fd, b, 0, sa)
}

// Unanswered returns up to n addresses of p's subnet that no namespace
// holds, from the top of the subnet down: forged on-link sources whose ARP
// nobody answers, so a reply to them waits in the server's neighbour queue.
func (p *Pair) Unanswered(n int) []netip.Addr {
	var out []netip.Addr
	last := p.Prefix.Masked().Addr()
	for a := last; p.Prefix.Contains(a); a = a.Next() {
		last = a
	}
	for a := last.Prev(); p.Prefix.Contains(a) && len(out) < n; a = a.Prev() {
		if a == p.ServerIP || a == p.ClientIP || a == p.Prefix.Masked().Addr() {
			continue
		}
		out = append(out, a)
	}
	return out
}
