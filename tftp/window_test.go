package tftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pxeperf/pxeperf/event"
)

// get fetches file from srv with the package's own client (Get) through
// conn, within 2 minutes, and returns its content.
func get(conn *net.UDPConn, srv netip.AddrPort, file string, opt ClientOptions) ([]byte, ClientStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b bytes.Buffer
	st, err := Get(ctx, conn, srv, file, &b, opt)
	return b.Bytes(), st, err
}

// getWhole fetches file as get does and fails t unless it comes whole,
// byte for byte want; the failure names file and the client's stats.
func getWhole(t *testing.T, conn *net.UDPConn, srv netip.AddrPort, file string, opt ClientOptions, want []byte) ClientStats {
	t.Helper()
	got, st, err := get(conn, srv, file, opt)
	if err != nil {
		t.Fatalf("%s: %v (%+v)", file, err, st)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes, want %d (content differs)", file, len(got), len(want))
	}
	return st
}

// loopbackConn is a UDP socket on 127.0.0.1, closed when the test ends.
func loopbackConn(t testing.TB) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loseEvery is a Fault hook that loses every k-th DATA datagram to arrive
// and counts the losses in lost.
func loseEvery(k int, lost *int) func(int, int64) Fault {
	return func(n int, _ int64) Fault {
		if n%k == k-1 {
			*lost++
			return Drop
		}
		return Deliver
	}
}

// waitPaths are the two ways a transfer waits for its ACKs, as
// Config.TransferThreads: on a thread of its own (the default, while one is
// free; Linux) and in Go's poller (every thread taken, or none allowed).
var waitPaths = []struct {
	name    string
	threads int
}{{"thread", 0}, {"poller", -1}}

// waitPath fails t unless every transfer of ts so far waited as threads
// (a waitPaths value) says, where the OS has threads for them: the test
// ran the path it names.
func waitPath(t *testing.T, ts *testServer, threads int) {
	t.Helper()
	st := ts.Stats()
	switch {
	case threads < 0 && st.Threaded != 0:
		t.Errorf("%d transfers waited on threads, want none (TransferThreads %d)", st.Threaded, threads)
	case threads >= 0 && st.ThreadsCap > 0 && st.Polled != 0:
		t.Errorf("%d transfers waited in the poller, want none (a thread was free for each)", st.Polled)
	}
}

// TestWindowedFetch fetches files through loss, reordering and duplication
// in both directions with the package's client and its fault hooks: every
// fetch is byte-exact, the OACK carries what was asked (capped by the
// server; Get refuses an option it did not ask), and the event's counters
// add up.
func TestWindowedFetch(t *testing.T) {
	for _, path := range waitPaths {
		t.Run(path.name, func(t *testing.T) { windowedFetch(t, path.threads) })
	}
}

