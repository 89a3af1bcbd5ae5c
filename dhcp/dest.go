package dhcp

import "net/netip"

// Dest is where a reply goes (RFC 2131 §4.1).
type Dest struct {
	To netip.AddrPort
	// SetBroadcast asks for the reply's broadcast flag to be set (a NAK
	// through a relay, so the relay broadcasts it on the client's segment).
	SetBroadcast bool
	// L2Fallback: the RFC wants a layer-2 unicast to yiaddr (the client has
	// no address yet and did not ask for broadcast). That needs a raw packet
	// socket or an ARP entry injected by hand; pxeperf broadcasts instead,
	// which every client accepts.
	L2Fallback bool
}

// replyDest applies the RFC 2131 §4.1 rules in order:
//
//  1. giaddr set: unicast to the relay at giaddr:serverPort; a NAK also gets
//     the broadcast flag so the relay broadcasts it.
//  2. a NAK without relay: broadcast.
//  3. ciaddr set: unicast to ciaddr:clientPort.
//  4. broadcast flag set: broadcast to 255.255.255.255:clientPort.
//  5. otherwise: unicast to yiaddr at layer 2, which pxeperf replaces by a
//     broadcast (see Dest.L2Fallback).
func replyDest(giaddr, ciaddr, yiaddr netip.Addr, broadcastFlag, nak bool, serverPort, clientPort uint16) Dest {
	bcast := netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), clientPort)
	switch {
	case set(giaddr):
		return Dest{To: netip.AddrPortFrom(giaddr, serverPort), SetBroadcast: nak}
	case nak:
		return Dest{To: bcast}
	case set(ciaddr):
		return Dest{To: netip.AddrPortFrom(ciaddr, clientPort)}
	case broadcastFlag:
		return Dest{To: bcast}
	case set(yiaddr):
		return Dest{To: bcast, L2Fallback: true}
	default:
		return Dest{To: bcast}
	}
}

func set(a netip.Addr) bool { return a.IsValid() && !a.IsUnspecified() }
