package httpboot

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
)

// macClaimWindow is how long after a proxyDHCP sighting of a MAC a client
// may claim it with ?mac= from an address pxeperf has not seen it use.
// iPXE fetches its script seconds after its own DHCP exchange, which
// proxyDHCP sees.
const macClaimWindow = 2 * time.Minute

// maxClaims bounds the accepted claims remembered; only those younger than
// macClaimWindow matter.
const maxClaims = 8192

// claims remembers when each MAC was last claimed by ?mac= under the
// proxyDHCP rule, so one sighting lets one address claim it.
type claims struct {
	mu sync.Mutex
	at map[string]time.Time
}

// claimMAC decides whether a request from src may speak for mac (?mac=)
// and, when it may, binds mac to src in the hosts table (so the image
// fetches that follow without ?mac= are put on it) and returns the client.
//
// The rule: a claim holds when
//  1. http.trust_mac_param is on (the lab trusts every machine on it); or
//  2. the MAC's host entry has address: src; or
//  3. the hosts table already binds src to that MAC (a lease of pxeperf's
//     full-mode DHCP, a proxyDHCP request naming its address, or an earlier
//     claim that held); or
//  4. proxyDHCP saw the MAC within macClaimWindow (pxeperf in proxy mode
//     learns no address; iPXE asks for /boot.ipxe?mac=${net0/mac} seconds
//     after its DHCP), no other address claimed it since that sighting,
//     and src is not bound to another MAC seen more recently.
//
// Otherwise the claim is refused (why says which rule failed): any machine
// on the lab network could otherwise fetch another board's script, with
// whatever secrets it holds, and put its fetches on that board's record.
func (s *Server) claimMAC(mac net.HardwareAddr, src netip.Addr, now time.Time) (c hosts.Client, ok bool, why string) {
	c, known := s.opt.Hosts.ByMAC(mac)
	if !known {
		c = hosts.Client{MAC: mac, Arch: configs.ArchUnknown}
	}
	if !src.IsValid() {
		return c, false, "no source address"
	}
	owner, bound := s.opt.Hosts.ByAddr(src)
	switch {
	case s.opt.HTTP.TrustMACParam:
	case c.Host != nil && c.Host.Address.IsValid() && c.Host.Address.Addr == src:
	case bound && bytes.Equal(owner.MAC, mac):
		return c, true, "" // already bound: nothing to change
	case !known || c.Seen.IsZero():
		return c, false, "pxeperf's DHCP has not seen this MAC and its host entry has no address: " + src.String()
	case !c.Proxy:
		return c, false, "pxeperf's DHCP (or an earlier claim) binds this MAC to " + c.Addr.String()
	case now.Sub(c.Seen) > macClaimWindow:
		return c, false, "proxyDHCP last saw this MAC " + now.Sub(c.Seen).Round(time.Second).String() + " ago (a claim must follow within " + macClaimWindow.String() + ")"
	case bound && owner.Seen.After(c.Seen):
		return c, false, "this address belongs to " + owner.MAC.String() + ", seen more recently"
	default:
		if !s.claims.take(mac.String(), c.Seen, now) {
			return c, false, "already claimed from " + c.Addr.String() + " since proxyDHCP saw it"
		}
	}
	// Bind mac to src. Seen stays DHCP's (a claim is not a sighting).
	if c.Addr != src {
		c.Addr = src
		s.opt.Hosts.Observe(c)
	}
	return c, true, ""
}

// take records a claim of mac at now unless it was already claimed after
// the sighting at seen; false then.
func (cl *claims) take(mac string, seen, now time.Time) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if t, ok := cl.at[mac]; ok && !t.Before(seen) {
		return false
	}
	if len(cl.at) >= maxClaims {
		for k, t := range cl.at {
			if now.Sub(t) > macClaimWindow {
				delete(cl.at, k)
			}
		}
		if len(cl.at) >= maxClaims {
			return false
		}
	}
	cl.at[mac] = now
	return true
}
