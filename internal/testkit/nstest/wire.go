//go:build linux

package nstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Wire times TFTP transfers as they cross one interface: an AF_PACKET
// socket bound to it (in a test's namespace) sees every UDP datagram in
// and out with the kernel's receive (or, going out, transmit) timestamp
// (SO_TIMESTAMPNS), so a transfer's time is taken on the wire, from its
// RRQ to the ACK of its last block, without what a client spends before
// and after (a U-Boot board's console, NIC start and stop). Since the
// stamps are the kernel's, the socket is read in batches every few
// milliseconds rather than woken per datagram: the capture costs the
// machine little beside the transfer it times. A classic BPF filter keeps
// only UDP and its first 256 bytes.
//
// Only UDP over IPv4 is parsed; a datagram fragmented by IP counts by its
// first fragment (its UDP length is the whole datagram's).
type Wire struct {
	sock *wireSock

	mu   sync.Mutex
	pkts []wirePkt
	err  error // a read failed
	// unstamped counts datagrams without a kernel timestamp: the time
	// of read stands in, late by up to a batch.
	unstamped int
}

// wirePkt is one TFTP datagram as the capture saw it.
type wirePkt struct {
	at       time.Time
	src, dst netip.AddrPort
	op       uint16 // TFTP opcode
	block    uint16 // DATA and ACK
	data     int    // DATA payload bytes
	file     string // RRQ
	blksize  int    // OACK's blksize, 0 if none
}

// wireSnap is how much of each datagram the filter keeps: IP and UDP
// headers, the TFTP header and an RRQ's name and options.
const wireSnap = 256

// wireIdle is how long the reader sleeps once the socket is empty.
const wireIdle = 2 * time.Millisecond

// StartWire starts a capture on interface ifname in namespace ns (""
// for the test's own); it stops at Stop or when the test ends.
func StartWire(t testing.TB, ns, ifname string) *Wire {
	t.Helper()
	var fd int
	err := Do(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		// ETH_P_ALL: a socket bound to one protocol sees only what comes
		// in; outgoing frames reach the ETH_P_ALL taps only.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		// For a SOCK_DGRAM packet socket the filter sees the network
		// header at offset 0: keep IPv4 (the frame's protocol, a BPF
		// ancillary load) carrying UDP (byte 9 = 17), cut to wireSnap.
		prog := []unix.SockFilter{
			{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: skfAdOff + skfAdProtocol},
			{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: unix.ETH_P_IP},
			{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 9},
			{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.IPPROTO_UDP},
			{Code: unix.BPF_RET | unix.BPF_K, K: wireSnap},
			{Code: unix.BPF_RET | unix.BPF_K, K: 0},
		}
		steps := []error{
			unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}),
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1),
			// Room for seconds of datagrams while the reader sleeps or
			// the machine is busy (a truncated datagram still costs its
			// buffer's truesize).
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20),
			unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}),
		}
		if err := errors.Join(steps...); err != nil {
			unix.Close(fd)
			return fmt.Errorf("AF_PACKET socket on %s: %w", ifname, err)
		}
		// Empty what arrived between socket and bind (any interface).
		buf := make([]byte, wireSnap)
		for {
			if _, _, err := unix.Recvfrom(fd, buf, 0); err != nil {
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("nstest: capture on %s (netns %q): %v", ifname, ns, err)
	}
	sock := &wireSock{fd: fd, stop: make(chan struct{}), done: make(chan struct{})}
	w := &Wire{sock: sock}
	go w.read(fd)
	// The cleanup holds the socket only, not what was captured: a lab
	// that times many transfers keeps no capture it is done with.
	t.Cleanup(sock.close)
	return w
}

// wireSock is a capture's socket and reader.
type wireSock struct {
	fd         int // never in Go's poller (an epoll wake-up per datagram)
	stop, done chan struct{}
	once       sync.Once
	drops      uint32 // datagrams the kernel dropped, read at close
}

// close stops the reader after a last drain and closes the socket.
func (s *wireSock) close() {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		if st, err := unix.GetsockoptTpacketStats(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
			s.drops = st.Drops
		}
		unix.Close(s.fd)
	})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// BPF ancillary data (linux/filter.h): a load from skfAdOff+skfAdProtocol
