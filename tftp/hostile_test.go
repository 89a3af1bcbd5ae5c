package tftp

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of issue 9 ("a lab network is a hostile network"): what a client
// that lies about its address, or floods, can make the server do.
//
// A blind attacker is simulated by a socket bound to the victim's address
// (127.0.0.2): the attacker's packets carry the victim's address and port,
// as spoofed ones would, and the test never reads what arrives to decide
// what to send; a goroutine only counts it. Amplification is bytes that
// reached the victim over bytes the attacker sent, both counted with their
// IPv4 and UDP headers (28 bytes).

const udpIPOverhead = 28

// victim is a UDP socket on 127.0.0.2 that counts what arrives, and sends
// as if it were an attacker spoofing its address.
type victim struct {
	t           *testing.T
	conn        *net.UDPConn
	got, pkts   atomic.Int64 // bytes (with headers) and datagrams received
	sent, sent1 int64        // bytes (with headers) and datagrams sent
	done        chan struct{}
}

func newVictim(t *testing.T) *victim {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Skipf("cannot bind 127.0.0.2 (loopback must answer the whole 127/8): %v", err)
	}
	// Room for whole windows of 64 KiB blocks, so the count is what the
	// server sent (root may exceed rmem_max).
	forceRcvbuf(c, 64<<20)
	v := &victim{t: t, conn: c, done: make(chan struct{})}
	go func() {
		defer close(v.done)
		b := make([]byte, 70000)
		for {
			n, err := c.Read(b)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue // an ICMP error from an earlier send
			}
			v.got.Add(int64(n + udpIPOverhead))
			v.pkts.Add(1)
		}
	}()
	t.Cleanup(func() { c.Close(); <-v.done })
	return v
}

func (v *victim) send(to netip.AddrPort, b []byte) {
	v.t.Helper()
	if _, err := v.conn.WriteToUDPAddrPort(b, to); err != nil {
		v.t.Fatal(err)
	}
	v.sent += int64(len(b) + udpIPOverhead)
	v.sent1++
}

