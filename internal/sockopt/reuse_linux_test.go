package sockopt

import (
	"context"
	"net"
	"testing"
)

// TestReuseAddr: a second UDP socket binds the port of the first only
// when both set SO_REUSEADDR.
func TestReuseAddr(t *testing.T) {
	ctx := context.Background()
	first, err := (&net.ListenConfig{Control: ReuseAddr}).ListenPacket(ctx, "udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	addr := first.LocalAddr().String()
	if c, err := (&net.ListenConfig{}).ListenPacket(ctx, "udp4", addr); err == nil {
		c.Close()
		t.Fatalf("a plain socket bound %s beside a SO_REUSEADDR one; the test proves nothing here", addr)
	}
	second, err := (&net.ListenConfig{Control: ReuseAddr}).ListenPacket(ctx, "udp4", addr)
	if err != nil {
		t.Fatalf("second SO_REUSEADDR socket on %s: %v", addr, err)
	}
	second.Close()
}
