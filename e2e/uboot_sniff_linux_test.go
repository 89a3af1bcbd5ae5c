//go:build linux

package e2e

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"golang.org/x/sys/unix"
)

// dhcpSniffer records the vendor class (option 60) and client architecture
// (option 93) of the DHCP requests a guest sends, read from a packet socket
// on the guest's tap. pxeperf logs the architecture on its leases but not
// option 60, and the test reports both.
type dhcpSniffer struct {
	mu     sync.Mutex
	seen   bool
	vendor string
	arch   int // -1: no option 93
}

// sniffDHCP listens on iface in namespace ns until the test ends.
func sniffDHCP(t *testing.T, ns, iface string) *dhcpSniffer {
	t.Helper()
	s := &dhcpSniffer{arch: -1}
	var fd int
	err := nstest.Do(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		// ETH_P_ALL: on a bridge port the bridge consumes frames before
		// per-protocol packet sockets see them; "all" taps come first.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		// A bounded read, so the goroutine notices the end of the test.
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	})
	if err != nil {
		t.Logf("no DHCP sniffer on %s (option 60/93 will not be reported): %v", iface, err)
		return s
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		<-stopped
		unix.Close(fd)
	})
	go func() {
		defer close(stopped)
		buf := make([]byte, 2048)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if ll, ok := from.(*unix.SockaddrLinklayer); err != nil || !ok || ll.Protocol != htons(unix.ETH_P_IP) {
				continue
			}
			s.packet(buf[:n])
		}
	}()
	return s
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// packet looks at one IPv4 datagram; BOOTREQUESTs to port 67 are kept.
func (s *dhcpSniffer) packet(b []byte) {
	if len(b) < 20 || b[0]>>4 != 4 || b[9] != unix.IPPROTO_UDP {
		return
	}
	ihl := int(b[0]&0xf) * 4
	if len(b) < ihl+8 || binary.BigEndian.Uint16(b[ihl+2:]) != 67 {
		return
	}
	m, err := dhcpv4.FromBytes(b[ihl+8:])
	if err != nil || m.OpCode != dhcpv4.OpcodeBootRequest {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = true
	s.vendor = string(m.Options.Get(dhcpv4.OptionClassIdentifier))
	s.arch = -1
	if v := m.Options.Get(dhcpv4.GenericOptionCode(93)); len(v) >= 2 {
		s.arch = int(binary.BigEndian.Uint16(v))
	}
}

// last returns what the last request carried; ok is false before any.
func (s *dhcpSniffer) last() (vendor string, arch int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vendor, s.arch, s.seen
}

// String is "option 60 "U-Boot.armv8", option 93 22" for the report.
func (s *dhcpSniffer) String() string {
	v, a, ok := s.last()
	if !ok {
		return "no DHCP request seen"
	}
	o93 := "absent"
	if a >= 0 {
		o93 = fmt.Sprint(a)
	}
	o60 := fmt.Sprintf("%q", v)
	if v == "" {
		o60 = "absent"
	}
	return fmt.Sprintf("option 60 %s, option 93 %s", o60, o93)
}