func windowedFetch(t *testing.T, threads int) {
	// Cases that must not resend run against a patient server and client,
	// so a stall of the test machine cannot pass for a lost packet; lossy
	// cases against a quick one, as every lost window tail costs a timeout.
	patient := startServer(t, Config{Timeout: 5 * time.Second, MaxWindowSize: 32, minRTO: 5 * time.Second, TransferThreads: threads})
	quick := startServer(t, Config{Timeout: 100 * time.Millisecond, Retries: 20, MaxWindowSize: 32, TransferThreads: threads})
	t.Cleanup(func() {
		waitPath(t, patient, threads)
		waitPath(t, quick, threads)
	})
	sizes := map[string]int{"small": 5000, "exact": 1468 * 32 * 4, "big": 3<<20 + 7}
	files := map[string][]byte{}
	for name, n := range sizes {
		files[name] = patient.file(t, name, n)
		quick.file(t, name, n)
	}
	lose := func(every int) func(*int) func(int, int64) Fault {
		return func(lost *int) func(int, int64) Fault { return loseEvery(every, lost) }
	}
	fates := func(every int, f Fault) func(*int) func(int, int64) Fault {
		return func(mangled *int) func(int, int64) Fault {
			return func(n int, _ int64) Fault {
				if n%every == every/2 {
					*mangled++
					return f
				}
				return Deliver
			}
		}
	}
	tests := map[string]struct {
		blksize, window int
		wantWindow      int
		fault           func(mangled *int) func(int, int64) Fault
		dupACK, stale   bool
		wantNoResend    bool
		wantBounded     bool // at most one extra window per window
		smallOnly       bool // heavy loss: every lost window tail costs a timeout
	}{
		"window 8 clean":                   {blksize: 1468, window: 8, wantWindow: 8, wantNoResend: true},
		"window capped at config":          {blksize: 1468, window: 1000, wantWindow: 32, wantNoResend: true},
		"window 1 asked: lock-step":        {blksize: 1468, window: 1, wantWindow: 1, wantNoResend: true},
		"duplicated ACKs":                  {blksize: 512, window: 16, wantWindow: 16, dupACK: true, wantBounded: true},
		"reordered stale ACKs ignored":     {blksize: 512, window: 16, wantWindow: 16, stale: true, wantNoResend: true},
		"both, lock-step":                  {blksize: 512, window: 1, wantWindow: 1, dupACK: true, stale: true, wantNoResend: true},
		"every 7th block lost":             {blksize: 1468, window: 16, wantWindow: 16, fault: lose(7), smallOnly: true},
		"every 50th block lost, window 32": {blksize: 1468, window: 32, wantWindow: 32, fault: lose(50), dupACK: true},
		"every 3rd lost, lock-step":        {blksize: 1468, window: 1, wantWindow: 1, fault: lose(3), smallOnly: true},
		"reordered blocks":                 {blksize: 1468, window: 16, wantWindow: 16, fault: fates(11, Hold)},
		// The client answers a duplicate with its last ACK again (in case
		// it was lost): the server resends a window for it at most once.
		"duplicated blocks": {blksize: 1024, window: 8, wantWindow: 8, fault: fates(5, Twice), wantBounded: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for file, want := range files {
				if tc.smallOnly && len(want) > 1<<20 {
					continue
				}
				ts := quick
				opt := ClientOptions{BlkSize: tc.blksize, WindowSize: tc.window, Timeout: 200 * time.Millisecond, Retries: 50,
					DupACK: tc.dupACK, StaleACK: tc.stale}
				if tc.wantNoResend || tc.wantBounded {
					ts, opt.Timeout = patient, 5*time.Second
				}
				mangled := 0
				if tc.fault != nil {
					opt.Fault = tc.fault(&mangled)
				}
				before, _ := ts.rec.Snapshot()
				st := getWhole(t, loopbackConn(t), ts.Addr(), file, opt, want)
				if !st.OACK || st.BlkSize != tc.blksize || st.WindowSize != tc.wantWindow || st.TSize != int64(len(want)) {
					t.Errorf("%s: negotiated OACK %v blksize %d windowsize %d tsize %d; want an OACK of %d, %d, %d",
						file, st.OACK, st.BlkSize, st.WindowSize, st.TSize, tc.blksize, tc.wantWindow, len(want))
				}
				ev := ts.fetches(t, len(before)+1)[len(before)]
				blocks := int64(len(want)/tc.blksize + 1)
				if ev.Outcome != event.OutcomeOK || ev.Bytes != int64(len(want)) || ev.TFTP.WindowSize != tc.wantWindow ||
					ev.TFTP.BlockSize != tc.blksize || ev.TFTP.Datagrams != blocks+ev.TFTP.Retransmits {
					t.Errorf("%s: event %+v %+v; want ok, %d bytes, window %d, %d blocks + retransmits",
						file, ev, ev.TFTP, len(want), tc.wantWindow, blocks)
				}
				if tc.wantNoResend && (ev.TFTP.Retransmits != 0 || ev.TFTP.Timeouts != 0) {
					t.Errorf("%s: %d retransmits, %d timeouts; want none (duplicates must not be answered)",
						file, ev.TFTP.Retransmits, ev.TFTP.Timeouts)
				}
				if tc.wantBounded && (ev.TFTP.Retransmits > blocks || ev.TFTP.Timeouts != 0) {
					t.Errorf("%s: %d retransmits, %d timeouts for %d blocks; want one window per duplicate at most",
						file, ev.TFTP.Retransmits, ev.TFTP.Timeouts, blocks)
				}
				if tc.fault != nil && len(want) > 100_000 && mangled == 0 {
					t.Errorf("%s: the client's fault hook touched nothing: the test's pattern is broken", file)
				}
				if tc.fault != nil && !tc.wantNoResend && len(want) > 100_000 && ev.TFTP.Retransmits == 0 {
					t.Errorf("%s: no retransmits counted although blocks were lost", file)
				}
			}
		})
	}
}

