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
	// DefaultFile is the boot file sent when dhcp.boot_files has no entry.
	DefaultFile string
}

// ArchUnknown is used when a client sends no option 93 (treated as BIOS, as
// PXE 2.1 says), or a code pxeperf does not know.
const ArchUnknown uint16 = 0xffff

// Archs lists the architectures pxeperf knows, by option 93 code.
var archs = []Arch{
	{0, "bios", false, "undionly.kpxe"},
	{6, "efi-ia32", false, "ipxe-i386.efi"},
	{7, "efi-x64", false, "ipxe.efi"},
	{9, "efi-x64", false, "ipxe.efi"}, // EFI x86-64 (7 is "EFI BC", used the same way)
	{10, "efi-arm32", false, "ipxe-arm32.efi"},
	{11, "efi-arm64", false, "ipxe-arm64.efi"},
	{15, "http-ia32", true, "ipxe-i386.efi"},
	{16, "http-x64", true, "ipxe.efi"},
	{18, "http-arm32", true, "ipxe-arm32.efi"},
	{19, "http-arm64", true, "ipxe-arm64.efi"},
	{21, "uboot-arm32", false, "boot.scr.uimg"},
	{22, "uboot-arm64", false, "boot.scr.uimg"},
	{23, "uboot-http-arm32", true, "boot.scr.uimg"},
	{24, "uboot-http-arm64", true, "boot.scr.uimg"},
	{25, "efi-riscv32", false, "ipxe-riscv32.efi"},
	{26, "http-riscv32", true, "ipxe-riscv32.efi"},
	{27, "efi-riscv64", false, "ipxe-riscv64.efi"},
	{28, "http-riscv64", true, "ipxe-riscv64.efi"},
	{39, "efi-loongarch64", false, "ipxe-loong64.efi"},
	{40, "http-loongarch64", true, "ipxe-loong64.efi"},
	{41, "rpiboot", false, "bootcode.bin"},
}

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
	seen := map[string]bool{}
	var names []string
	for _, a := range archs {
		if !seen[a.Name] {
			seen[a.Name] = true
			names = append(names, a.Name)
		}
	}
	sort.Strings(names)
	return names
}

// BootFile returns the boot file for an architecture: the configured one for
// its name, else its default.
func (d *DHCP) BootFile(a Arch) string {
	if f, ok := d.BootFiles[a.Name]; ok && f != "" {
		return f
	}
	return a.DefaultFile
}
