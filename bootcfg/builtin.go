package bootcfg

// Builtin returns the built-in template text for a loader, "" for an
// unknown one. Every built-in names the host on its first line; without a
// kernel it carries out the host's default_boot (local, shell), or says
// that no kernel is set and how to fix it, and boots nothing.
func Builtin(l Loader) string {
	switch l {
	case PXELinux:
		return builtinPXELinux
	case GRUB:
		return builtinGRUB
	case UBoot:
		return builtinUBoot
	}
	return ""
}

// noKernel is the hint every built-in gives for a client without a kernel.
const noKernel = `pxeperf: no kernel is set for {{.Who}}; add a hosts entry with kernel/initrd/cmdline (see pxeperf README)`

// builtinPXELinux is read by syslinux's pxelinux and by U-Boot's `pxe`
// (boot/pxe_utils.c). Names are left as given: both resolve them against
// the bootfile's folder. U-Boot expands ${var} in append; syslinux does
// not. fdt/fdtdir are U-Boot keywords. Without a kernel: `say` (syslinux
// prints it, U-Boot prints it as an ignored command) and a label
// `localboot -1`, which makes syslinux return to the firmware and U-Boot's
// pxe boot give up, so the next boot target runs. default_boot local is
// `localboot 0`: syslinux's normal local boot, and U-Boot's pxe runs the
// board's ${localcmd} when it has one, else gives up as for -1. shell
// has no label and prompt 1 with timeout 0: syslinux waits at boot: for a
// person (U-Boot's pxe, with nothing to choose, goes on).
const builtinPXELinux = `# pxeperf: pxelinux config for {{.Who}}
{{- if .Kernel}}
default pxeperf
prompt 0
timeout 10

label pxeperf
  kernel {{.Kernel}}
{{- if .Initrd}}
  initrd {{.Initrd}}
{{- end}}
{{- if .FDT}}
  fdt {{.FDT}}
{{- else if .FDTDir}}
  fdtdir {{.FDTDir}}
{{- end}}
{{- with oneline .Cmdline}}
  append {{.}}
{{- end}}
{{- else if eq .DefaultBoot "local"}}
say pxeperf: {{.Who}} boots from its local disk (default_boot: local)
default pxeperf-local
prompt 0
timeout 10

label pxeperf-local
  localboot 0
{{- else if eq .DefaultBoot "shell"}}
say pxeperf: {{.Who}} waits at the pxelinux prompt for a person (default_boot shell)
prompt 1
timeout 0
{{- else}}
say ` + noKernel + `
default pxeperf-none
prompt 0
timeout 10

label pxeperf-none
  localboot -1
{{- end}}
`