// TestEarlyACKResendsAtOnce: an ACK inside the window (the client lost the
// block after it) makes the server start the next round there at once; so
// does the ACK before the window sent again (the round's first block was
// lost), once. Such a loss keeps the effective window (only a lost tail
// shrinks it, adapt.go), but the next rounds end in a gap (the block after
// next) until one is acknowledged in full, since the client's count may be
// out of step; a repeat that turns out to be a duplicate (the client then
// ACKs all the round) is not counted. The server's timer is far longer
// than the client waits, so resends can only come from ACKs, and no
// timeout is counted.
func TestEarlyACKResendsAtOnce(t *testing.T) {
	ts := startServer(t, Config{Timeout: 30 * time.Second, minRTO: 30 * time.Second})
	want := ts.file(t, "f", 512*20+100) // blocks 1..21
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "f", "octet", "windowsize", "8"))
	b, from := c.recv()
	if diff := cmp.Diff(map[string]string{"windowsize": "8"}, oackOpts(t, b)); diff != "" {
		t.Fatalf("OACK (-want +got):\n%s", diff)
	}
	c.send(from, ack(0))
	recvBlocks := func(n int) []uint16 {
		var got []uint16
		for range n {
			b, _ := c.recv()
			if binary.BigEndian.Uint16(b) != opDATA {
				t.Fatalf("want DATA, got % x", b[:4])
			}
			got = append(got, binary.BigEndian.Uint16(b[2:]))
		}
		return got
	}
	var seq []uint16
	seq = append(seq, recvBlocks(8)...) // 1..8, the full window
	c.send(from, ack(3))                // "block 4 was lost": window kept
	seq = append(seq, recvBlocks(7)...) // 4..9 and the gap block 11, at once
	c.send(from, ack(2))                // stale: before the window
	c.send(from, ack(3))                // a late copy of the early ACK: answered once...
	seq = append(seq, recvBlocks(7)...) // 4..9, gap 11
	c.send(from, ack(3))                // ...and no more
	if !c.quiet(200 * time.Millisecond) {
		t.Fatal("server answered a stale ACK or the same repeated ACK twice")
	}
	// The client had all of the round's first send: the repeat was a
	// duplicate, not a loss, and a round in full ends the gap rounds.
	c.send(from, ack(9))
	seq = append(seq, recvBlocks(8)...) // 10..17, full, no gap
	c.send(from, ack(17))
	seq = append(seq, recvBlocks(4)...) // 18..21 (short)
	c.send(from, ack(21))
	wantSeq := []uint16{1, 2, 3, 4, 5, 6, 7, 8, 4, 5, 6, 7, 8, 9, 11, 4, 5, 6, 7, 8, 9, 11,
		10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}
	if diff := cmp.Diff(wantSeq, seq); diff != "" {
		t.Errorf("DATA blocks in order sent (-want +got):\n%s", diff)
	}
	if !c.quiet(200 * time.Millisecond) {
		t.Error("server sent more after the last ACK")
	}
	ev := ts.fetches(t, 1)[0]
	wantInfo := &event.TFTPInfo{BlockSize: 512, WindowSize: 8, Timeout: 30 * time.Second,
		Datagrams: 34, Retransmits: 13, Timeouts: 0,
		WindowMin: 6, WindowMedian: 6, WindowMax: 8, LossEvents: 1}
	if diff := cmp.Diff(wantInfo, ev.TFTP, cmpopts.IgnoreFields(event.TFTPInfo{}, "RTT")); diff != "" {
		t.Errorf("TFTP info (-want +got):\n%s", diff)
	}
	if ev.TFTP.RTT <= 0 {
		t.Errorf("RTT %v; want the round trips measured", ev.TFTP.RTT)
	}
	if ev.Outcome != event.OutcomeOK || ev.Bytes != int64(len(want)) {
		t.Errorf("outcome %q bytes %d; want ok, %d", ev.Outcome, ev.Bytes, len(want))
	}
}

