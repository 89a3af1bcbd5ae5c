//go:build linux

package nstest

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestPairPingAndDo(t *testing.T) {
	p := NewPair(t, Options{MTU: 9000})
	out := Run(t, p.Client, "ip", "link", "show", p.ClientIf)
	if !strings.Contains(out, "mtu 9000") {
		t.Fatalf("client link mtu not 9000:\n%s", out)
	}
	// Listen inside the server namespace from this process, dial from the client side.
	var ln net.Listener
	if err := Do(p.Server, func() (err error) {
		ln, err = net.Listen("tcp", p.ServerIP.String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	var conn net.Conn
	if err := Do(p.Client, func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := make([]byte, 5)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(b); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	// The listener is not reachable from the root namespace.
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("namespace listener reachable from the root namespace")
	}
}

func TestCleanConsoleTail(t *testing.T) {
	tests := map[string]struct {
		in, clean, tail2 string
	}{
		"escapes and CRs": {"\x1b[2J\x1b[0;1mU-Boot\x1b[0m\r\n=> ", "U-Boot\n=> ", "U-Boot\n=> "},
		"cursor query":    {"a\x1b[?25lb\r\nc\r\nd\n", "ab\nc\nd\n", "c\nd"},
		"short":           {"one", "one", "one"},
		"empty":           {"", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := CleanConsole(tc.in)
			if got != tc.clean {
				t.Errorf("CleanConsole(%q) = %q, want %q", tc.in, got, tc.clean)
			}
			if tl := Tail(got, 2); tl != tc.tail2 {
				t.Errorf("Tail(%q, 2) = %q, want %q", got, tl, tc.tail2)
			}
		})
	}
}