// settle waits until nothing more arrives for quiet (at most limit).
func (v *victim) settle(quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last, since := v.got.Load(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if g := v.got.Load(); g != last {
			last, since = g, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

func (v *victim) factor() float64 { return float64(v.got.Load()) / float64(v.sent) }

// TestSinglePortBlindACKAmplification (issue 9, row 1): in single-port mode
// the transfer socket is the well-known port, so an attacker can send the
// RRQ and the ACKs of a transfer without seeing a reply. Each blind ACK
// must release only a few blocks (RFC 1350's lock-step is one), not a
// window of 64: the old server delivered 64 blocks per ACK (~3000x at
// blksize 1468, ~125,000x at 65464).
func TestSinglePortBlindACKAmplification(t *testing.T) {
	// Blind strategies, as the ACK block numbers sent after the RRQ: the
	// end of every 64-block window (what fools a plain RFC 7440 sender),
	// every block in turn, and the end of each round of a slow start that
	// doubles from one block (the smallest guess at each step).
	strategies := map[string][]uint16{}
	for i := range 21 {
		strategies["window-ends"] = append(strategies["window-ends"], uint16(64*i))
		strategies["every-block"] = append(strategies["every-block"], uint16(i))
	}
	for i := range 21 {
		strategies["slow-start"] = append(strategies["slow-start"], uint16(1<<min(i, 15)-1))
	}
	for _, blk := range []int{1468, 65464} {
		for name, acks := range strategies {
			t.Run(name+"/blksize "+strconv.Itoa(blk), func(t *testing.T) {
				ts := startServer(t, Config{SinglePort: true, MTU: 65536, Timeout: 300 * time.Millisecond, Retries: 1})
				ts.file(t, "big", 8<<20)
				v := newVictim(t)
				v.send(ts.Addr(), rq(opRRQ, "big", "octet", "blksize", strconv.Itoa(blk), "windowsize", "64"))
				time.Sleep(30 * time.Millisecond)
				for _, a := range acks {
					v.send(ts.Addr(), ack(a))
					time.Sleep(10 * time.Millisecond)
				}
				v.settle(800*time.Millisecond, 10*time.Second)
				blocks := float64(v.got.Load()) / float64(blk+4+udpIPOverhead)
				perPkt := blocks / float64(v.sent1)
				t.Logf("attacker sent %d packets (%d B), victim got %d B in %d datagrams: %.0fx, %.1f blocks per attacker packet",
					v.sent1, v.sent, v.got.Load(), v.pkts.Load(), v.factor(), perPkt)
				if perPkt > 4 {
					t.Errorf("blind ACKs released %.1f blocks each (%.0fx amplification); want at most 4", perPkt, v.factor())
				}
			})
		}
	}
}

// TestEphemeralSpoofedRRQAmplification (issue 9): in the default mode a
// spoofed RRQ makes the server send its first reply (DATA 1 or the OACK)
// to the victim, and resend it on every timeout. Blind ACKs cannot follow
// (the transfer's port is not known), so the reply and its resends are
// the whole gain: at most two replies per request.
func TestEphemeralSpoofedRRQAmplification(t *testing.T) {
	for name, req := range map[string][]byte{
		"no options": rq(opRRQ, "f", "octet"),
		"blksize":    rq(opRRQ, "f", "octet", "blksize", "1468", "tsize", "0"),
	} {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, Config{Timeout: 100 * time.Millisecond, Retries: 5})
			ts.file(t, "f", 100_000)
			v := newVictim(t)
			v.send(ts.Addr(), req)
			v.settle(500*time.Millisecond, 10*time.Second)
			t.Logf("request %d B, victim got %d B in %d datagrams: %.1fx", v.sent, v.got.Load(), v.pkts.Load(), v.factor())
			if v.pkts.Load() > 2 {
				t.Errorf("a spoofed request drew %d datagrams (%.1fx); want at most 2", v.pkts.Load(), v.factor())
			}
		})
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestRRQFloodFromOnePort (issue 9, row 2): requests from one address and
// port replace each other; each used to start a transfer while the one
// before ran on, so 1500 requests held ~1400 sockets with a cap of 512.
// One client port holds one running transfer (the ones it replaced are
// ending, and count against the per-client cap until their sockets are
// closed); another client still gets its file.
func TestRRQFloodFromOnePort(t *testing.T) {
	ts := startServer(t, Config{Timeout: time.Second, Retries: 5, ShutdownGrace: time.Second})
	ts.file(t, "f", 100_000)
	want := ts.file(t, "ok", 3000)
	base := openFDs(t)
	v := newVictim(t)
	peak := 0
	for i := range 1500 {
		// Different names: each is a new request, not a resend.
		v.send(ts.Addr(), rq(opRRQ, "f", "octet", "blksize", strconv.Itoa(512+i%900), "x", strconv.Itoa(i)))
		if i%100 == 99 {
			time.Sleep(5 * time.Millisecond)
			peak = max(peak, openFDs(t)-base)
		}
	}
	time.Sleep(200 * time.Millisecond)
	peak = max(peak, openFDs(t)-base)
	t.Logf("1500 requests from one port: %d more descriptors at the peak; stats %+v", peak, ts.Stats())
	// A transfer holds two descriptors (its socket and its file); at most
	// MaxTransfersPerClient (64) transfers of this address are alive.
	if peak > 2*64+16 {
		t.Errorf("one client port holds %d descriptors; want at most the per-client cap of transfers", peak)
	}
	fetchFrom(t, ts, "127.0.0.3", "ok", want)
}

// fetchFrom fetches name lock-step (blksize 1468) from the local address
// from, within 10 s; the request must be answered within a second (one
// resend after 500 ms: a request the server drops as busy fails).
func fetchFrom(t *testing.T, ts *testServer, from, name string, want []byte) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(from)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	start := time.Now()
	got, _, err := get(c, ts.Addr(), name, ClientOptions{BlkSize: 1468, Timeout: 500 * time.Millisecond, Retries: 1})
	if err != nil {
		t.Fatalf("a normal client from %s: %v", from, err)
	}
	if string(got) != string(want) {
		t.Fatalf("a normal client from %s got %d bytes, want %d", from, len(got), len(want))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a normal client waited %s", d)
	}
}

// TestClientTimeoutFlood (issue 9, row 2): requests that ask for the
// longest RFC 2349 timeout (255 s) and never acknowledge used to fill the
// transfer cap for minutes, starving every other client. The long timeout
// is not acknowledged, one address holds at most its share of transfers,
// and another client gets its file at once.
func TestClientTimeoutFlood(t *testing.T) {
	ts := startServer(t, Config{MaxTransfers: 100, Timeout: time.Second, Retries: 5, ShutdownGrace: time.Second})
	ts.file(t, "f", 100_000)
	want := ts.file(t, "ok", 3000)
	var conns []*net.UDPConn
	var mu sync.Mutex
	oackTimeout := map[string]int{}
	for range 150 {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
		if _, err := c.WriteToUDPAddrPort(rq(opRRQ, "f", "octet", "timeout", "255", "blksize", "1468"), ts.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	// Read the first reply of a few: is the timeout acknowledged?
	for _, c := range conns[:5] {
		b := make([]byte, 2000)
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(b)
		if err != nil || n < 2 || binary.BigEndian.Uint16(b) != opOACK {
			continue
		}
		mu.Lock()
		oackTimeout[oackOpts(t, b[:n])["timeout"]]++
		mu.Unlock()
	}
	t.Logf("OACK timeouts seen: %v; stats %+v", oackTimeout, ts.Stats())
	if oackTimeout["255"] > 0 {
		t.Errorf("the server acknowledged timeout=255 (%d times)", oackTimeout["255"])
	}
	fetchFrom(t, ts, "127.0.0.4", "ok", want)
}

// TestSinglePortProofThenWindows: a real RFC 7440 client in single-port
// mode proves it reads within a few rounds and then gets whole windows,
// with and without loss; an ACK of the gap block (only a forger sends it)
// ends the transfer, refused and counted.
func TestSinglePortProofThenWindows(t *testing.T) {
	ts := startServer(t, Config{SinglePort: true, Timeout: 100 * time.Millisecond, Retries: 20})
	want := ts.file(t, "k", 2<<20+7)
	for name, fault := range map[string]func(n int, seq int64) Fault{
		"clean": nil,
		"lossy": func(n int, seq int64) Fault {
			if n%50 == 49 {
				return Drop
			}
			return Deliver
		},
	} {
		t.Run(name, func(t *testing.T) {
			opt := ClientOptions{BlkSize: 1468, WindowSize: 64, Timeout: 200 * time.Millisecond, Retries: 50, Fault: fault}
			got, st, err := get(loopbackConn(t), ts.Addr(), "k", opt)
			if err != nil {
				evs, _ := ts.rec.Snapshot()
				for _, ev := range evs {
					t.Logf("event: %s %s", ev.Outcome, ev.Err)
				}
				t.Fatal(err)
			}
			if string(got) != string(want) || st.WindowSize != 64 {
				t.Fatalf("got %d bytes, windowsize %d", len(got), st.WindowSize)
			}
			// ~1430 blocks: whole windows after the proof means few ACKs
			// on a clean link. Under loss (2%, every 50th block) the
			// effective window adapts (adapt.go) to about a dozen blocks,
			// still far from lock-step.
			t.Logf("%d ACKs (%d early), %d timeouts", st.ACKs, st.EarlyACKs, st.Timeouts)
			limit := int64(120)
			if fault != nil {
				limit = int64(len(got) / 1468 / 6)
			}
			if st.ACKs > limit {
				t.Errorf("%d ACKs for %d blocks (want at most %d): windows did not open after the proof", st.ACKs, len(got)/1468, limit)
			}
		})
	}

	// A forger acknowledges the gap block: the transfer ends.
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "k", "octet", "blksize", "1468", "windowsize", "64"))
	b, from := c.recv()
	oackOpts(t, b)
	c.send(from, ack(0))
	b, _ = c.recv() // DATA 1, the first round
	if binary.BigEndian.Uint16(b[2:]) != 1 {
		t.Fatalf("want DATA 1, got % x", b[:4])
	}
	b, _ = c.recv() // the gap block: DATA 3
	if binary.BigEndian.Uint16(b[2:]) != 3 {
		t.Fatalf("want DATA 3 after a gap, got % x", b[:4])
	}
	c.send(from, ack(2))
	waitFor(t, func() bool { return ts.Stats().Refused[RefuseUnproven] > 0 })
}

// TestSinglePortProofAckOfEarlierRound: in the proof rounds an ACK of a
// block sent in order in an earlier, longer round is the client's real
// position, not a forgery: after a repeated ACK shrinks the next round, the
// client (which has the whole earlier round) acknowledges that round's end,
// and the transfer goes on from there. Before, the ACK was refused as
// forged, or ignored when above the new round, and the transfer stalled
// (the Get client hit it ~1 in 10 fetches on a loaded host).
func TestSinglePortProofAckOfEarlierRound(t *testing.T) {
	ts := startServer(t, Config{SinglePort: true, Timeout: 5 * time.Second, minRTO: 5 * time.Second})
	ts.file(t, "k", 512*200)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "k", "octet", "windowsize", "64"))
	b, from := c.recv()
	oackOpts(t, b)
	c.send(from, ack(0))
	data := func() uint16 {
		t.Helper()
		b, _ := c.recv()
		if binary.BigEndian.Uint16(b) != opDATA {
			t.Fatalf("want DATA, got % x", b[:min(len(b), 20)])
		}
		return binary.BigEndian.Uint16(b[2:])
	}
	// Round 1 at proof level 0 is one block and the gap: 1, 3.
	if got := []uint16{data(), data()}; !slices.Equal(got, []uint16{1, 3}) {
		t.Fatalf("round 1: DATA %v, want [1 3]", got)
	}
	c.send(from, ack(1))
	// Round 2 is 2 or 3 blocks from 2, then its gap.
	var round2 []uint16
	for {
		round2 = append(round2, data())
		if n := len(round2); n >= 2 && round2[n-1] != round2[n-2]+1 {
			break
		}
	}
	end2 := round2[len(round2)-2]
	// ACK 1 again (a repeat: the round's first block "lost"): round 3 is
	// one block and the gap, 2 and 4.
	c.send(from, ack(1))
	if got := []uint16{data(), data()}; !slices.Equal(got, []uint16{2, 4}) {
		t.Fatalf("round 3: DATA %v, want [2 4]", got)
	}
	// The client had all of round 2 in order: it says so.
	c.send(from, ack(end2))
	if got := data(); got != end2+1 {
		t.Errorf("after ACK %d of round 2's end: DATA %d, want %d (round 2 was %v)", end2, got, end2+1, round2)
	}
	if n := ts.Stats().Refused[RefuseUnproven]; n != 0 {
		t.Errorf("%d transfers refused as unproven: an honest ACK was taken for a forgery", n)
	}
	c.send(from, appendError(nil, 0, "done"))
}

// TestSinglePortBudget: a client address that never proves it reads is
// sent at most SinglePortBudget bytes per minute, over all its transfers.
func TestSinglePortBudget(t *testing.T) {
	ts := startServer(t, Config{SinglePort: true, SinglePortBudget: 64 << 10, Timeout: 200 * time.Millisecond, Retries: 1})
	ts.file(t, "big", 8<<20)
	v := newVictim(t)
	for i := range 5 {
		v.send(ts.Addr(), rq(opRRQ, "big", "octet", "blksize", "1468", "windowsize", "64", "n", strconv.Itoa(i)))
		time.Sleep(20 * time.Millisecond)
		for a := range 200 { // ACK every block: each is a miss or a guess
			v.send(ts.Addr(), ack(uint16(a)))
			time.Sleep(time.Millisecond)
		}
	}
	v.settle(500*time.Millisecond, 10*time.Second)
	t.Logf("victim got %d B for %d B sent; refused %v", v.got.Load(), v.sent, ts.Stats().Refused)
	if v.got.Load() > 64<<10+5*2000 {
		t.Errorf("victim got %d B, budget 64 KiB", v.got.Load())
	}
}
