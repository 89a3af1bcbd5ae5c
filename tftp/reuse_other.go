//go:build !linux

package tftp

import (
	"errors"
	"net/netip"
	"syscall"
)

// shareAddr: single-port mode relies on Linux preferring connected UDP
// sockets; elsewhere it is refused.
func shareAddr(_, _ string, _ syscall.RawConn) error {
	return errors.New("tftp single-port mode needs Linux; turn tftp.single_port off")
}

// recvQueued: single-port mode is Linux only (shareAddr), so there is never
// anything to pass on.
func recvQueued(int, []byte) (int, *netip.AddrPort, error) { return 0, nil, nil }
