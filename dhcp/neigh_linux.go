//go:build linux

package dhcp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// neighbours asks the kernel's neighbour table (ARP) about one address
// at a time (RTM_GETNEIGH for one destination, Linux 5.0+), on the
// socket's own thread: whether a reply to it would leave at once or wait
// for an ARP answer in the neighbour queue, holding the socket's send
// buffer (3 s when nobody answers).
type neighbours struct {
	fd      int
	ifindex int32
	seq     uint32
	req     [36]byte // nlmsghdr + ndmsg + NDA_DST
	buf     []byte
}

// openNeighbours opens the netlink socket for ifname's neighbours; nil
// (every address resolved) without an interface (loopback unit tests).
func openNeighbours(ifname string) (*neighbours, error) {
	if ifname == "" {
		return nil, nil
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	// The kernel answers a get at once; the timeout only bounds a lost one.
	tv := unix.Timeval{Usec: 50_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &neighbours{fd: fd, ifindex: int32(ifi.Index), buf: make([]byte, 4096)}, nil
}

func (n *neighbours) close() {
	if n != nil {
		unix.Close(n.fd)
	}
}

// nudResolved are the neighbour states with a link-layer address: a
// packet to such a neighbour leaves without waiting for ARP.
const nudResolved = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT | unix.NUD_NOARP

// resolved reports whether a has a link-layer address on the interface.
// No entry, an incomplete or failed one, or no answer: false.
func (n *neighbours) resolved(a netip.Addr) bool {
	n.seq++
	b := n.req[:]
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], unix.RTM_GETNEIGH)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:], n.seq)
	binary.NativeEndian.PutUint32(b[12:], 0)
	b[16] = unix.AF_INET // ndmsg: family, pad, pad, ifindex, state, flags, type
	binary.NativeEndian.PutUint32(b[20:], uint32(n.ifindex))
	binary.NativeEndian.PutUint16(b[28:], 8) // rtattr NDA_DST
	binary.NativeEndian.PutUint16(b[30:], unix.NDA_DST)
	a4 := a.As4()
	copy(b[32:], a4[:])
	if err := unix.Sendto(n.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false
	}
	for range 4 { // an earlier get's late answer may come first
		m, _, err := unix.Recvfrom(n.fd, n.buf, 0)
		if err != nil {
			return false
		}
		if state, seq, ok := parseNeighReply(n.buf[:m]); ok && seq == n.seq {
			return state&nudResolved != 0
		}
	}
	return false
}

// parseNeighReply reads a netlink answer to RTM_GETNEIGH: the neighbour
// state of an RTM_NEWNEIGH (0 for an error such as ENOENT) and its
// sequence number.
func parseNeighReply(b []byte) (state uint16, seq uint32, ok bool) {
	if len(b) < 16 {
		return 0, 0, false
	}
	typ := binary.NativeEndian.Uint16(b[4:])
	seq = binary.NativeEndian.Uint32(b[8:])
	switch {
	case typ == unix.NLMSG_ERROR:
		return 0, seq, true
	case typ == unix.RTM_NEWNEIGH && len(b) >= 16+12:
		return binary.NativeEndian.Uint16(b[16+8:]), seq, true
	}
	return 0, seq, false
}
