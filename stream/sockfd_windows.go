//go:build windows

package stream

import "syscall"

// sockfd is a RawConn's socket as syscall's socket calls take it: a
// Handle on Windows.
func sockfd(fd uintptr) syscall.Handle { return syscall.Handle(fd) }
