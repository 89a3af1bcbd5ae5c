//go:build linux

package tftp

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"
)

// TestSinglePortRequestInBindWindow: in single-port mode a transfer
// socket is bound to the listening port before it is connected to its
// client, and a request another client sends in between lands on it (the
// newest socket on the port). Before Server.passOn, the transfer read that
// request as its own client's new one and sent client A client B's file
// (TestSinglePort caught it about once in 900 runs under load); the hook
// sends B's request exactly then, so here it happens every time.
func TestSinglePortRequestInBindWindow(t *testing.T) {
	ts := startServer(t, Config{SinglePort: true})
	files := map[string][]byte{"a": ts.file(t, "a", 3000), "b": ts.file(t, "b", 5000)}
	a, b := newRawClient(t, ts.Addr()), newRawClient(t, ts.Addr())
	var once sync.Once
	hook := func() {
		once.Do(func() {
			_, _ = b.conn.WriteToUDPAddrPort(rq(opRRQ, "b", "octet"), ts.Addr())
			time.Sleep(50 * time.Millisecond) // let it land on the bound socket
		})
	}
	testHookBound.Store(&hook)
	t.Cleanup(func() { testHookBound.Store(nil) })
	a.send(ts.Addr(), rq(opRRQ, "a", "octet"))

	type got struct {
		name string
		data []byte
	}
	res := make(chan got, 2)
	for name, c := range map[string]*rawClient{"a": a, "b": b} {
		go func() { res <- got{name, lockstepFetch(c)} }()
	}
	for range 2 {
		g := <-res
		if !bytes.Equal(g.data, files[g.name]) {
			other := "neither file"
			for n, f := range files {
				if bytes.Equal(g.data, f) {
					other = "file " + n
				}
			}
			t.Errorf("client %s got %d bytes (%s), want its own %d", g.name, len(g.data), other, len(files[g.name]))
		}
	}
	if ts.Stats().PassedOn == 0 {
		t.Errorf("PassedOn = 0: the hook's request did not land on the transfer socket (the test no longer tests the race)")
	}
}

// lockstepFetch reads a plain RFC 1350 transfer on c (its request already
// sent): it ACKs each DATA block until a short one, and returns the data,
// or nil after 5 s without a packet or on anything unexpected.
func lockstepFetch(c *rawClient) []byte {
	var data []byte
	buf := make([]byte, 70000)
	for want := uint16(1); ; want++ {
		_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil || n < 4 || binary.BigEndian.Uint16(buf) != opDATA || binary.BigEndian.Uint16(buf[2:]) != want {
			return nil
		}
		data = append(data, buf[4:n]...)
		if _, err := c.conn.WriteToUDPAddrPort(ack(want), from); err != nil {
			return nil
		}
		if n-4 < 512 {
			return data
		}
	}
}
