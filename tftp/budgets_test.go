package tftp

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// Tests of issue 27's TFTP budgets: what forged or slow clients may hold.
// The real binary under a flood is in hostile/tftp_linux_test.go.

// TestErrorRecordsBudget: fetches that did not complete go on record up to
// ErrorRecordsPerMinute per client; past it they are still answered
// ("File not found"), counted, and not recorded. A fetch that completed is
// always recorded.
func TestErrorRecordsBudget(t *testing.T) {
	ts := startServer(t, Config{ErrorRecordsPerMinute: 5})
	want := ts.file(t, "ok", 3000)
	c := newRawClient(t, ts.Addr())
	for i := range 20 {
		c.send(ts.Addr(), rq(opRRQ, fmt.Sprintf("missing-%d", i), "octet"))
		b, _ := c.recv()
		if code := errCode(t, b); code != errNotFound {
			t.Fatalf("request %d: error %d, want %d (file not found)", i, code, errNotFound)
		}
	}
	fetchFrom(t, ts, "127.0.0.1", "ok", want)
	ts.fetches(t, 6)
	time.Sleep(100 * time.Millisecond) // no more come
	fetches, _ := ts.rec.Snapshot()
	ok := 0
	for _, f := range fetches {
		if f.Outcome == event.OutcomeOK {
			ok++
		}
	}
	if len(fetches) != 6 || ok != 1 {
		t.Errorf("20 missing files and a good fetch put %d records (%d ok); want the budget of 5 and the good one", len(fetches), ok)
	}
	if n := ts.Stats().Refused[RefuseErrorRecords]; n != 15 {
		t.Errorf("%d error records counted as over the budget, want 15", n)
	}
}

// TestUnheardPerClient: one address has at most unheardPerClient (4)
// transfers waiting for their first ACK; more requests are dropped and
// counted, as forged ones from an address that never answers would be;
// another address is not held up.
func TestUnheardPerClient(t *testing.T) {
	ts := startServer(t, Config{Timeout: 5 * time.Second, ShutdownGrace: 100 * time.Millisecond})
	ts.file(t, "f", 100_000)
	want := ts.file(t, "ok", 3000)
	for i := range 10 {
		c := newRawClient(t, ts.Addr())
		c.send(ts.Addr(), rq(opRRQ, "f", "octet", "blksize", strconv.Itoa(512+i)))
	}
	waitFor(t, func() bool { return ts.Stats().Refused[RefuseUnheard] == 6 })
	if n := ts.Stats().Requests; n != 4 {
		t.Errorf("%d transfers started, want 4", n)
	}
	fetchFrom(t, ts, "127.0.0.7", "ok", want)
}

// TestPreemptSlowTransfer: at MaxTransfers, a new request takes the slot
// of a transfer under MinRate (here two nobody acknowledges, 100 ms after
// their first reply) and is served at once; with MinRate negative it is
// dropped as busy, as before.
func TestPreemptSlowTransfer(t *testing.T) {
	for name, rate := range map[string]int64{"default": 0, "never": -1} {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, Config{MaxTransfers: 2, MaxTransfersPerClient: 2, Timeout: 5 * time.Second, MinRate: rate,
				ShutdownGrace: 100 * time.Millisecond})
			ts.file(t, "f", 100_000)
			want := ts.file(t, "ok", 3000)
			for _, ip := range []string{"127.0.0.5", "127.0.0.6"} {
				c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(ip)})
				if err != nil {
					t.Skipf("cannot bind %s: %v", ip, err)
				}
				t.Cleanup(func() { c.Close() })
				if _, err := c.WriteToUDPAddrPort(rq(opRRQ, "f", "octet", "blksize", "1468"), ts.Addr()); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, func() bool { return ts.Stats().Requests == 2 })
			time.Sleep(2 * preemptAfter)
			c := loopbackConn(t)
			got, _, err := get(c, ts.Addr(), "ok", ClientOptions{BlkSize: 1468, Timeout: 300 * time.Millisecond, Retries: 1})
			st := ts.Stats()
			if rate < 0 {
				if err == nil || st.Refused[RefuseSlow] != 0 || st.Refused[RefuseBusy] == 0 {
					t.Errorf("MinRate -1: fetch %v, stats %+v; want it refused as busy, nothing preempted", err, st)
				}
				return
			}
			if err != nil || string(got) != string(want) {
				t.Fatalf("a client at the cap: %v (%d bytes); want the file, a slow transfer's slot given up (stats %+v)", err, len(got), st)
			}
			if st.Refused[RefuseSlow] != 1 {
				t.Errorf("%d transfers gave their slot up, want 1", st.Refused[RefuseSlow])
			}
		})
	}
}
