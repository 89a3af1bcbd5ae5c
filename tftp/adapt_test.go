package tftp

import (
	"bytes"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// TestWindowedPeriodicLossNoStall is the stall another engineer saw on main
// in default mode: the client loses every DATA packet n with n%97 == 13
// (2 MiB, blksize 1468, windowsize 64, server timeout 1 s). The sender gave
// up with "blocks 60-123: no acknowledgement after 6 sends" while the
// client waited at block 124 resending an old ACK: the last block of the
// window was lost, the client's timer (200 ms) resent its old ACK 59 and
// restarted its count there, so the window resent (60..123, duplicates to
// it) drew nothing. The adaptive timer now probes the lost tail within a
// few round trips, long before the client's timer.
func TestWindowedPeriodicLossNoStall(t *testing.T) {
	ts := startServer(t, Config{Timeout: time.Second})
	want := ts.file(t, "f", 2<<20)
	c := newWinClient(t, loopbackConn(t))
	c.resendOldACK = true // as the client that saw the stall
	c.data = func(n int, _ int64) action {
		if n%97 == 13 {
			return drop
		}
		return deliver
	}
	got, _, err := c.get(ts.Addr(), "f", 1468, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d (content differs)", len(got), len(want))
	}
	ev := ts.fetches(t, 1)[0]
	if ev.Outcome != event.OutcomeOK || ev.Bytes != int64(len(want)) {
		t.Errorf("event %+v %+v; want ok, %d bytes", ev, ev.TFTP, len(want))
	}
	t.Logf("%d ACKs, %d early, %d client timeouts; %+v", c.acks, c.earlyACKs, c.timeouts, ev.TFTP)
}
