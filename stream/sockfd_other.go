//go:build !linux && !windows

package stream

// sockfd is a RawConn's descriptor as syscall's socket calls take it.
func sockfd(fd uintptr) int { return int(fd) }
