//go:build !linux

package bench

import "errors"

// setRcvbuf is Linux-only for now: other systems fetch autotuned.
func setRcvbuf(_ uintptr, window int) (int, error) {
	if window != WindowAuto {
		return 0, errors.New("--window needs Linux (SO_RCVBUF before connect); use --window auto")
	}
	return 0, nil
}