// builtinGRUB is read by GRUB's network boot; its root is (tftp,SERVER),
// so names are used as given. The command line goes through grubargs so
// the kernel sees it as pxelinux would pass it. GRUB has no fdtdir.
// Without a kernel there is no menu entry, so GRUB stops at its prompt
// under the message; that is also default_boot shell. default_boot local
// under UEFI chainloads the removable-media loader (\EFI\BOOT\BOOT<arch>.EFI)
// of the first disk that has one: GRUB 2.06's exit returns success, for
// which an EDK2 boot manager shows its menu instead of trying the next
// boot option. Otherwise (BIOS, no such file, a failed boot) `exit`.
const builtinGRUB = `# pxeperf: GRUB config for {{.Who}}
{{- if .Kernel}}
echo {{grubword (printf "pxeperf: GRUB config for %s" .Who)}}
set default=0
set timeout=1

menuentry {{grubword (printf "pxeperf: %s" .Kernel)}} {
  echo {{grubword (printf "pxeperf: loading %s" .Kernel)}}
  linux {{grubword .Kernel}}{{with grubargs .Cmdline}} {{.}}{{end}}
{{- if .Initrd}}
  initrd {{grubword .Initrd}}
{{- end}}
{{- if .FDT}}
  devicetree {{grubword .FDT}}
{{- end}}
}
{{- else if eq .DefaultBoot "local"}}
echo {{grubword (printf "pxeperf: %s boots from its local disk (default_boot: local)" .Who)}}
if [ "${grub_platform}" = efi ]; then
  set pxeperf_efi=
  if [ "${grub_cpu}" = x86_64 ]; then set pxeperf_efi=/EFI/BOOT/BOOTX64.EFI; fi
  if [ "${grub_cpu}" = i386 ]; then set pxeperf_efi=/EFI/BOOT/BOOTIA32.EFI; fi
  if [ "${grub_cpu}" = arm64 ]; then set pxeperf_efi=/EFI/BOOT/BOOTAA64.EFI; fi
  if [ "${grub_cpu}" = arm ]; then set pxeperf_efi=/EFI/BOOT/BOOTARM.EFI; fi
  if [ "${grub_cpu}" = riscv64 ]; then set pxeperf_efi=/EFI/BOOT/BOOTRISCV64.EFI; fi
  if [ -n "${pxeperf_efi}" ]; then
    if search --no-floppy --file --set=root "${pxeperf_efi}"; then
      echo "pxeperf: chainloading (${root})${pxeperf_efi}"
      chainloader "${pxeperf_efi}"
      boot
    fi
  fi
fi
echo 'pxeperf: GRUB exits to the firmware'
exit
{{- else if eq .DefaultBoot "shell"}}
echo {{grubword (printf "pxeperf: %s stops at the GRUB prompt for a person (default_boot: shell)" .Who)}}
{{- else}}
echo {{grubword (printf "pxeperf: no kernel is set for %s; add a hosts entry with kernel/initrd/cmdline (see pxeperf README)" .Who)}}
{{- end}}
`