// TestWindowTimeoutResendsWindow: with no ACK at all the server first
// probes the window's tail (its last block) after the probe timer, which
// the OACK's round trip seeded, then resends the round shrunk (2 blocks and
// a gap) and probes again, and gives up no sooner than with a fixed timer:
// only a timer that fired at the negotiated timeout counts against the
// retries (two, then the third gives up), and the probe timer never backs
// off, so each resent round is followed by a probe at the ceiling.
//
// The sequence holds for a handshake of loopback speed: the OACK's round
// trip seeds the probe timer, so a host that delayed this test's ACK of
// the OACK by ~16 ms or more changes it. Such a run is not an observation
// of the rule; it is run again (up to 5 times, else skipped, named).
func TestWindowTimeoutResendsWindow(t *testing.T) {
	const fastHandshake = 5 * time.Millisecond
	for attempt := 1; attempt <= 5; attempt++ {
		seq, more, ev := windowTimeoutRun(t)
		if ev.TFTP.RTT <= 0 {
			t.Fatalf("RTT %v, want the OACK's round trip", ev.TFTP.RTT)
		}
		if ev.TFTP.RTT > fastHandshake {
			t.Logf("attempt %d: the OACK took %v to be ACKed (host busy): run again", attempt, ev.TFTP.RTT)
			continue
		}
		if more {
			t.Error("the server sent more after giving up")
		}
		if diff := cmp.Diff([]uint16{1, 2, 3, 4, 4, 1, 2, 4, 4, 1, 2, 4, 4, 1, 2, 4, 4}, seq); diff != "" {
			t.Errorf("DATA blocks (-want +got):\n%s", diff)
		}
		want := &event.TFTPInfo{BlockSize: 512, WindowSize: 4, Timeout: 50 * time.Millisecond,
			Datagrams: 17, Retransmits: 13, Timeouts: 8, WindowMin: 2, WindowMedian: 2, WindowMax: 4, LossEvents: 3,
			RTT: ev.TFTP.RTT}
		if diff := cmp.Diff(want, ev.TFTP); diff != "" {
			t.Errorf("TFTP info (-want +got):\n%s", diff)
		}
		if ev.Outcome != event.OutcomeError || ev.Bytes != 0 {
			t.Errorf("outcome %q bytes %d; want error, 0", ev.Outcome, ev.Bytes)
		}
		return
	}
	t.Skipf("the host delayed every handshake past %v: the timer sequence cannot be observed", fastHandshake)
}

// windowTimeoutRun asks for a 4-block window, ACKs the OACK and then
// nothing: the first 17 DATA blocks the server sent, whether more came,
// and its event.
func windowTimeoutRun(t *testing.T) ([]uint16, bool, event.Fetch) {
	t.Helper()
	ts := startServer(t, Config{Timeout: 50 * time.Millisecond, Retries: 2})
	ts.file(t, "f", 512*10)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "f", "octet", "windowsize", "4"))
	_, from := c.recv()
	c.send(from, ack(0))
	var seq []uint16
	for range 17 {
		b, _ := c.recv()
		seq = append(seq, binary.BigEndian.Uint16(b[2:]))
	}
	more := !c.quiet(300 * time.Millisecond)
	return seq, more, ts.fetches(t, 1)[0]
}

