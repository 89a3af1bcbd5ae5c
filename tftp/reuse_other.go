//go:build !linux

package tftp

import (
	"errors"
	"syscall"
)

// shareAddr: single-port mode relies on Linux preferring connected UDP
// sockets; elsewhere it is refused.
func shareAddr(_, _ string, _ syscall.RawConn) error {
	return errors.New("tftp single-port mode needs Linux; turn tftp.single_port off")
}
