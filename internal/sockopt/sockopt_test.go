package sockopt

import (
	"errors"
	"net"
	"testing"
)

// TestControl: f runs on the socket's descriptor and its error comes back;
// a closed socket's Control error comes back without running f.
func TestControl(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	want := errors.New("from f")
	ran := false
	if err := Control(rc, func(fd uintptr) error { ran = fd != 0; return want }); err != want || !ran {
		t.Fatalf("Control = %v (f ran on a descriptor: %v), want f's error", err, ran)
	}
	c.Close()
	ran = false
	if err := Control(rc, func(uintptr) error { ran = true; return nil }); err == nil || ran {
		t.Fatalf("Control on a closed socket = %v (f ran: %v), want Control's error and f not run", err, ran)
	}
}
