//go:build linux

package perfsrv

import (
	"os"
	"slices"
	"strings"
)

// allowedCongestionFile lists the algorithms an unprivileged socket may
// choose (sysctl net.ipv4.tcp_allowed_congestion_control).
const allowedCongestionFile = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

// congestionAllowed reports whether a board may ask for algo (iperf3 -C),
// and the allowed list. serve runs with CAP_NET_ADMIN, with which
// TCP_CONGESTION takes any algorithm the kernel has and loads its module
// if need be; a board gets only what the admin allowed unprivileged
// sockets. An unreadable list allows nothing.
func congestionAllowed(algo string) ([]string, bool) {
	b, err := os.ReadFile(allowedCongestionFile)
	if err != nil {
		return nil, false
	}
	allowed := strings.Fields(string(b))
	return allowed, slices.Contains(allowed, algo)
}
