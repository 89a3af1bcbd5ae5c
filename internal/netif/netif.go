// Package netif picks the interface and address pxeperf serves on and reads
// what it needs of them (MTU).
package netif

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Info is the chosen interface.
type Info struct {
	Iface  *net.Interface
	Addr   netip.Addr   // the address clients reach us at
	Prefix netip.Prefix // Addr's subnet on Iface, when Addr is on Iface
}

// Resolve picks the interface (by name, or the first up, non-loopback one with
// IPv4) and the address (given, or the interface's first IPv4). A given
// address must be one of the interface's own.
func Resolve(name string, addr netip.Addr) (*Info, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	var names, others []string
	for i := range ifs {
		ifc := &ifs[i]
		names = append(names, ifc.Name)
		if name != "" && ifc.Name != name {
			continue
		}
		if name == "" && (ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0) {
			continue
		}
		prefixes := ipv4Prefixes(ifc)
		if name == "" && len(prefixes) == 0 {
			continue
		}
		info := &Info{Iface: ifc}
		switch {
		case addr.IsValid():
			info.Addr = addr
			for _, p := range prefixes {
				if p.Addr() == addr {
					info.Prefix = p
				}
			}
			if !info.Prefix.IsValid() {
				if name == "" { // look on: --addr picks the interface
					for _, p := range prefixes {
						others = append(others, ifc.Name+" "+p.String())
					}
					continue
				}
				return nil, notOn(addr, ifc.Name, prefixes)
			}
		case len(prefixes) > 0:
			info.Addr, info.Prefix = prefixes[0].Addr(), prefixes[0]
		default:
			return nil, fmt.Errorf("interface %s has no IPv4 address; give one to it or set --addr", ifc.Name)
		}
		return info, nil
	}
	if name != "" {
		return nil, fmt.Errorf("no interface named %q; the interfaces here are: %s (set --iface)", name, strings.Join(names, ", "))
	}
	if addr.IsValid() {
		return nil, fmt.Errorf("--addr (address:) %s is on no up interface (up ones: %s); set --addr to one of "+
			"those, or add it to the lab interface: ip addr add %s/24 dev IFACE", addr, strings.Join(others, ", "), addr)
	}
	return nil, errors.New("no up, non-loopback interface with an IPv4 address; set --iface and --addr")
}

// notOn is the error for an address the interface does not have: clients
// would be sent to an address nothing answers on.
func notOn(addr netip.Addr, iface string, prefixes []netip.Prefix) error {
	have := "none"
	if len(prefixes) > 0 {
		var s []string
		for _, p := range prefixes {
			s = append(s, p.String())
		}
		have = strings.Join(s, ", ")
	}
	return fmt.Errorf("--addr (address:) %s is not an address of %s (its IPv4 addresses: %s); clients would be "+
		"sent where nothing answers: set --addr to one of them, leave it out, or add it: ip addr add %s/24 dev %s",
		addr, iface, have, addr, iface)
}

func ipv4Prefixes(ifc *net.Interface) []netip.Prefix {
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok || !ip.Unmap().Is4() {
			continue
		}
		ones, _ := ipn.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out
}
