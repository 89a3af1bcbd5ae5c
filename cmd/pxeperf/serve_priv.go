package main

import (
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/pxeperf/pxeperf/configs"
)

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
	if cfg.Bench.Enabled {
		add("bench", cfg.Bench.Listen)
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
