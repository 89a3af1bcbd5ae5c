//go:build linux

package netlab

import (
	"net"
	"testing"
	"time"
)

// tcpPair connects the client side to a TCP listener on the server side
// whose one accepted connection serve handles (in a goroutine, closed
// after); the client's connection is closed at the end of the test.
func tcpPair(t testing.TB, tb *Testbed, serve func(net.Conn)) net.Conn {
	t.Helper()
	var ln net.Listener
	if err := tb.Run(Server, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(tb.ServerIP.String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	var conn net.Conn
	if err := tb.Run(Client, func() (err error) {
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
