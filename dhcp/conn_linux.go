//go:build linux

package dhcp

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenUDP binds 0.0.0.0:port (broadcasts only reach a wildcard socket),
// tied to one interface with SO_BINDTODEVICE so requests from other
// interfaces never reach it and replies, broadcasts included, leave on it.
func listenUDP(ctx context.Context, ifname string, port int) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr != nil {
				serr = fmt.Errorf("SO_BROADCAST: %w", serr)
				return
			}
			if ifname != "" {
				if serr = unix.BindToDevice(int(fd), ifname); serr != nil {
					serr = fmt.Errorf("SO_BINDTODEVICE %s: %w (needs root or CAP_NET_RAW)", ifname, serr)
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}
