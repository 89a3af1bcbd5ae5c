// Package sockopt sets and reads socket options on a connection's
// descriptor. syscall.RawConn.Control takes a callback that cannot return
// an error, so every caller carried the option's error out by hand;
// Control does that once.
package sockopt

import "syscall"

// Control runs f on rc's descriptor and returns Control's error, else f's.
func Control(rc syscall.RawConn, f func(fd uintptr) error) error {
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(fd) }); err != nil {
		return err
	}
	return ferr
}