// TestPlainRFC1350 is a client that asks for no option: no OACK, 512-byte
// blocks, and one block at a time, each sent only after the previous ACK,
// even though the server allows windows.
func TestPlainRFC1350(t *testing.T) {
	ts := startServer(t, Config{MaxWindowSize: 64})
	want := ts.file(t, "f", 512*3+1)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	var got []byte
	var from netip.AddrPort
	for block := uint16(1); block <= 4; block++ {
		var b []byte
		b, from = c.recv()
		if binary.BigEndian.Uint16(b) != opDATA || binary.BigEndian.Uint16(b[2:]) != block {
			t.Fatalf("want DATA %d, got % x", block, b[:4])
		}
		if block < 4 && len(b) != 4+512 {
			t.Fatalf("DATA %d carries %d bytes, want 512", block, len(b)-4)
		}
		got = append(got, b[4:]...)
		if !c.quiet(100 * time.Millisecond) {
			t.Fatalf("server sent more after DATA %d before its ACK", block)
		}
		c.send(from, ack(block))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
	ev := ts.fetches(t, 1)[0]
	wantInfo := &event.TFTPInfo{BlockSize: 512, WindowSize: 1, Timeout: time.Second, Datagrams: 4}
	if diff := cmp.Diff(wantInfo, ev.TFTP); diff != "" {
		t.Errorf("TFTP info (-want +got):\n%s", diff)
	}
}

// TestBlockNumberWraparound fetches a file of more than 65535 blocks with
// the package's client, which takes block 0 after 65535 (as U-Boot and
// tftp-hpa do; a server that wrapped elsewhere would never finish), with
// losses across the wrap.
func TestBlockNumberWraparound(t *testing.T) {
	if testing.Short() {
		t.Skip("32 MiB transfer")
	}
	ts := startServer(t, Config{Timeout: 100 * time.Millisecond, Retries: 20})
	const blocks = 65536 + 300 // the last one short
	want := ts.file(t, "big", 512*(blocks-1)+17)
	for _, w := range []int{64, 1} {
		t.Run(fmt.Sprintf("windowsize %d", w), func(t *testing.T) {
			before, _ := ts.rec.Snapshot()
			var wrapLost []int64 // the first arrivals of blocks 65535 and 0, lost
			opt := ClientOptions{BlkSize: 512, WindowSize: w, Timeout: 200 * time.Millisecond, Retries: 50,
				Fault: func(n int, seq int64) Fault {
					if (seq == 65535 || seq == 65536) && !slices.Contains(wrapLost, seq) {
						wrapLost = append(wrapLost, seq)
						return Drop
					}
					if n%2000 == 1999 {
						return Drop
					}
					return Deliver
				}}
			st := getWhole(t, loopbackConn(t), ts.Addr(), "big", opt, want)
			if st.Blocks != blocks {
				t.Fatalf("accepted %d blocks, want %d", st.Blocks, blocks)
			}
			if diff := cmp.Diff([]int64{65535, 65536}, wrapLost); diff != "" {
				t.Errorf("blocks lost at the wrap, by sequence (-want +got):\n%s", diff)
			}
			ev := ts.fetches(t, len(before)+1)[len(before)]
			if ev.Outcome != event.OutcomeOK || ev.Bytes != int64(len(want)) || ev.TFTP.Retransmits == 0 ||
				ev.TFTP.Datagrams != blocks+ev.TFTP.Retransmits {
				t.Errorf("event %+v %+v; want ok, %d bytes, %d blocks + some retransmits", ev, ev.TFTP, len(want), blocks)
			}
		})
	}
}
