//go:build linux

package tftp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
)

// lockstepRest completes a lock-step fetch whose DATA 1 (first) came from
// from, and returns the file.
func lockstepRest(t *testing.T, c *rawClient, first []byte, from netip.AddrPort) []byte {
	t.Helper()
	var got []byte
	for b, block := first, uint16(1); ; block++ {
		if binary.BigEndian.Uint16(b) != opDATA || binary.BigEndian.Uint16(b[2:]) != block {
			t.Fatalf("want DATA %d, got % x", block, b[:min(len(b), 4)])
		}
		got = append(got, b[4:]...)
		c.send(from, ack(block))
		if len(b) < 4+512 {
			return got
		}
		b, _ = c.recv()
	}
}

// TestLockstepThreads: a lock-step transfer waits for its ACKs on a thread
// of its own while one is free under LockstepThreads (its ACKs are read
// there), one beyond the cap falls back to the poller, a windowed one never
// takes a thread, the records are the same either way, the thread is free
// again afterwards, and a threaded transfer replaced while blocked in its
// read ends at once (the timeout is a minute, the test waits 10 s). Stats
// counts each of these as it happens (metrics exports them).
func TestLockstepThreads(t *testing.T) {
	ts := startServer(t, Config{LockstepThreads: 1, Timeout: time.Minute})
	want := ts.file(t, "f", 512*3+1)
	small := ts.file(t, "g", 100)

	a := newRawClient(t, ts.Addr())
	a.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	firstA, fromA := a.recv() // A holds the thread, unacknowledged
	if st := ts.Stats(); st.LockstepThreaded != 1 || st.LockstepThreadsBusy != 1 || st.LockstepThreadsCap != 1 {
		t.Fatalf("%d transfers on a thread, %d of %d threads busy; want 1, 1 of 1",
			st.LockstepThreaded, st.LockstepThreadsBusy, st.LockstepThreadsCap)
	}

	b := newRawClient(t, ts.Addr())
	b.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	first, from := b.recv()
	if got := lockstepRest(t, b, first, from); !bytes.Equal(got, want) {
		t.Fatalf("B (over the cap) got %d bytes, want %d", len(got), len(want))
	}
	ts.fetches(t, 1)
	if st := ts.Stats(); st.LockstepThreaded != 1 || st.LockstepPolled != 1 || st.LockstepThreadsBusy != 1 {
		t.Fatalf("after B: %d threaded, %d polled, %d threads busy; want 1, 1 and 1 (A's)",
			st.LockstepThreaded, st.LockstepPolled, st.LockstepThreadsBusy)
	}

	if got, _, err := get(loopbackConn(t), ts.Addr(), "f", ClientOptions{BlkSize: 512, WindowSize: 4}); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("windowed fetch: %v (%d bytes)", err, len(got))
	}
	ts.fetches(t, 2)
	if st := ts.Stats(); st.LockstepThreaded != 1 || st.LockstepPolled != 1 {
		t.Fatalf("after the windowed fetch: %d threaded, %d polled; want still 1 and 1", st.LockstepThreaded, st.LockstepPolled)
	}
	if n := ts.Stats().LockstepThreadRecvs; n != 0 {
		t.Errorf("%d datagrams read on threads before A ended, want 0 (counted as a transfer ends)", n)
	}

	if got := lockstepRest(t, a, firstA, fromA); !bytes.Equal(got, want) {
		t.Fatalf("A (threaded) got %d bytes, want %d", len(got), len(want))
	}
	evs := ts.fetches(t, 3)
	if n := ts.Stats().LockstepThreadRecvs; n != 4 {
		t.Errorf("%d datagrams read on the thread, want A's 4 ACKs", n)
	}
	waitFor(t, func() bool { return ts.Stats().LockstepThreadsBusy == 0 })
	wantInfo := &event.TFTPInfo{BlockSize: 512, WindowSize: 1, Timeout: time.Minute, Datagrams: 4}
	for _, i := range []int{0, 2} { // B polled, A threaded
		if diff := cmp.Diff(wantInfo, evs[i].TFTP); diff != "" || evs[i].Outcome != event.OutcomeOK || evs[i].Bytes != int64(len(want)) {
			t.Errorf("fetch %d: outcome %s, %d bytes; TFTP info (-want +got):\n%s", i, evs[i].Outcome, evs[i].Bytes, diff)
		}
	}

	// The thread is free again; the next transfer takes it and is
	// replaced while its thread is blocked in recv.
	a.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	a.recv()
	if n := ts.Stats().LockstepThreaded; n != 2 {
		t.Fatalf("%d transfers on a thread, want 2: the first did not give its thread back", n)
	}
	a.send(ts.Addr(), rq(opRRQ, "g", "octet"))
	for i := 0; ; i++ {
		p, from := a.recv()
		if len(p) == 4+len(small) && bytes.Equal(p[4:], small) {
			a.send(from, ack(1))
			break
		}
		if i > 5 {
			t.Fatal("file g never came")
		}
	}
	evs = ts.fetches(t, 5)
	got := map[string]string{evs[3].File: evs[3].Outcome, evs[4].File: evs[4].Outcome}
	if diff := cmp.Diff(map[string]string{"f": event.OutcomeAborted, "g": event.OutcomeOK}, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	waitFor(t, func() bool { return ts.Stats().LockstepThreadsBusy == 0 })
	// g took the thread, or the poller if f had not yet let it go: each
	// lock-step transfer is counted once either way.
	if st := ts.Stats(); st.LockstepThreaded+st.LockstepPolled != 4 || st.LockstepThreaded < 2 {
		t.Errorf("at the end: %d threaded, %d polled; want 4 lock-step transfers in all, at least 2 threaded",
			st.LockstepThreaded, st.LockstepPolled)
	}
}
