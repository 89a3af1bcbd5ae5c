package bench

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// setRcvbuf sets SO_RCVBUF to window (WindowAuto: leaves it) and reads it
// back.
func setRcvbuf(fd uintptr, window int) (int, error) {
	if window != WindowAuto {
		if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, window); err != nil {
			return 0, fmt.Errorf("SO_RCVBUF %d: %w", window, err)
		}
	}
	return unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
}
