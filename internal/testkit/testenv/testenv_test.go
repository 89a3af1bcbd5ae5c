package testenv

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// TestWaitFor: true as soon as cond is; false when it never is, with cond
// asked again at the end.
func TestWaitFor(t *testing.T) {
	n := 0
	if !WaitFor(10*time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("WaitFor of a condition true on the third call: polled %d times", n)
	}
	n = 0
	if WaitFor(20*time.Millisecond, func() bool { n++; return false }) || n < 2 {
		t.Fatalf("WaitFor of a condition never true: true, or polled only %d times", n)
	}
}

// TestFreePort: the port it gives can be bound for its network.
func TestFreePort(t *testing.T) {
	tcp := FreePort(t, "tcp")
	l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(tcp))
	if err != nil {
		t.Fatalf("tcp port %d: %v", tcp, err)
	}
	l.Close()
	udp := FreePort(t, "udp")
	c, err := net.ListenPacket("udp4", "127.0.0.1:"+strconv.Itoa(udp))
	if err != nil {
		t.Fatalf("udp port %d: %v", udp, err)
	}
	c.Close()
}
