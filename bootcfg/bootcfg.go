// Package bootcfg generates per-host boot configs for the loaders that
// boards chain to after the firmware's DHCP/TFTP step: pxelinux (and U-Boot's
// `pxe get`, which reads the same files), GRUB's network boot, and U-Boot
// distro boot's boot.scr.uimg script. A lab writes one hosts entry with a
// kernel, initrd, command line and device tree, and every loader family gets
// a config built from it instead of hand-written files under pxelinux.cfg/.
//
// The package is pure: it classifies requested names (Match), lists the
// names a loader tries (PXELinuxChain, GRUBChain), parses and renders
// text/template templates (Builtin, Parse, Render) and wraps U-Boot scripts
// in legacy uImages (ScriptImage). It opens no sockets, reads no config and
// knows nothing of hosts tables or records. The integration layer lives in
// source.go: it asks Match about each TFTP/HTTP name that is not a file in
// the root, finds the host by MAC or address, fills Data and serves what
// Render returns.
//
// Formats follow the loaders' sources: syslinux's pxelinux and U-Boot
// 2023.01 (Debian 12) boot/pxe_utils.c and cmd/pxe.c for the pxelinux.cfg/
// names, GRUB 2.06 grub-core/net/net.c grub_net_search_config_file for the
// grub.cfg-* names, U-Boot include/image.h, tools/mkimage.c and cmd/source.c
// for the script image.
package bootcfg

// Loader is a loader family whose configs the package generates.
type Loader string

// The loader families. The values are the names used in config keys
// (hosts[NAME].templates.uboot).
const (
	PXELinux Loader = "pxelinux" // pxelinux.cfg/* (syslinux, U-Boot `pxe get`)
	GRUB     Loader = "grub"     // grub.cfg, grub.cfg-01-MAC, grub.cfg-HEXIP
	UBoot    Loader = "uboot"    // boot.scr.uimg (distro boot bootcmd_dhcp)
)
