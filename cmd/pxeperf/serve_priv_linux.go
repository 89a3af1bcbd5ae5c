//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/pxeperf/pxeperf/configs"
	"golang.org/x/sys/unix"
)

// checkPrivileges refuses serve, before it creates a folder or binds a
// socket, when the process lacks what its sockets need:
// CAP_NET_BIND_SERVICE for a port below net.ipv4.ip_unprivileged_port_start
// (DHCP 67, TFTP 69, HTTP 80), and CAP_NET_RAW where the kernel wants it
// for SO_BINDTODEVICE (DHCP bound to iface; tried on a socket that binds
// nothing). Root, or a process with the capabilities, passes.
func checkPrivileges(cfg *configs.Config, dhcpOn bool, iface string) error {
	var missing []string
	if low := lowPorts(cfg, dhcpOn, unprivilegedPortStart()); len(low) > 0 && !hasCap(unix.CAP_NET_BIND_SERVICE) {
		missing = append(missing, "CAP_NET_BIND_SERVICE to bind ports below "+strconv.Itoa(unprivilegedPortStart())+
			" ("+strings.Join(low, ", ")+")")
	}
	if dhcpOn && iface != "" {
		if err := tryBindToDevice(iface); errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			missing = append(missing, "CAP_NET_RAW to bind DHCP to "+iface+" (SO_BINDTODEVICE)")
		}
	}
	if len(missing) > 0 {
		return privError(missing)
	}
	return nil
}

// unprivilegedPortStart is net.ipv4.ip_unprivileged_port_start of the
// network namespace (1024 when it cannot be read).
func unprivilegedPortStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 1024
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 1024
	}
	return n
}

// hasCap reports whether capability c is in the process's effective set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return os.Geteuid() == 0
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}

// tryBindToDevice sets SO_BINDTODEVICE on a UDP socket that is never
// bound, as DHCP's sockets will.
func tryBindToDevice(iface string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.BindToDevice(fd, iface)
}

// lowPorts lists the enabled listeners of cfg ("tftp :69") whose port is
// below start, the first port a process may bind without
// CAP_NET_BIND_SERVICE; dhcpOn adds DHCP's ports.
func lowPorts(cfg *configs.Config, dhcpOn bool, start int) []string {
	var out []string
	add := func(name, listen string) {
		_, p, err := net.SplitHostPort(listen)
		if err != nil {
			return
		}
		if n, err := strconv.Atoi(p); err == nil && n > 0 && n < start {
			out = append(out, name+" :"+p)
		}
	}
	if dhcpOn {
		add("dhcp", fmt.Sprintf(":%d", cfg.DHCP.Port))
		if cfg.DHCP.Mode == configs.ModeProxy {
			add("proxyDHCP", fmt.Sprintf(":%d", cfg.DHCP.ProxyPort))
		}
	}
	if cfg.TFTP.Enabled {
		add("tftp", cfg.TFTP.Listen)
	}
	if cfg.HTTP.Enabled {
		add("http", cfg.HTTP.Listen)
	}
	if cfg.Stream.Enabled {
		add("stream", cfg.Stream.Listen)
	}
	if cfg.Iperf3.Enabled {
		add("iperf3", cfg.Iperf3.Listen)
	}
	if cfg.Iperf2.Enabled {
		add("iperf2", cfg.Iperf2.Listen)
	}
	if cfg.Admin.Listen != configs.AdminOff {
		add("admin", cfg.Admin.Listen)
	}
	return out
}

// privError is serve refused before it creates or binds anything: what it
// lacks, as whom, and the fixes.
func privError(missing []string) error {
	sort.Strings(missing)
	who := fmt.Sprintf("uid %d", os.Geteuid())
	return fmt.Errorf("serve lacks the privileges its sockets need (running as %s, not root): %s; nothing was created.\n"+
		"Run it as root (sudo pxeperf serve ...), or give the binary the capabilities once:\n"+
		"  sudo setcap cap_net_bind_service,cap_net_raw,cap_net_admin+ep \"$(command -v pxeperf)\"\n"+
		"or serve above port 1024 without DHCP: --http-addr :8080 --tftp-addr :6969 --dhcp off",
		who, strings.Join(missing, "; "))
}