// builtinUBoot is the script distro boot's bootcmd_dhcp sources after
// `dhcp ${scriptaddr} boot.scr.uimg`. It loads over TFTP from ${serverip}
// to the board's standard addresses (kernel_addr_r, ramdisk_addr_r,
// fdt_addr_r) and passes the initrd as ADDR:SIZE. The device tree is FDT,
// or FDTDir/${fdtfile}, loaded to ${fdt_addr_r}, else ${fdtcontroladdr},
// U-Boot's own copy of the board's (QEMU's) tree. Unlike U-Boot's pxe
// (boot/pxe_utils.c label_boot) it skips ${fdt_addr}: on qemu_arm64 that
// is QEMU's tree at the start of RAM, where booti moves an Image whose
// header does not allow placement anywhere. A board without fdt_addr_r
// (qemu_arm64) loads no device tree, as pxe does. A failed FDT load stops
// the boot, a failed FDTDir load does not (as in pxe). Then booti (arm64, riscv64 Image), bootz (arm zImage), zboot
// (x86 bzImage) and bootm (uImage, FIT) in turn: a command that is not
// built in prints "Unknown command" and returns 1 (common/command.c
// cmd_process), a kernel of the wrong format makes the command return 1,
// and hush goes on with the next line (common/cli_hush.c run_list_real
// stops only below -1); a boot that works never returns. U-Boot 2023.01's
// `exit` does not stop a script (cmd/exit.c returns 0), so each step
// checks pxeperf_failed, and the last line says what failed.
//
// default_boot local runs bootcmd_LOCALBOOT (local_boot, when the board
// has it) and then ends, so distro boot goes on with its next target:
// a script cannot stop the boot_targets loop that sourced it, only let it
// go on. shell sets every other target's bootcmd_NAME (not saved: a reset
// boots as before) to a message, so the loop ends with no boot and U-Boot
// gives its prompt; bootcmd_dhcp, running this script, is left alone.
const builtinUBoot = `{{if .Kernel -}}
echo {{quote (printf "pxeperf: boot script for %s: kernel %s" .Who .Kernel)}}
{{- with oneline .Cmdline}}
setenv bootargs {{quote .}}
printenv bootargs
{{- else}}
setenv bootargs
{{- end}}
setenv pxeperf_failed
setenv pxeperf_initrd -
setenv pxeperf_initrd_size 0
setenv pxeperf_fdt ${fdtcontroladdr}
tftpboot ${kernel_addr_r} {{quote .Kernel}} || setenv pxeperf_failed {{quote (printf "could not load %s" .Kernel)}}
{{- if .Initrd}}
if test -z "${pxeperf_failed}"; then
  if tftpboot ${ramdisk_addr_r} {{quote .Initrd}}; then
    setenv pxeperf_initrd ${ramdisk_addr_r}:${filesize}
    setenv pxeperf_initrd_size ${filesize}
  else
    setenv pxeperf_failed {{quote (printf "could not load %s" .Initrd)}}
  fi
fi
{{- end}}
{{- if .FDT}}
if test -z "${pxeperf_failed}"; then
  if test -z "${fdt_addr_r}"; then
    echo pxeperf: fdt_addr_r is not set, {{quote .FDT}} is not loaded
  else
    if tftpboot ${fdt_addr_r} {{quote .FDT}}; then
      setenv pxeperf_fdt ${fdt_addr_r}
    else
      setenv pxeperf_failed {{quote (printf "could not load %s" .FDT)}}
    fi
  fi
fi
{{- else if .FDTDir}}
if test -z "${pxeperf_failed}"; then
  if test -z "${fdt_addr_r}"; then
    echo pxeperf: fdt_addr_r is not set, no device tree is loaded from {{quote (trimslash .FDTDir)}}
  else
    if tftpboot ${fdt_addr_r} {{quote (trimslash .FDTDir)}}/${fdtfile}; then
      setenv pxeperf_fdt ${fdt_addr_r}
    else
      echo pxeperf: no device tree {{quote (trimslash .FDTDir)}}/${fdtfile}, booting with ${pxeperf_fdt}
    fi
  fi
fi
{{- end}}
if test -z "${pxeperf_failed}"; then
  setenv pxeperf_failed {{quote (printf "%s did not boot with booti, bootz, zboot or bootm" .Kernel)}}
  echo pxeperf: booting ${kernel_addr_r} ${pxeperf_initrd} ${pxeperf_fdt}
  booti ${kernel_addr_r} ${pxeperf_initrd} ${pxeperf_fdt}
  bootz ${kernel_addr_r} ${pxeperf_initrd} ${pxeperf_fdt}
{{- if .Initrd}}
  zboot ${kernel_addr_r} 0 ${ramdisk_addr_r} ${pxeperf_initrd_size}
{{- else}}
  zboot ${kernel_addr_r}
{{- end}}
  bootm ${kernel_addr_r} ${pxeperf_initrd} ${pxeperf_fdt}
fi
echo {{quote (printf "pxeperf: boot failed for %s:" .Who)}} ${pxeperf_failed}
{{- else if eq .DefaultBoot "local" -}}
echo {{quote (printf "pxeperf: %s boots from its local disk (default_boot: local)" .Who)}}
{{- with .LocalBoot}}
if test -n "${bootcmd_{{.}}}"; then
  echo {{quote (printf "pxeperf: running bootcmd_%s (local_boot)" .)}}
  run bootcmd_{{.}}
  echo {{quote (printf "pxeperf: bootcmd_%s returned; distro boot goes on with its next target" .)}}
else
  echo {{quote (printf "pxeperf: this board has no bootcmd_%s (local_boot); distro boot goes on with its next target" .)}}
fi
{{- else}}
echo 'pxeperf: distro boot goes on with its next target'
{{- end}}
exit
{{- else if eq .DefaultBoot "shell" -}}
echo {{quote (printf "pxeperf: %s stops at the U-Boot prompt for a person (default_boot: shell)" .Who)}}
for target in ${boot_targets}; do
  if test "${target}" != dhcp; then
    setenv bootcmd_${target} "echo pxeperf: default_boot shell skips boot target ${target}"
  fi
done
{{- else -}}
echo {{quote (printf "pxeperf: no kernel is set for %s; add a hosts entry with kernel/initrd/cmdline (see pxeperf README)" .Who)}}
{{- end}}
`
