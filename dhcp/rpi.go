package dhcp

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The Raspberry Pi 4/5 EEPROM bootloader sends option 60
// "PXEClient:Arch:00000:UNDI:002001" and option 93 = 0, as an x86 BIOS ROM
// does, but it boots none of that: it accepts only an offer whose option 43
// has a PXE boot menu (sub-option 9) naming "Raspberry Pi Boot", ignores
// the boot file, and loads its firmware over TFTP from option 66 (a dotted
// quad), else siaddr. See DESIGN.md#raspberry-pi.

// RPiInfo is what a Raspberry Pi bootloader's option 97 says: a FourCC
// ("RPi4", "RPi5"), the board revision, the low four bytes of its MAC and
// its serial number, each four bytes little-endian after the type byte 0.
type RPiInfo struct {
	Model    string // "RPi4" or "RPi5"; "RPi" when option 97 has another prefix
	Revision uint32 // e.g. 0x00c03111 (Pi 4 B 4GB)
	MACLow   [4]byte
	Serial   uint32
}

// SerialString is the serial as the bootloader names its TFTP folder:
// eight lower-case hex digits.
func (i RPiInfo) SerialString() string { return serialHex(i.Serial) }

func serialHex(s uint32) string {
	const digits = "0123456789abcdef"
	var b [8]byte
	for k := 7; k >= 0; k-- {
		b[k] = digits[s&0xf]
		s >>= 4
	}
	return string(b[:])
}

// ParseRPiOption97 reads a Raspberry Pi's option 97 (client machine
// identifier, RFC 4578: type 0 and 16 bytes). ok is false for any other
// value: a PC's SMBIOS UUID, a wrong length, an unknown FourCC.
func ParseRPiOption97(v []byte) (RPiInfo, bool) {
	if len(v) != 17 || v[0] != 0 {
		return RPiInfo{}, false
	}
	var model string
	switch string(v[1:5]) {
	case "RPi4":
		model = "RPi4"
	case "RPi5":
		model = "RPi5"
	default:
		return RPiInfo{}, false
	}
	i := RPiInfo{Model: model, Revision: binary.LittleEndian.Uint32(v[5:9]),
		Serial: binary.LittleEndian.Uint32(v[13:17])}
	copy(i.MACLow[:], v[9:13])
	return i, true
}

// AppendRPiOption97 encodes i as ParseRPiOption97 reads it (the test
// client sends what a Pi sends).
func AppendRPiOption97(b []byte, i RPiInfo) []byte {
	b = append(b, 0)
	b = append(b, i.Model...)
	b = binary.LittleEndian.AppendUint32(b, i.Revision)
	b = append(b, i.MACLow[:]...)
	return binary.LittleEndian.AppendUint32(b, i.Serial)
}

// rpiOUIs are the Ethernet OUIs of Raspberry Pi boards.
var rpiOUIs = [...][3]byte{{0xb8, 0x27, 0xeb}, {0xdc, 0xa6, 0x32}, {0xe4, 0x5f, 0x01}, {0xd8, 0x3a, 0xdd}, {0x2c, 0xcf, 0x67}}

// IsRPiMAC reports whether mac is in a Raspberry Pi OUI.
func IsRPiMAC(mac net.HardwareAddr) bool {
	if len(mac) != 6 {
		return false
	}
	for _, o := range rpiOUIs {
		if mac[0] == o[0] && mac[1] == o[1] && mac[2] == o[2] {
			return true
		}
	}
	return false
}

// rpiVendorClass is the option 60 prefix of the Pi bootloader: PXE, x86
// BIOS architecture.
const rpiVendorClass = "PXEClient:Arch:00000"

// isRPi reports whether a request is a Raspberry Pi bootloader's: its
// option 97 says so, or it is a BIOS PXE client (option 60) from a Pi OUI
// (a bootloader whose DHCP_OPTION97 is configured to something else).
func isRPi(mac net.HardwareAddr, vendor string, opt97 []byte) (RPiInfo, bool) {
	if len(opt97) == 17 && opt97[1] == 'R' {
		if i, ok := ParseRPiOption97(opt97); ok {
			return i, true
		}
	}
	if strings.HasPrefix(vendor, rpiVendorClass) && IsRPiMAC(mac) {
		return rpiOtherOption97(opt97), true
	}
	return RPiInfo{}, false
}