// reads skb->protocol, not the packet.
const (
	skfAdOff      = 0xfffff000 // SKF_AD_OFF, -0x1000
	skfAdProtocol = 0
)

// read drains the socket every wireIdle until Stop, on a thread of its own
// (it sleeps between drains; no datagram wakes it).
func (w *Wire) read(fd int) {
	defer close(w.sock.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, wireSnap)
	oob := make([]byte, unix.CmsgSpace(16))
	for {
		stopping := false
		select {
		case <-w.sock.stop:
			stopping = true // one last drain
		default:
		}
		for {
			n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_DONTWAIT)
			if err == unix.EAGAIN || err == unix.EINTR {
				break
			}
			if err != nil {
				w.mu.Lock()
				w.err = fmt.Errorf("read: %w", err)
				w.mu.Unlock()
				return
			}
			at := stamp(oob[:oobn])
			if p, ok := parseWire(buf[:n]); ok {
				w.mu.Lock()
				if at.IsZero() {
					at = time.Now()
					w.unstamped++
				}
				p.at = at
				w.pkts = append(w.pkts, p)
				w.mu.Unlock()
			}
		}
		if stopping {
			return
		}
		time.Sleep(wireIdle)
	}
}

// stamp is the SCM_TIMESTAMPNS in oob, zero if none.
func stamp(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			if sec == 0 && nsec == 0 {
				return time.Time{}
			}
			return time.Unix(sec, nsec)
		}
	}
	return time.Time{}
}

// parseWire reads an IPv4 UDP datagram's addresses and TFTP header; ok is
// false for anything else (a later fragment, a short or non-TFTP datagram).
func parseWire(b []byte) (p wirePkt, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 || b[9] != unix.IPPROTO_UDP {
		return p, false
	}
	if binary.BigEndian.Uint16(b[6:])&0x1fff != 0 { // not the first fragment
		return p, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl+8+4 {
		return p, false
	}
	src, _ := netip.AddrFromSlice(b[12:16])
	dst, _ := netip.AddrFromSlice(b[16:20])
	u := b[ihl:]
	p.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(u[0:]))
	p.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:]))
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	tf := u[8:]
	p.op = binary.BigEndian.Uint16(tf)
	switch p.op {
	case 1: // RRQ: name NUL mode NUL options...
		f := strings.Split(string(tf[2:]), "\x00")
		p.file = f[0]
	case 3: // DATA
		p.block = binary.BigEndian.Uint16(tf[2:])
		p.data = ulen - 8 - 4
	case 4: // ACK
		p.block = binary.BigEndian.Uint16(tf[2:])
	case 6: // OACK: name NUL value NUL ...
		f := strings.Split(string(tf[2:]), "\x00")
		for i := 0; i+1 < len(f); i += 2 {
			if strings.EqualFold(f[i], "blksize") {
				p.blksize, _ = strconv.Atoi(f[i+1])
			}
		}
	case 5: // ERROR
	default:
		return p, false
	}
	return p, p.data >= 0
}

// Stop ends the capture (reading what is queued first) and reports a
// failed read, datagrams the kernel dropped for want of buffer or gave
// no timestamp, any of which makes its spans untrustworthy. It may be
// called again.
func (w *Wire) Stop() error {
	w.sock.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
	case w.sock.drops > 0:
		w.err = fmt.Errorf("the kernel dropped %d datagrams (the capture fell behind)", w.sock.drops)
	case w.unstamped > 0:
		w.err = fmt.Errorf("%d of %d datagrams came without a kernel timestamp", w.unstamped, len(w.pkts))
	}
	return w.err
}

