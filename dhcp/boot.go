package dhcp

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"

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
	classPXE   = "PXEClient"
	classHTTP  = "HTTPClient"
	classUBoot = "U-Boot" // U-Boot's CONFIG_BOOTP_VCI_STRING: "U-Boot.armv8", "U-Boot.armv7", ...
)

// client is what a request says about its sender.
type client struct {
	MAC    net.HardwareAddr
	Arch   uint16 // option 93, configs.ArchUnknown when absent
	Vendor string // option 60 as sent
	PXE    bool   // option 60 starts with "PXEClient"
	HTTP   bool   // option 60 starts with "HTTPClient"
	UBoot  bool   // option 60 starts with "U-Boot"
	IPXE   bool   // user class "iPXE" (option 77) or option 175 present
	// TFTPName is true when the client lists option 66 (TFTP server name)
	// in its parameter request list (option 55).
	TFTPName bool
	RPi      bool    // a Raspberry Pi bootloader (isRPi)
	Pi       RPiInfo // its option 97; Model "" when it sent none
}

// serial is the Pi's serial folder name, "" for any other client (and a Pi
// without option 97), so other clients' sightings allocate nothing.
func (c *client) serial() string {
	if !c.RPi || c.Pi.Model == "" {
		return ""
	}
	return c.Pi.SerialString()
}

// classify reads the boot-relevant options of a request.
func classify(req *msg) client {
	c := client{MAC: req.chaddr, Arch: configs.ArchUnknown}
	if v := req.get(optClientArch); len(v) >= 2 {
		c.Arch = binary.BigEndian.Uint16(v)
	}
	c.Vendor = string(req.get(optClassID))
	c.PXE = strings.HasPrefix(c.Vendor, classPXE)
	c.HTTP = strings.HasPrefix(c.Vendor, classHTTP)
	c.UBoot = strings.HasPrefix(c.Vendor, classUBoot)
	c.TFTPName = req.requested(optTFTPServer)
	c.IPXE = req.present(optIPXEEncap) || isIPXEUserClass(req.get(optUserClass))
	c.Pi, c.RPi = isRPi(c.MAC, c.Vendor, req.get(optClientUUID))
	return c
}

// isIPXEUserClass accepts iPXE's plain "iPXE" and the RFC 3004 form
// (length-prefixed strings) that some builds send.
func isIPXEUserClass(v []byte) bool { return userClassHas(v, "iPXE") }

// bootReply is the boot information a client gets.
type bootReply struct {
	File      string // file field and option 67
	Class     string // option 60 sent back, "" for none
	PXEVendor bool   // option 43 with discovery control 8
	RPi       bool   // option 43 with the Raspberry Pi boot menu, option 66, no boot file
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
	c := configs.Config{HTTP: configs.HTTP{Listen: httpListen}}
	return booter{dhcp: d, httpBase: c.HTTPBase(addr)}
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
// no boot information, which happens only in proxy mode: there anything
// without option 60 PXEClient/HTTPClient is left to the network's DHCP
// server. In full mode every client gets a boot file, never an empty one.
//
// iPXE always gets the HTTP script URL (never a boot file it would chainload
// again); UEFI HTTP boot gets a URL and "HTTPClient"; PXE ROMs get the file
// for their architecture (no option 93: BIOS) with option 43 so they skip
// PXE boot-server discovery. U-Boot (option 60 "U-Boot...") gets the file
// configured for its option 93 architecture, else dhcp.boot_files.uboot;
// a client that sends neither option 93 nor a class pxeperf knows gets
// dhcp.boot_files.default. A host entry's boot_file overrides all of these.
func (b booter) decide(c client, host *configs.Host, proxy bool) (bootReply, bool) {
	if proxy && !c.PXE && !c.HTTP && !c.RPi {
		return bootReply{}, false
	}
	if c.RPi {
		// The bootloader ignores any boot file: it loads start4.elf and
		// the rest by name (see applyRPi).
		return bootReply{Class: classPXE, RPi: true}, true
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
	file := ""
	if host != nil {
		file = host.BootFile
	}
	arch, known := configs.ArchByCode(c.Arch)
	if file == "" {
		file = b.archFile(c, arch, known)
	}
	if c.HTTP || (known && arch.HTTP && !c.PXE) {
		r.File = b.url(file)
		return r, true
	}
	r.File = file
	r.PXEVendor = c.PXE
	return r, true
}

// archFile is the boot file for a client without a host boot_file.
func (b booter) archFile(c client, arch configs.Arch, known bool) string {
	switch {
	case c.UBoot:
		if known {
			if f, ok := b.dhcp.Configured(arch); ok {
				return f
			}
		}
		return b.dhcp.UBootFile()
	case known:
		return b.dhcp.BootFile(arch)
	case c.PXE || c.HTTP:
		// PXE 2.1: no option 93 (or a code pxeperf does not know) means BIOS.
		bios, _ := configs.ArchByCode(0)
		return b.dhcp.BootFile(bios)
	default:
		return b.dhcp.DefaultFile()
	}
}

// applyBoot writes the boot information into a DHCP reply: siaddr
// (next-server) is the TFTP server, which U-Boot, pxelinux and many PXE ROMs
// take as the server to load from; option 66 names it too when the client
// asks for it; the file field and option 67 carry the boot file.
func applyBoot(r *reply, req *msg, c client, b bootReply, tftpServer netip.Addr) {
	r.siaddr = tftpServer
	if b.RPi {
		applyRPi(r, req, tftpServer)
		return
	}
	if len(b.File) < 128 {
		r.file = b.File
	}
	if c.TFTPName {
		r.setString(optTFTPServer, tftpServer.String())
	}
	r.setString(optBootFile, b.File)
	if b.Class != "" {
		r.setString(optClassID, b.Class)
	}
	if b.PXEVendor {
		r.set(optVendor, pxeVendorOption[:])
	}
	if b.IPXE {
		r.set(optIPXEEncap, ipxeOption[:])
	}
	if uuid := req.get(optClientUUID); uuid != nil && b.Class == classPXE {
		r.set(optClientUUID, uuid)
	}
}

var (
	pxeVendorOption = [...]byte{pxeDiscControl, 1, 8, 255} // discovery control 8: boot from the file given
	ipxeOption      = [...]byte{ipxeNoPXEDHCP, 1, 1}
)

// tftpServerAddr is the address boot replies name as next-server: the
// address TFTP listens on when tftp.listen names one, else the server's.
func tftpServerAddr(cfg *configs.Config, addr netip.Addr) netip.Addr {
	if !cfg.TFTP.Enabled {
		return addr
	}
	host, _, err := net.SplitHostPort(cfg.TFTP.Listen)
	if err != nil {
		return addr
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() || a.IsUnspecified() {
		return addr
	}
	return a
}
