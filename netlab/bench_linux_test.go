//go:build linux

package netlab

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkTCP streams client -> server over the testbed with Go sockets at
// each MTU, offload setting and client egress rate, and reports goodput:
//
//	go test -run '^$' -bench TCP -benchtime 3x ./netlab
func BenchmarkTCP(b *testing.B) {
	tb := newTB(b, Options{})
	rates := []struct {
		name string
		bps  uint64
	}{{"unlimited", 0}, {"1gbit", 1e9}, {"100mbit", 1e8}, {"10mbit", 1e7}}
	for _, mtu := range []int{1500, 9000} {
		for _, offload := range []bool{true, false} {
			for _, rate := range rates {
				name := fmt.Sprintf("mtu=%d/offload=%v/rate=%s", mtu, onOff(offload), rate.name)
				b.Run(name, func(b *testing.B) {
					if err := tb.SetMTU(mtu); err != nil {
						b.Fatal(err)
					}
					for _, s := range []Side{Server, Client} {
						if _, err := tb.SetOffloads(s, AllOffloads(offload)); err != nil {
							b.Fatal(err)
						}
					}
					if rate.bps == 0 {
						if err := tb.ClearRate(Client); err != nil {
							b.Fatal(err)
						}
					} else if _, err := tb.SetRate(Client, rate.bps); err != nil {
						b.Fatal(err)
					}
					// A quarter second of data per op at the rate; 256 MiB unlimited.
					size := int64(256 << 20)
					if rate.bps != 0 {
						size = int64(rate.bps / 8 / 4)
					}
					benchStream(b, tb, size)
				})
			}
		}
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// benchStream sends size bytes per op on one connection; the server acks
// each op once it has read it all, so an op's time is delivery time.
func benchStream(b *testing.B, tb *Testbed, size int64) {
	var ln net.Listener
	if err := tb.Run(Server, func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(tb.ServerIP.String(), "0"))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		ack := []byte{1}
		for {
			if _, err := io.CopyN(io.Discard, c, size); err != nil {
				srvErr <- nil // client closed
				return
			}
			if _, err := c.Write(ack); err != nil {
				srvErr <- err
				return
			}
		}
	}()
	var conn net.Conn
	if err := tb.Run(Client, func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 128<<10)
	ack := make([]byte, 1)
	b.SetBytes(size)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		for left := size; left > 0; {
			n := min(left, int64(len(buf)))
			if _, err := conn.Write(buf[:n]); err != nil {
				b.Fatal(err)
			}
			left -= n
		}
		if _, err := io.ReadFull(conn, ack); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(size)*float64(b.N)*8/elapsed.Seconds()/1e6, "Mbit/s")
	conn.Close()
	if err := <-srvErr; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRTT is a 1-byte TCP ping-pong between the namespaces; ns/op is
// the application-level round trip the veth testbed has (no netem delay).
func BenchmarkRTT(b *testing.B) {
	tb := newTB(b, Options{})
	conn := tcpPair(b, tb, func(c net.Conn) { _, _ = io.Copy(c, c) })
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	buf := []byte{0}
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			b.Fatal(err)
		}
	}
}
