package dhcp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
)

// Option codes pxeperf reads or writes that dhcpv4 has no helper for.
const (
	optUserClass   = 77
	optClientArch  = 93
	optClientUUID  = 97
	optIPXEEncap   = 175 // iPXE's encapsulated options
	ipxeNoPXEDHCP  = 176 // sub-option of 175: do not wait for proxyDHCP
	pxeDiscControl = 6   // option 43 sub-option: PXE_DISCOVERY_CONTROL
)

// Client classes from option 60.
const (
	classPXE  = "PXEClient"
	classHTTP = "HTTPClient"
)

// client is what a request says about its sender.
type client struct {
	MAC    net.HardwareAddr
	Arch   uint16 // option 93, configs.ArchUnknown when absent
	Vendor string // option 60 as sent
	PXE    bool   // option 60 starts with "PXEClient"
	HTTP   bool   // option 60 starts with "HTTPClient"
	IPXE   bool   // user class "iPXE" (option 77) or option 175 present
}

// classify reads the boot-relevant options of a request.
func classify(req *dhcpv4.DHCPv4) client {
	c := client{MAC: req.ClientHWAddr, Arch: configs.ArchUnknown}
	if v := req.Options.Get(dhcpv4.GenericOptionCode(optClientArch)); len(v) >= 2 {
		c.Arch = binary.BigEndian.Uint16(v)
	}
	c.Vendor = string(req.Options.Get(dhcpv4.OptionClassIdentifier))
	c.PXE = strings.HasPrefix(c.Vendor, classPXE)
	c.HTTP = strings.HasPrefix(c.Vendor, classHTTP)
	c.IPXE = req.Options.Has(dhcpv4.GenericOptionCode(optIPXEEncap)) ||
		isIPXEUserClass(req.Options.Get(dhcpv4.GenericOptionCode(optUserClass)))
	return c
}

// isIPXEUserClass accepts iPXE's plain "iPXE" and the RFC 3004 form
// (length-prefixed strings) that some builds send.
func isIPXEUserClass(v []byte) bool {
	if bytes.Equal(v, []byte("iPXE")) {
		return true
	}
	for len(v) > 0 {
		n := int(v[0])
		if n == 0 || 1+n > len(v) {
			return false
		}
		if string(v[1:1+n]) == "iPXE" {
			return true
		}
		v = v[1+n:]
	}
	return false
}

// bootReply is the boot information a client gets.
type bootReply struct {
	File      string // file field and option 67
	Class     string // option 60 sent back, "" for none
	PXEVendor bool   // option 43 with discovery control 8
	IPXE      bool   // option 175.176 = 1
}

// booter decides boot files; it holds what the decision depends on besides
// the client.
type booter struct {
	dhcp     *configs.DHCP
	httpBase string // "http://ADDR[:PORT]"
}

// newBooter derives the URL base from the server address and the HTTP listen
// address (":80" gives no port in URLs).
func newBooter(d *configs.DHCP, addr netip.Addr, httpListen string) booter {
	base := "http://" + addr.String()
	if _, port, err := net.SplitHostPort(httpListen); err == nil && port != "" && port != "80" {
		if _, err := strconv.Atoi(port); err == nil {
			base += ":" + port
		}
	}
	return booter{dhcp: d, httpBase: base}
}

// url makes a boot file name into a full http:// URL unless it is one.
func (b booter) url(file string) string {
	if strings.HasPrefix(file, "http://") || strings.HasPrefix(file, "https://") {
		return file
	}
	return b.httpBase + "/" + strings.TrimLeft(file, "/")
}

// scriptURL is the iPXE script URL handed to iPXE. Unless the configured
// path has a query of its own, it carries ?mac=${net0/mac}: iPXE expands
// settings in the DHCP filename, so the script server learns the MAC even in
// proxy mode, where no lease maps the client's address to it.
func (b booter) scriptURL() string {
	u := b.httpBase + b.dhcp.IPXEScript
	if !strings.Contains(b.dhcp.IPXEScript, "?") {
		u += "?mac=${net0/mac}"
	}
	return u
}

// decide picks the boot reply for a client. ok is false for clients that get
// no boot information: in proxy mode anything without option 60
// PXEClient/HTTPClient; in full mode, clients that neither say they boot
// (option 60, 93, iPXE) nor have a host entry with a boot file.
//
// iPXE always gets the HTTP script URL (never a boot file it would chainload
// again); UEFI HTTP boot gets a URL and "HTTPClient"; PXE ROMs get the file
// for their architecture (no option 93: BIOS) with option 43 so they skip
// PXE boot-server discovery. A host entry's boot_file overrides the arch map.
func (b booter) decide(c client, host *configs.Host, proxy bool) (bootReply, bool) {
	if proxy && !c.PXE && !c.HTTP {
		return bootReply{}, false
	}
	hostFile := ""
	if host != nil {
		hostFile = host.BootFile
	}
	if !proxy && !c.PXE && !c.HTTP && !c.IPXE && c.Arch == configs.ArchUnknown && hostFile == "" {
		return bootReply{}, false
	}
	var r bootReply
	switch {
	case c.PXE:
		r.Class = classPXE
	case c.HTTP:
		r.Class = classHTTP
	}
	if c.IPXE {
		r.File = b.scriptURL()
		r.IPXE = true
		return r, true
	}
	file := hostFile
	if file == "" {
		arch, ok := configs.ArchByCode(c.Arch)
		if !ok {
			arch, _ = configs.ArchByCode(0) // PXE 2.1: no option 93 means BIOS
		}
		file = b.dhcp.BootFile(arch)
	}
	if c.HTTP {
		r.File = b.url(file)
		return r, true
	}
	r.File = file
	r.PXEVendor = c.PXE
	return r, true
}

// applyBoot writes the boot reply into a DHCP reply.
func applyBoot(r *dhcpv4.DHCPv4, req *dhcpv4.DHCPv4, b bootReply, server netip.Addr) {
	r.ServerIPAddr = net.IP(server.AsSlice())
	if len(b.File) < 128 {
		r.BootFileName = b.File
	}
	r.UpdateOption(dhcpv4.OptTFTPServerName(server.String()))
	r.UpdateOption(dhcpv4.OptBootFileName(b.File))
	if b.Class != "" {
		r.UpdateOption(dhcpv4.OptClassIdentifier(b.Class))
	}
	if b.PXEVendor {
		r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation, []byte{pxeDiscControl, 1, 8, 255}))
	}
	if b.IPXE {
		r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(optIPXEEncap), []byte{ipxeNoPXEDHCP, 1, 1}))
	}
	if uuid := req.Options.Get(dhcpv4.GenericOptionCode(optClientUUID)); uuid != nil && b.Class == classPXE {
		r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(optClientUUID), uuid))
	}
}
