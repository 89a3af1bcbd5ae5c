//go:build linux

package threadsock

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// open returns a Sock bound to 127.0.0.1 on a free port, connected to peer
// when peer is valid, and its address.
func open(t *testing.T, peer netip.AddrPort) (*Sock, netip.AddrPort) {
	t.Helper()
	fd, err := UDP4()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if peer.IsValid() {
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: peer.Addr().As4(), Port: int(peer.Port())}); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	a := sa.(*unix.SockaddrInet4)
	s, err := New(fd, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
}

// TestSock: datagrams go both ways (one by one, in a batch, to an address),
// a read with nothing queued times out at its deadline or says EAGAIN at
// once, and Close from another goroutine ends a read blocked without a
// deadline.
func TestSock(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, aAddr := open(t, netip.AddrPort{})
	b, bAddr := open(t, aAddr)
	buf := make([]byte, 100)

	if err := b.SendBatch([][]byte{[]byte("one"), []byte("two"), []byte("three")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Send([]byte("four")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, want := range []string{"one", "two", "three", "four"} {
		n, from, err := a.RecvFrom(buf, deadline)
		if err != nil || string(buf[:n]) != want || from != bAddr {
			t.Fatalf("RecvFrom = %q from %v, %v; want %q from %v", buf[:n], from, err, want, bAddr)
		}
	}
	if _, _, err := a.TryRecvFrom(buf); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("TryRecvFrom with nothing queued: %v, want EAGAIN", err)
	}
	if err := a.TrySendTo([]byte("back"), bAddr); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Recv(buf, deadline); err != nil || string(buf[:n]) != "back" {
		t.Fatalf("Recv = %q, %v; want back", buf[:n], err)
	}

	start := time.Now()
	if _, err := b.Recv(buf, start.Add(50*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Recv with nothing sent: %v, want a timeout", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("Recv timed out after %v, before its deadline", d)
	}

	go func() {
		time.Sleep(50 * time.Millisecond)
		a.Close()
	}()
	if _, _, err := a.RecvFrom(buf, time.Time{}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("RecvFrom after Close: %v, want net.ErrClosed", err)
	}
	if !a.Closed() {
		t.Error("Closed() false after Close")
	}
}