// WireSpan is one TFTP read transfer as it crossed the wire.
type WireSpan struct {
	Client    netip.AddrPort // the client's address and TID (RRQ source)
	Server    netip.AddrPort // the server's address and TID (its replies' source)
	RRQ, ACK  time.Time      // the first RRQ, the first ACK of the last block
	Blksize   int            // from the OACK, else 512
	Datagrams int            // DATA datagrams sent, resends included
	Bytes     int64          // DATA payload bytes, resends included
	LastBlock uint16         // the last block's number (wrapped)
	// ServerTime and ClientTime split Duration by who sent the later
	// datagram of each pair in a row: the gap before a server's datagram
	// is the server's turnaround (and its pacing inside a window), the gap
	// before a client's the client's (the wire between them included).
	// First is the gap from the RRQ to the server's first reply, part of
	// ServerTime.
	ServerTime, ClientTime, First time.Duration
}

// Duration is the transfer's time on the wire.
func (s WireSpan) Duration() time.Duration { return s.ACK.Sub(s.RRQ) }

// Mbps is size bytes over Duration, in Mbit/s.
func (s WireSpan) Mbps(size int64) float64 { return float64(size) * 8 / s.Duration().Seconds() / 1e6 }

// TFTP returns the transfers of file that client (an address: its TID is
// learnt from the RRQ) completed from server (the address and port its
// RRQs go to) during the capture, in the order they started. A transfer
// is one client TID: its first RRQ starts it, the server's first reply
// to that TID names the server's TID, and the first ACK from the client's
// TID to the server's of the block whose DATA was shorter than the
// blksize ends it. Stop the capture first.
func (w *Wire) TFTP(client netip.Addr, server netip.AddrPort, file string) ([]WireSpan, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	type state struct {
		span      WireSpan
		lastSeen  bool // a short DATA was sent
		completed bool
		last      time.Time // the transfer's latest datagram
	}
	var order []*state
	byTID := map[netip.AddrPort]*state{}
	for _, p := range w.pkts {
		switch {
		case p.op == 1 && p.src.Addr() == client && p.dst == server && p.file == file:
			if byTID[p.src] == nil || byTID[p.src].completed {
				s := &state{span: WireSpan{Client: p.src, RRQ: p.at, Blksize: 512}, last: p.at}
				byTID[p.src] = s
				order = append(order, s)
			} else if s := byTID[p.src]; s.span.Server.IsValid() {
				s.span.ClientTime += p.at.Sub(s.last) // a resent RRQ after the first reply
				s.last = p.at
			}
		case p.dst.Addr() == client && p.src.Addr() == server.Addr() && byTID[p.dst] != nil:
			s := byTID[p.dst]
			if s.completed {
				continue
			}
			if !s.span.Server.IsValid() {
				s.span.Server = p.src
			}
			if p.src != s.span.Server {
				continue
			}
			if s.span.First == 0 {
				s.span.First = p.at.Sub(s.span.RRQ)
			}
			s.span.ServerTime += p.at.Sub(s.last)
			s.last = p.at
			switch p.op {
			case 6:
				if p.blksize > 0 {
					s.span.Blksize = p.blksize
				}
			case 3:
				s.span.Datagrams++
				s.span.Bytes += int64(p.data)
				if p.data < s.span.Blksize {
					s.lastSeen, s.span.LastBlock = true, p.block
				}
			}
		case p.op == 4 && p.src.Addr() == client && byTID[p.src] != nil:
			s := byTID[p.src]
			if s.completed || p.dst != s.span.Server {
				continue
			}
			s.span.ClientTime += p.at.Sub(s.last)
			s.last = p.at
			if s.lastSeen && p.block == s.span.LastBlock {
				s.span.ACK, s.completed = p.at, true
			}
		}
	}
	var spans []WireSpan
	for _, s := range order {
		if s.completed {
			spans = append(spans, s.span)
		}
	}
	return spans, nil
}

// TFTPOne is TFTP when exactly one such transfer is wanted.
func (w *Wire) TFTPOne(client netip.Addr, server netip.AddrPort, file string) (WireSpan, error) {
	spans, err := w.TFTP(client, server, file)
	if err != nil {
		return WireSpan{}, err
	}
	if len(spans) != 1 {
		return WireSpan{}, fmt.Errorf("capture: %d completed transfers of %q from %v to %v, want 1 (%d datagrams seen)",
			len(spans), file, server, client, len(w.pkts))
	}
	return spans[0], nil
}
