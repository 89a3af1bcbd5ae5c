//go:build linux

package tftp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pxeperf/pxeperf/event"
	"golang.org/x/sys/unix"
)

// lockstepRest completes a lock-step fetch whose DATA 1 (first) came from
// from, and returns the file.
func lockstepRest(t *testing.T, c *rawClient, first []byte, from netip.AddrPort) []byte {
	t.Helper()
	return lockstepFrom(t, c, first, 1, from)
}

// lockstepFrom completes a lock-step fetch from DATA block (b), and
// returns the file's bytes from that block on.
func lockstepFrom(t *testing.T, c *rawClient, b []byte, block uint16, from netip.AddrPort) []byte {
	t.Helper()
	var got []byte
	for ; ; block++ {
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

// TestTransferThreads: a transfer waits for its ACKs on a thread of its own
// while one is free under TransferThreads (its ACKs are read there), lock-
// step and windowed ones beyond the cap fall back to the poller, the
// records are the same either way, the thread is free again afterwards
// (a windowed transfer takes it then), and a threaded transfer replaced
// while blocked in its read ends at once (the timeout is a minute, the
// test waits 10 s). Stats counts each of these as it happens (metrics
// exports them).
func TestTransferThreads(t *testing.T) {
	ts := startServer(t, Config{TransferThreads: 1, Timeout: time.Minute})
	want := ts.file(t, "f", 512*3+1)
	small := ts.file(t, "g", 100)

	a := newRawClient(t, ts.Addr())
	a.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	firstA, fromA := a.recv() // A holds the thread, unacknowledged
	if st := ts.Stats(); st.Threaded != 1 || st.ThreadsBusy != 1 || st.ThreadsCap != 1 {
		t.Fatalf("%d transfers on a thread, %d of %d threads busy; want 1, 1 of 1",
			st.Threaded, st.ThreadsBusy, st.ThreadsCap)
	}

	b := newRawClient(t, ts.Addr())
	b.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	first, from := b.recv()
	if got := lockstepRest(t, b, first, from); !bytes.Equal(got, want) {
		t.Fatalf("B (over the cap) got %d bytes, want %d", len(got), len(want))
	}
	ts.fetches(t, 1)
	if st := ts.Stats(); st.Threaded != 1 || st.Polled != 1 || st.ThreadsBusy != 1 {
		t.Fatalf("after B: %d threaded, %d polled, %d threads busy; want 1, 1 and 1 (A's)",
			st.Threaded, st.Polled, st.ThreadsBusy)
	}

	if got, _, err := get(loopbackConn(t), ts.Addr(), "f", ClientOptions{BlkSize: 512, WindowSize: 4}); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("windowed fetch: %v (%d bytes)", err, len(got))
	}
	ts.fetches(t, 2)
	if st := ts.Stats(); st.Threaded != 1 || st.Polled != 2 {
		t.Fatalf("after a windowed fetch over the cap: %d threaded, %d polled; want 1 and 2", st.Threaded, st.Polled)
	}
	if n := ts.Stats().ThreadRecvs; n != 0 {
		t.Errorf("%d datagrams read on threads before A ended, want 0 (counted as a transfer ends)", n)
	}

	if got := lockstepRest(t, a, firstA, fromA); !bytes.Equal(got, want) {
		t.Fatalf("A (threaded) got %d bytes, want %d", len(got), len(want))
	}
	evs := ts.fetches(t, 3)
	if n := ts.Stats().ThreadRecvs; n != 4 {
		t.Errorf("%d datagrams read on the thread, want A's 4 ACKs", n)
	}
	waitFor(t, func() bool { return ts.Stats().ThreadsBusy == 0 })
	wantInfo := &event.TFTPInfo{BlockSize: 512, WindowSize: 1, Timeout: time.Minute, Datagrams: 4}
	for _, i := range []int{0, 2} { // B polled, A threaded
		if diff := cmp.Diff(wantInfo, evs[i].TFTP); diff != "" || evs[i].Outcome != event.OutcomeOK || evs[i].Bytes != int64(len(want)) {
			t.Errorf("fetch %d: outcome %s, %d bytes; TFTP info (-want +got):\n%s", i, evs[i].Outcome, evs[i].Bytes, diff)
		}
	}

	// A windowed transfer takes the free thread: the ACK of its OACK and
	// of its window are read there.
	if got, _, err := get(loopbackConn(t), ts.Addr(), "f", ClientOptions{BlkSize: 512, WindowSize: 4}); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("windowed fetch on the thread: %v (%d bytes)", err, len(got))
	}
	evs = ts.fetches(t, 4)
	waitFor(t, func() bool { return ts.Stats().ThreadsBusy == 0 })
	if st := ts.Stats(); st.Threaded != 2 || st.Polled != 2 || st.ThreadRecvs < 4+2 {
		t.Fatalf("after a windowed fetch under the cap: %d threaded, %d polled, %d datagrams read on threads; want 2, 2 and at least 6",
			st.Threaded, st.Polled, st.ThreadRecvs)
	}
	// The windowed records: the same, threaded or polled, but for the RTT
	// each measured.
	wantInfo = &event.TFTPInfo{BlockSize: 512, WindowSize: 4, TSize: true, Timeout: time.Minute, Datagrams: 4,
		WindowMin: 4, WindowMedian: 4, WindowMax: 4}
	noRTT := cmpopts.IgnoreFields(event.TFTPInfo{}, "RTT")
	if diff := cmp.Diff(wantInfo, evs[3].TFTP, noRTT); diff != "" || evs[3].Outcome != event.OutcomeOK || evs[3].Bytes != int64(len(want)) {
		t.Errorf("threaded windowed fetch: outcome %s, %d bytes; TFTP info (-want +got):\n%s", evs[3].Outcome, evs[3].Bytes, diff)
	}
	for i, e := range evs[:3] {
		if e.TFTP.WindowSize != 4 {
			continue
		}
		// The polled windowed fetch has the same record.
		if diff := cmp.Diff(wantInfo, e.TFTP, noRTT); diff != "" || e.Outcome != event.OutcomeOK || e.Bytes != int64(len(want)) {
			t.Errorf("polled windowed fetch %d: outcome %s, %d bytes; TFTP info (-want +got):\n%s", i, e.Outcome, e.Bytes, diff)
		}
	}

	// The thread is free again; the next transfer takes it and is
	// replaced while its thread is blocked in recv.
	a.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	a.recv()
	if n := ts.Stats().Threaded; n != 3 {
		t.Fatalf("%d transfers on a thread, want 3: the windowed one did not give its thread back", n)
	}
	a.send(ts.Addr(), rq(opRRQ, "g", "octet"))
	a.oneBlock("g", small)
	evs = ts.fetches(t, 6)
	got := map[string]string{evs[4].File: evs[4].Outcome, evs[5].File: evs[5].Outcome}
	if diff := cmp.Diff(map[string]string{"f": event.OutcomeAborted, "g": event.OutcomeOK}, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	waitFor(t, func() bool { return ts.Stats().ThreadsBusy == 0 })
	// g took the thread, or the poller if f had not yet let it go: each
	// transfer is counted once either way.
	if st := ts.Stats(); st.Threaded+st.Polled != 6 || st.Threaded < 3 {
		t.Errorf("at the end: %d threaded, %d polled; want 6 transfers in all, at least 3 threaded",
			st.Threaded, st.Polled)
	}
}

// narrowedThreads lists the process's threads whose CPU affinity is not
// all of want (from /proc/self/task/*/status Cpus_allowed_list), with
// their lists.
func narrowedThreads(t *testing.T, want string) map[string]string {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != want {
				out[filepath.Base(filepath.Dir(p))] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// TestLockstepRidesClientCPU: after its pinAfter-th ACK a threaded
// lock-step transfer's thread moves onto the CPU that took in the
// client's packets, at most one transfer per CPU; when the transfers end,
// every thread has the process's affinity again and every CPU is free.
// Two clients in one goroutine usually send from one CPU: the second
// then stays unpinned.
func TestLockstepRidesClientCPU(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var want string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			want = strings.TrimSpace(v)
		}
	}
	if all.Count() < 2 {
		t.Skip("one CPU allowed: no thread can be moved")
	}
	if n := narrowedThreads(t, want); len(n) > 0 {
		t.Fatalf("threads narrowed before the test: %v", n)
	}
	ts := startServer(t, Config{TransferThreads: 4, Timeout: time.Minute})
	data := ts.file(t, "f", 512*20+7)
	type client struct {
		c     *rawClient
		first []byte
		from  netip.AddrPort
		got   []byte
	}
	var cs []*client
	for range 2 {
		c := &client{c: newRawClient(t, ts.Addr())}
		c.c.send(ts.Addr(), rq(opRRQ, "f", "octet"))
		c.first, c.from = c.c.recv()
		// ACK blocks 1..pinAfter+1: the server has read pinAfter ACKs
		// once it sends the block after them.
		for block := uint16(1); block <= pinAfter+1; block++ {
			c.got = append(c.got, c.first[4:]...)
			c.c.send(c.from, ack(block))
			c.first, _ = c.c.recv()
		}
		cs = append(cs, c)
	}
	riders := func() (cpus []int) {
		for i := range ts.cpuRiders {
			if ts.cpuRiders[i].Load() {
				cpus = append(cpus, i)
			}
		}
		return cpus
	}
	pinned, taken := narrowedThreads(t, want), riders()
	if len(taken) == 0 || len(taken) != len(pinned) {
		t.Fatalf("mid-transfer: CPUs ridden %v, threads narrowed %v; want as many threads as CPUs, at least one", taken, pinned)
	}
	if n := ts.Stats().Pinned; n != int64(len(taken)) {
		t.Errorf("Stats.Pinned %d, want %d (the CPUs ridden)", n, len(taken))
	}
	seen := map[string]bool{}
	for tid, cpus := range pinned {
		if seen[cpus] || strings.ContainsAny(cpus, ",-") {
			t.Errorf("thread %s on %q: want one CPU, one thread per CPU (all %v)", tid, cpus, pinned)
		}
		seen[cpus] = true
	}
	for _, c := range cs {
		c.got = append(c.got, lockstepFrom(t, c.c, c.first, pinAfter+2, c.from)...)
		if !bytes.Equal(c.got, data) {
			t.Fatalf("got %d bytes, want %d", len(c.got), len(data))
		}
	}
	ts.fetches(t, 2)
	waitFor(t, func() bool { return ts.Stats().ThreadsBusy == 0 })
	if n, r := narrowedThreads(t, want), riders(); len(n) > 0 || len(r) > 0 {
		t.Errorf("after the transfers: threads still narrowed %v, CPUs still ridden %v", n, r)
	}
}
