package netif

import (
	"bufio"
	"net"
	"os"
	"strings"
)

// DefaultRoute names the interfaces that hold an IPv4 default route
// (/proc/net/route; none where there is no such file): the uplink of a
// workstation, where answering PXE clients would reach the office
// network.
func DefaultRoute() map[string]bool {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		fs := strings.Fields(sc.Text())
		if len(fs) >= 8 && fs[1] == "00000000" && fs[7] == "00000000" {
			out[fs[0]] = true
		}
	}
	return out
}

// Candidates lists the up, non-loopback interfaces with IPv4, as
// "NAME ADDR/BITS", in the order Resolve picks from.
func Candidates() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []string
	for i := range ifs {
		ifc := &ifs[i]
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		for _, p := range ipv4Prefixes(ifc) {
			out = append(out, ifc.Name+" "+p.String())
		}
	}
	return out
}
