package configs

import "sort"

// Arch is a client system architecture from DHCP option 93 (RFC 4578 and the
// IANA "Processor Architecture Types" registry).
type Arch struct {
	Code uint16
	Name string // config key in dhcp.boot_files
	// HTTP is true for UEFI/U-Boot HTTP boot clients: they get a URL as boot
	// file and option 60 "HTTPClient".
	HTTP bool
	// DefaultFile is the boot file sent when dhcp.boot_files has no entry;
	// "" for U-Boot's codes, which take dhcp.boot_files.uboot.
	DefaultFile string
	// Sibling is the PXE architecture whose configured boot file an HTTP
	// boot architecture takes when it has none of its own: one UEFI
	// application serves both ways, so one config line (efi-arm64: x.efi)
	// is enough for PXE and HTTP boot.
	Sibling string
	// UBoot marks U-Boot's own codes (21-24).
	UBoot bool
}

// ArchUnknown is used when a client sends no option 93 (treated as BIOS, as
// PXE 2.1 says), or a code pxeperf does not know.
const ArchUnknown uint16 = 0xffff

// Boot file keys of dhcp.boot_files that are not architectures.
const (
	// BootUBoot is the file for U-Boot clients (option 60 "U-Boot...") that
	// no configured architecture entry covers. Default boot.scr.uimg, the
	// script U-Boot's distro boot asks for over DHCP.
	BootUBoot = "uboot"
	// BootDefault is the file for clients that send no option 93 and no
	// class pxeperf knows (many vendor U-Boot builds): never an empty file.
	// Default boot.scr.uimg.
	BootDefault = "default"
	// DefaultUBootFile is what U-Boot's distro boot (bootcmd_dhcp) fetches.
	DefaultUBootFile = "boot.scr.uimg"
)

// Archs lists the architectures pxeperf knows, by option 93 code.
var archs = []Arch{
	{Code: 0, Name: "bios", DefaultFile: "undionly.kpxe"},
	{Code: 6, Name: "efi-ia32", DefaultFile: "ipxe-i386.efi"},
	{Code: 7, Name: "efi-x64", DefaultFile: "ipxe.efi"},
	{Code: 9, Name: "efi-x64", DefaultFile: "ipxe.efi"}, // EFI x86-64 (7 is "EFI BC", used the same way)
	{Code: 10, Name: "efi-arm32", DefaultFile: "ipxe-arm32.efi"},
	{Code: 11, Name: "efi-arm64", DefaultFile: "ipxe-arm64.efi"},
	{Code: 15, Name: "http-ia32", HTTP: true, DefaultFile: "ipxe-i386.efi", Sibling: "efi-ia32"},
	{Code: 16, Name: "http-x64", HTTP: true, DefaultFile: "ipxe.efi", Sibling: "efi-x64"},
	{Code: 18, Name: "http-arm32", HTTP: true, DefaultFile: "ipxe-arm32.efi", Sibling: "efi-arm32"},
	{Code: 19, Name: "http-arm64", HTTP: true, DefaultFile: "ipxe-arm64.efi", Sibling: "efi-arm64"},
	{Code: 21, Name: "uboot-arm32", UBoot: true},
	{Code: 22, Name: "uboot-arm64", UBoot: true},
	{Code: 23, Name: "uboot-http-arm32", HTTP: true, UBoot: true, Sibling: "uboot-arm32"},
	{Code: 24, Name: "uboot-http-arm64", HTTP: true, UBoot: true, Sibling: "uboot-arm64"},
	{Code: 25, Name: "efi-riscv32", DefaultFile: "ipxe-riscv32.efi"},
	{Code: 26, Name: "http-riscv32", HTTP: true, DefaultFile: "ipxe-riscv32.efi", Sibling: "efi-riscv32"},
	{Code: 27, Name: "efi-riscv64", DefaultFile: "ipxe-riscv64.efi"},
	{Code: 28, Name: "http-riscv64", HTTP: true, DefaultFile: "ipxe-riscv64.efi", Sibling: "efi-riscv64"},
	{Code: 39, Name: "efi-loongarch64", DefaultFile: "ipxe-loong64.efi"},
	{Code: 40, Name: "http-loongarch64", HTTP: true, DefaultFile: "ipxe-loong64.efi", Sibling: "efi-loongarch64"},
	{Code: 41, Name: "rpiboot", DefaultFile: "bootcode.bin"},
}

// Archs returns the known architectures, one per config name, in table
// order.
func Archs() []Arch {
	seen := map[string]bool{}
	var out []Arch
	for _, a := range archs {
		if !seen[a.Name] {
			seen[a.Name] = true
			out = append(out, a)
		}
	}
	return out
}

// AllArchs returns every option 93 code pxeperf knows, in code order
// (several codes may share a config name).
func AllArchs() []Arch { return append([]Arch(nil), archs...) }

// ArchByCode returns the architecture for an option 93 code.
func ArchByCode(code uint16) (Arch, bool) {
	for _, a := range archs {
		if a.Code == code {
			return a, true
		}
	}
	return Arch{}, false
}

// ArchByName returns the first architecture with that config name.
func ArchByName(name string) (Arch, bool) {
	for _, a := range archs {
		if a.Name == name {
			return a, true
		}
	}
	return Arch{}, false
}

// ArchNames lists the config names of all known architectures, sorted.
func ArchNames() []string {
	var names []string
	for _, a := range Archs() {
		names = append(names, a.Name)
	}
	sort.Strings(names)
	return names
}

// BootFileKeys lists every key dhcp.boot_files accepts: the architecture
// names, "uboot" and "default".
func BootFileKeys() []string {
	return append(ArchNames(), BootUBoot, BootDefault)
}

// Configured returns the boot file the config sets for an architecture: its
// own entry, else (HTTP boot) its sibling's. ok is false when neither is set.
func (d *DHCP) Configured(a Arch) (string, bool) {
	if f := d.BootFiles[a.Name]; f != "" {
		return f, true
	}
	if a.Sibling != "" {
		if f := d.BootFiles[a.Sibling]; f != "" {
			return f, true
		}
	}
	return "", false
}

// BootFile returns the boot file for an architecture: the configured one
// (see Configured), else its default; U-Boot's codes take UBootFile.
func (d *DHCP) BootFile(a Arch) string {
	if f, ok := d.Configured(a); ok {
		return f
	}
	if a.UBoot {
		return d.UBootFile()
	}
	return a.DefaultFile
}

// BootFileKey is the dhcp.boot_files key that decides an architecture's
// boot file, and so the one to set to change it: its own name when set,
// else its sibling's when set, else "uboot" for U-Boot's codes, else the
// sibling's (one line for PXE and HTTP boot), else its own name.
func (d *DHCP) BootFileKey(a Arch) string {
	switch {
	case d.BootFiles[a.Name] != "":
		return a.Name
	case a.Sibling != "" && d.BootFiles[a.Sibling] != "":
		return a.Sibling
	case a.UBoot:
		return BootUBoot
	case a.Sibling != "":
		return a.Sibling
	}
	return a.Name
}

// UBootFile is dhcp.boot_files.uboot, default boot.scr.uimg.
func (d *DHCP) UBootFile() string {
	if f := d.BootFiles[BootUBoot]; f != "" {
		return f
	}
	return DefaultUBootFile
}

// DefaultFile is dhcp.boot_files.default: the file for clients that say
// neither their architecture nor a known class. Default: UBootFile, since
// the netbooting firmware that does not introduce itself is mostly U-Boot.
func (d *DHCP) DefaultFile() string {
	if f := d.BootFiles[BootDefault]; f != "" {
		return f
	}
	return d.UBootFile()
}
