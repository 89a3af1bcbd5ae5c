//go:build linux

package stream

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/netlab"
)

// newBed builds a testbed with a stream server in its server namespace.
func newBed(t *testing.T) (*netlab.Testbed, string) {
	t.Helper()
	tb := nstest.NewPair(t, nstest.Options{}).Testbed
	var s *Server
	if err := tb.Run(netlab.Server, func() error {
		var err error
		s, err = NewServer(net.JoinHostPort(tb.IP(netlab.Server).String(), "0"), nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "stream", 20*time.Second, s.Serve)
	return tb, s.Addr().String()
}

// runIn runs a client test from the testbed's client namespace.
func runIn(t *testing.T, tb *netlab.Testbed, udp bool, cfg Config) Result {
	t.Helper()
	var r Result
	err := tb.Run(netlab.Client, func() error {
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+30*time.Second)
		defer cancel()
		if udp {
			r, err = UDP(ctx, cfg)
		} else {
			r, err = TCP(ctx, cfg)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func logResult(t *testing.T, r Result) {
	t.Helper()
	t.Logf("%s %s: sender %.1f Mbit/s (%d B, %d pkts, %d retrans), receiver %.1f Mbit/s (%d B), lost %d/%d (%.1f%%), jitter %.3f ms, ooo %d",
		r.Proto, r.Direction, r.Sender.BitsPerSecond/1e6, r.Sender.Bytes, r.Sender.Packets, r.Sender.Retransmits,
		r.Receiver.BitsPerSecond/1e6, r.Receiver.Bytes, r.Receiver.Lost, r.Receiver.Packets+r.Receiver.Lost,
		r.Receiver.LostPercent, r.Receiver.JitterMs, r.Receiver.OutOfOrder)
}

// TestTestbedStreams runs all four tests across the veth, 1 s each.
func TestTestbedStreams(t *testing.T) {
	tb, addr := newBed(t)
	for _, tc := range []struct {
		name string
		udp  bool
		cfg  Config
	}{
		{"tcp tx", false, Config{Direction: Tx}},
		{"tcp rx", false, Config{Direction: Rx}},
		{"udp tx 50mbit", true, Config{Direction: Tx, Rate: 50e6}},
		{"udp rx 50mbit", true, Config{Direction: Rx, Rate: 50e6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Addr, tc.cfg.Duration, tc.cfg.Interval = addr, time.Second, 250*time.Millisecond
			r := runIn(t, tb, tc.udp, tc.cfg)
			logResult(t, r)
			checkAccounting(t, r)
			if len(r.Intervals) < 3 || len(r.PeerIntervals) < 3 {
				t.Errorf("%d client and %d server intervals in 1 s at 250 ms, want 4 or 5", len(r.Intervals), len(r.PeerIntervals))
			}
			if !tc.udp {
				if r.Receiver.Bytes != r.Sender.Bytes {
					t.Errorf("TCP receiver got %d bytes, sender wrote %d", r.Receiver.Bytes, r.Sender.Bytes)
				}
				if r.Intervals[0].SndCwnd == 0 {
					t.Errorf("no cwnd from the sender's TCP_INFO in %+v", r.Intervals[0])
				}
				return
			}
			if r.Receiver.JitterMs < 0 || r.Receiver.Packets+r.Receiver.Lost != r.Sender.Packets {
				t.Errorf("received %d + lost %d != sent %d (jitter %v)", r.Receiver.Packets, r.Receiver.Lost, r.Sender.Packets, r.Receiver.JitterMs)
			}
			// The pacer never sends faster than asked (10% over at most);
			// short of the rate is a starved sender on a busy host unless it
			// is far short (under half: the pacer is broken).
			switch got := r.Sender.BitsPerSecond; {
			case got > 55e6 || got < 25e6:
				t.Errorf("sent at %.1f Mbit/s, asked 50", got/1e6)
			case got < 45e6:
				t.Logf("sent at %.1f Mbit/s, asked 50: short, as a sender starved of CPU is", got/1e6)
			}
		})
	}
}

// TestTestbedUDPLoss sends 20 Mbit/s into a 10mbit tbf: about half is
// lost, either way.
func TestTestbedUDPLoss(t *testing.T) {
	tb, addr := newBed(t)
	for _, dir := range []Direction{Tx, Rx} {
		t.Run(dir.String(), func(t *testing.T) {
			side := netlab.Client
			if dir == Rx {
				side = netlab.Server
			}
			if _, err := tb.SetRate(side, 10e6); err != nil {
				t.Fatal(err)
			}
			defer tb.ClearRate(side)
			r := runIn(t, tb, true, Config{Addr: addr, Direction: dir, Duration: 2 * time.Second, Rate: 20e6})
			logResult(t, r)
			checkAccounting(t, r)
			// tbf counts Ethernet frames: 1448 bytes of payload are 1490 on
			// the wire, so 9.7 Mbit/s of payload gets through, 51% is lost
			// at 20 Mbit/s. The loss is judged against the rate really
			// sent: a sender starved of CPU on a busy host sends less.
			sent := r.Sender.BitsPerSecond
			if sent < 12e6 {
				t.Logf("sent only %.1f Mbit/s of the 20 asked (a starved sender): loss not judged", sent/1e6)
			} else if p, want := r.Receiver.LostPercent, 100*(1-9.7e6/sent); p < want-11 || p > want+11 {
				t.Errorf("lost %.1f%% sending %.1f Mbit/s into the 10mbit tbf, want about %.0f%%", p, sent/1e6, want)
			}
			if got := r.Receiver.BitsPerSecond; got > 10.5e6 || sent >= 12e6 && got < 8.5e6 {
				t.Errorf("received %.2f Mbit/s through a 10mbit tbf (sent %.1f)", got/1e6, sent/1e6)
			}
			if r.Receiver.JitterMs < 0 {
				t.Errorf("jitter %v", r.Receiver.JitterMs)
			}
		})
	}
}
