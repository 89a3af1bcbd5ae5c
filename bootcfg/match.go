package bootcfg

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/pxeperf/pxeperf/internal/hwaddr"
)

// Request is what a requested file name asks for.
type Request struct {
	Loader Loader
	// MAC is set when the name carries one (pxelinux.cfg/01-aa-bb-..,
	// grub.cfg-01-aa-bb-..), upper or lower case in the name.
	MAC net.HardwareAddr
	// IPHex is the hex IPv4 address, or a prefix of it, from the name
	// ("C0A8320A", "C0A8"), upper case; "" otherwise.
	IPHex string
	// Default is set for the names every client of the family ends with:
	// pxelinux.cfg/default, pxelinux.cfg/default-<arch>[-<soc>[-<board>]]
	// (U-Boot), grub.cfg, boot.scr.uimg and boot.scr.
	Default bool
	// Dir is the folder before pxelinux.cfg/, grub.cfg* or boot.scr*, without
	// a leading "/" and with a trailing one ("boot/"), "" at the root.
	// pxelinux and U-Boot `pxe` ask for DIR/pxelinux.cfg/.. where DIR is the
	// bootfile's folder, and resolve the config's relative names against it.
	Dir string
	// Name is the file name after Dir: "pxelinux.cfg/01-aa-bb-cc-dd-ee-ff",
	// "pxelinux.cfg/default-arm-sunxi", "grub.cfg-C0A8", "boot.scr.uimg".
	Name string
}

const pxelinuxDir = "pxelinux.cfg/"

// Match classifies a requested path as TFTP or HTTP clients send it: a
// leading "/" is optional and any folder may come before pxelinux.cfg/,
// grub.cfg* and boot.scr* (U-Boot prefixes the bootfile's folder, GRUB its
// prefix). ok is false for names that are not a loader config, among them
// the UUID names pxelinux, U-Boot (pxeuuid) and GRUB (net_*_clientuuid) try
// first and MAC names of other hardware types than Ethernet (01-): pxeperf
// knows hosts by MAC, so those are left to the file root and a client that
// gets "not found" moves on to its 01-MAC name. Match never panics.
func Match(name string) (Request, bool) {
	name = strings.TrimLeft(name, "/")
	dir, base := "", name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		dir, base = name[:i+1], name[i+1:]
	}
	if base == "" {
		return Request{}, false
	}
	switch {
	case dir == pxelinuxDir || strings.HasSuffix(dir, "/"+pxelinuxDir):
		r := Request{Loader: PXELinux, Dir: dir[:len(dir)-len(pxelinuxDir)], Name: pxelinuxDir + base}
		return classify(r, base)
	case base == "grub.cfg":
		return Request{Loader: GRUB, Default: true, Dir: dir, Name: base}, true
	case strings.HasPrefix(base, "grub.cfg-"):
		r := Request{Loader: GRUB, Dir: dir, Name: base}
		suffix := base[len("grub.cfg-"):]
		if strings.HasPrefix(suffix, "default") {
			return Request{}, false // not a name GRUB tries
		}
		return classify(r, suffix)
	case base == "boot.scr.uimg" || base == "boot.scr":
		return Request{Loader: UBoot, Default: true, Dir: dir, Name: base}, true
	}
	return Request{}, false
}

// classify fills r from the part of a name after pxelinux.cfg/ or
// grub.cfg-; a name that is none of its forms gives a zero Request.
func classify(r Request, s string) (Request, bool) {
	switch {
	case s == "default" || strings.HasPrefix(s, "default-") && len(s) > len("default-"):
		r.Default = true
		return r, true
	case strings.HasPrefix(s, "01-") && len(s) == len("01-aa-bb-cc-dd-ee-ff"):
		// Six bytes with dashes, either case: net.ParseMAC would also
		// take 8- and 20-byte addresses and other separators.
		mac, ok := hwaddr.Parse(s[len("01-"):], '-')
		if !ok {
			return Request{}, false
		}
		r.MAC = mac
		return r, true
	case len(s) >= 1 && len(s) <= 8 && hwaddr.IsHex(s):
		r.IPHex = strings.ToUpper(s)
		return r, true
	}
	return Request{}, false
}

