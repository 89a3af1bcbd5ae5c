package perfsrv

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// TestIperf3Caps: what one test or connection may make the server hold
// (issue 27): -l, the UDP packet budget, the handshake budget.
func TestIperf3Caps(t *testing.T) {
	params := func(m map[string]any) []byte { b, _ := json.Marshal(m); return b }
	t.Run("block over iperf3's 1 MiB", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c)
		sendJSON(t, c, params(map[string]any{"tcp": true, "time": 2, "reverse": true, "len": 16 << 20}))
		wantServerError(t, c, ieBlockSize)
		wantLog(t, s, lg, "at most 1048576 bytes a block")
	})
	for _, tc := range []struct {
		name string
		l    Limits
		p    map[string]any
		ie   int
		log  string
	}{
		{"UDP datagram under min_udp_len", Limits{}, map[string]any{"udp": true, "time": 2, "bandwidth": 1e6, "len": 64},
			ieInitTest, "UDP datagrams of at least 128 bytes"},
		{"UDP without a rate", Limits{}, map[string]any{"udp": true, "time": 2, "bandwidth": 0, "len": 1448},
			ieTotalRate, "-u -b 0: an unbounded rate"},
		{"UDP over max_pps", Limits{MaxPPS: 1000}, map[string]any{"udp": true, "time": 2, "parallel": 2, "bandwidth": 5e6, "len": 1000},
			ieTotalRate, "= 1250 datagrams/s: at most 1000 per test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, lg := startIperf3(t, tc.l)
			c := dialCtl(t, s)
			sendCookie(t, c, testCookie)
			readState(t, c)
			sendJSON(t, c, params(tc.p))
			wantServerError(t, c, tc.ie)
			wantLog(t, s, lg, tc.log)
		})
	}
	t.Run("UDP over max_pps_total", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{MaxPPS: 1000, MaxPPSTotal: 1500})
		udp := params(map[string]any{"udp": true, "time": 2, "bandwidth": 8e6, "len": 1000}) // 1000 datagrams/s
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c)
		sendJSON(t, c, udp)
		if st := readState(t, c); st != stateCreateStreams {
			t.Fatalf("first test: state %d, want CREATE_STREAMS", st)
		}
		c2 := dialCtl(t, s)
		sendCookie(t, c2, "bbcdefghijklmnopqrstuvwxyz234567abcd")
		readState(t, c2)
		sendJSON(t, c2, udp)
		wantServerError(t, c2, ieAccessDenied)
		c.Close()
		wantLog(t, s, lg, "the running UDP tests have 1000 of 1500")
		if !testenv.WaitFor(5*time.Second, func() bool { return s.udpPPSNow() == 0 }) {
			t.Errorf("the ended test still holds %d datagrams/s of the budget", s.udpPPSNow())
		}
	})
	t.Run("handshake budget per address", func(t *testing.T) {
		s, _, _ := startIperf3(t, Limits{})
		for range maxPendingPerAddr {
			dialCtl(t, s) // silent: holds a pending slot
		}
		const reason = "iperf3: too many connections before their cookie"
		if !testenv.WaitFor(2*time.Second, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.pending.all == maxPendingPerAddr
		}) {
			t.Fatal("the silent connections hold no handshake slots")
		}
		// The reset may come before connect returns on loopback.
		over, err := net.DialTimeout("tcp", s.Addr().String(), 2*time.Second)
		if err == nil {
			defer over.Close()
			_ = over.SetReadDeadline(time.Now().Add(time.Second))
			_, err = io.ReadFull(over, make([]byte, 1))
		}
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection over the budget: read %v, want a reset", err)
		}
		if n := s.Refusals()[reason]; n != 1 {
			t.Errorf("%d refusals %q, want 1", n, reason)
		}
	})
	t.Run("silent connection times out", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{})
		c := dialCtl(t, s)
		start := time.Now()
		var ne net.Error
		if _, err := io.ReadFull(c, make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("silent connection: %v, want closed by the server", err)
		}
		if d := time.Since(start); d > handshakeTimeout+time.Second {
			t.Errorf("silent connection held %v, handshake budget %v", d, handshakeTimeout)
		}
		wantLog(t, s, lg, "no cookie")
	})
}

// TestBlocksNext: small blocks go several to a write, never past -n or -k.
func TestBlocksNext(t *testing.T) {
	for _, tc := range []struct {
		name        string
		p           Params
		blk         int
		total, blks int64
		want        int
	}{
		{"default block", Params{TCP: true, Time: 10}, 128 << 10, 0, 0, 1},
		{"1 MiB block", Params{TCP: true, Time: 10}, 1 << 20, 0, 0, 1},
		{"1-byte blocks", Params{TCP: true, Time: 10}, 1, 0, 0, minTCPWrite},
		{"-n left 1000 of 100-byte blocks", Params{TCP: true, Bytes: 10000}, 100, 9000, 90, 10},
		{"-n reached", Params{TCP: true, Bytes: 10000}, 100, 10000, 100, 1},
		{"-k left 3", Params{TCP: true, Blocks: 10}, 100, 700, 7, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &measure{t: &iperf3Test{p: tc.p}}
			m.total.Store(tc.total)
			m.blocks.Store(tc.blks)
			if got := m.blocksNext(tc.blk); got != tc.want {
				t.Errorf("blocksNext(%d) = %d, want %d", tc.blk, got, tc.want)
			}
		})
	}
}

// TestRunLimit: a -t test may run its time, omitted seconds and endGrace;
// one ended by -n or -k stops at MaxDuration.
func TestRunLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		want time.Duration
	}{
		{"-t 10 -O 2", Params{TCP: true, Time: 10, Omit: 2}, 12*time.Second + endGrace},
		{"-t 60", Params{TCP: true, Time: 60}, 60*time.Second + endGrace},
		{"-n 100G", Params{TCP: true, Bytes: 100 << 30}, 60 * time.Second},
		{"-k 1G", Params{TCP: true, Blocks: 1 << 30}, 60 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := &iperf3Test{s: &Iperf3{cfg: Config{}.withDefaults()}, p: tc.p}
			if got := tt.runLimit(); got != tc.want {
				t.Errorf("runLimit() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSlots(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	var s slots
	for i, step := range []struct {
		ip   netip.Addr
		want bool
	}{{a, true}, {a, true}, {a, false}, {b, true}, {b, false}} {
		if got := s.take(step.ip, 3, 2); got != step.want {
			t.Errorf("take %d (%v): %v, want %v", i, step.ip, got, step.want)
		}
	}
	s.give(a)
	if !s.take(b, 3, 2) || s.all != 3 || s.by[a] != 1 || s.by[b] != 2 {
		t.Errorf("after a give: %+v", s)
	}
	s.give(a)
	if _, held := s.by[a]; held {
		t.Errorf("an address with no slot left is still remembered: %+v", s)
	}
}

func TestReadJSON(t *testing.T) {
	msg := func(size uint32, body string) io.Reader {
		return strings.NewReader(string(binary.BigEndian.AppendUint32(nil, size)) + body)
	}
	if b, err := readJSON(msg(7, `{"a":1}`)); err != nil || string(b) != `{"a":1}` {
		t.Errorf("a whole message: %q, %v", b, err)
	}
	if _, err := readJSON(msg(maxJSON, `{"a":1}`)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a message cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := readJSON(msg(maxJSON+1, "")); !errors.Is(err, errBadParams) {
		t.Errorf("a message over maxJSON: %v, want errBadParams", err)
	}
}
