//go:build !linux

package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// listenUDP without SO_BINDTODEVICE: pxeperf serves DHCP on Linux only,
// because replies must be pinned to the interface the board is on.
func listenUDP(ctx context.Context, ifname string, port int) (*net.UDPConn, error) {
	if ifname != "" {
		return nil, errors.New("binding DHCP to an interface needs Linux (SO_BINDTODEVICE); run pxeperf on Linux or use --dhcp off")
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}