// macName is pxelinux's and GRUB's MAC form: "01-" (ARP hardware type
// Ethernet) and the address in lower case with dashes. ok is false for
// addresses that are not 6 bytes long.
func macName(mac net.HardwareAddr) (string, bool) {
	if len(mac) != 6 {
		return "", false
	}
	return "01-" + strings.ReplaceAll(mac.String(), ":", "-"), true
}

// ipNames is the hex IPv4 address in upper case ("C0A8320A") and then each
// shorter prefix down to one digit, as pxelinux, U-Boot (pxe_ipaddr_paths)
// and GRUB (grub_config_search_through with 8 tries) try them. Nil for
// anything but an IPv4 (or IPv4-mapped) address.
func ipNames(ip netip.Addr) []string {
	ip = ip.Unmap()
	if !ip.Is4() {
		return nil
	}
	a := ip.As4()
	h := fmt.Sprintf("%02X%02X%02X%02X", a[0], a[1], a[2], a[3])
	names := make([]string, 0, 8)
	for n := 8; n >= 1; n-- {
		names = append(names, h[:n])
	}
	return names
}

// PXELinuxChain lists the names pxelinux and U-Boot's `pxe get` try for a
// client, in order and relative to the bootfile's folder:
// pxelinux.cfg/01-<mac in lower case with dashes>, pxelinux.cfg/<HEXIP>
// and its prefixes down to one digit, pxelinux.cfg/default. Both first try
// a UUID name (left out: pxeperf knows no UUIDs); U-Boot also tries the
// names of UBootDefaults before "default" (see UBootPXEChain). The MAC
// name is left out unless mac is 6 bytes, the IP names unless ip is IPv4.
func PXELinuxChain(mac net.HardwareAddr, ip netip.Addr) []string {
	var names []string
	if m, ok := macName(mac); ok {
		names = append(names, pxelinuxDir+m)
	}
	for _, n := range ipNames(ip) {
		names = append(names, pxelinuxDir+n)
	}
	return append(names, pxelinuxDir+"default")
}

// UBootDefaults lists the names U-Boot's `pxe get` tries after the IP
// names and before pxelinux.cfg/default (cmd/pxe.c pxe_default_paths):
// default-ARCH-SOC-BOARD (when the board has both), default-ARCH-SOC (when
// it has a SoC), default-ARCH. arch, soc and board are U-Boot's build-time
// CONFIG_SYS_ARCH, CONFIG_SYS_SOC and CONFIG_SYS_BOARD ("arm", "sunxi",
// "sunxi"); arch "" gives nil.
func UBootDefaults(arch, soc, board string) []string {
	if arch == "" {
		return nil
	}
	var names []string
	if soc != "" {
		if board != "" {
			names = append(names, pxelinuxDir+"default-"+arch+"-"+soc+"-"+board)
		}
		names = append(names, pxelinuxDir+"default-"+arch+"-"+soc)
	}
	return append(names, pxelinuxDir+"default-"+arch)
}

// UBootPXEChain is PXELinuxChain with U-Boot's UBootDefaults before
// "default": the full list `pxe get` tries when pxeuuid is unset and no
// DHCP option 209 names the file.
func UBootPXEChain(mac net.HardwareAddr, ip netip.Addr, arch, soc, board string) []string {
	names := PXELinuxChain(mac, ip)
	last := names[len(names)-1]
	names = append(names[:len(names)-1], UBootDefaults(arch, soc, board)...)
	return append(names, last)
}

// GRUBChain lists the names GRUB's network boot tries for a client
// (grub_net_search_config_file, then normal mode's fallback), in order and
// relative to GRUB's prefix folder: grub.cfg-01-<mac in lower case with
// dashes>, grub.cfg-<HEXIP> and its prefixes down to one digit, grub.cfg.
// GRUB first tries grub.cfg-<client UUID> (left out: pxeperf knows no
// UUIDs) and, for IPv6, grub.cfg-<address with dashes> (left out too: ip
// must be IPv4 for IP names).
func GRUBChain(mac net.HardwareAddr, ip netip.Addr) []string {
	var names []string
	if m, ok := macName(mac); ok {
		names = append(names, "grub.cfg-"+m)
	}
	for _, n := range ipNames(ip) {
		names = append(names, "grub.cfg-"+n)
	}
	return append(names, "grub.cfg")
}