// rpiOtherOption97 reads the serial of a Pi whose DHCP_OPTION97 is not the
// default: 0 sends the serial four times (the old format), any other value
// replaces only the FourCC, so the serial stays the last word. Model
// "RPi" marks a serial read so; a value of another shape gives none.
func rpiOtherOption97(v []byte) RPiInfo {
	if len(v) != 17 || v[0] != 0 {
		return RPiInfo{}
	}
	i := RPiInfo{Model: "RPi", Serial: binary.LittleEndian.Uint32(v[13:17])}
	if string(v[1:5]) != string(v[13:17]) || string(v[5:9]) != string(v[13:17]) {
		i.Revision = binary.LittleEndian.Uint32(v[5:9])
		copy(i.MACLow[:], v[9:13])
	}
	return i
}

// rpiVendorOption is option 43 as dnsmasq sends it for
// pxe-service=0,"Raspberry Pi Boot": discovery control 3 (no broadcast or
// multicast discovery), menu prompt (sub-option 10: timeout 0, "PXE") and
// the boot menu (sub-option 9: type 0 "local boot", description length 17,
// "Raspberry Pi Boot"), the item the bootloader looks for.
var rpiVendorOption = func() []byte {
	b := []byte{pxeDiscControl, 1, 3, pxeMenuPrompt, 4, 0, 'P', 'X', 'E'}
	b = append(b, pxeBootMenu, 3+byte(len(rpiMenuItem)), 0, 0, byte(len(rpiMenuItem)))
	b = append(b, rpiMenuItem...)
	return append(b, 255)
}()

const (
	pxeBootMenu   = 9  // option 43 sub-option: PXE_BOOT_MENU
	pxeMenuPrompt = 10 // option 43 sub-option: PXE_MENU_PROMPT
	rpiMenuItem   = "Raspberry Pi Boot"
)

// HasRPiBootMenu reports whether an option 43 value carries a PXE boot
// menu (sub-option 9) with an item "Raspberry Pi Boot": the test the
// bootloader applies to an offer before it takes it.
func HasRPiBootMenu(opt43 []byte) bool {
	for len(opt43) >= 2 {
		code, n := opt43[0], int(opt43[1])
		if code == 255 || len(opt43) < 2+n {
			return false
		}
		if code == pxeBootMenu && menuHas(opt43[2:2+n], rpiMenuItem) {
			return true
		}
		opt43 = opt43[2+n:]
	}
	return false
}

// menuHas walks boot menu items: type (2 bytes), length, description.
func menuHas(m []byte, item string) bool {
	for len(m) >= 3 {
		n := int(m[2])
		if len(m) < 3+n {
			return false
		}
		if strings.Contains(string(m[3:3+n]), item) {
			return true
		}
		m = m[3+n:]
	}
	return false
}

// rpiLog is the log value of a Pi's identity.
func (i RPiInfo) String() string {
	if i.Model == "" {
		return "rpi (no option 97)"
	}
	return i.Model + " rev " + strconv.FormatUint(uint64(i.Revision), 16) + " serial " + i.SerialString()
}

// applyRPi writes what a Pi bootloader takes from an offer: option 66 as
// a dotted quad whether or not it asked (it prefers it to siaddr), option
// 60 PXEClient, the boot menu option 43 without which it ignores the offer,
// and its option 97 back, as a PXE server does. No file and no option 67:
// an x86 boot file there would only mislead a reader of the capture.
func applyRPi(r *reply, req *msg, tftpServer netip.Addr) {
	r.setString(optTFTPServer, tftpServer.String())
	r.setString(optClassID, classPXE)
	r.set(optVendor, rpiVendorOption)
	if uuid := req.get(optClientUUID); uuid != nil {
		r.set(optClientUUID, uuid)
	}
}
