package perfsrv

import (
	"encoding/binary"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

func TestUDPBudget(t *testing.T) {
	var b udpBudget
	if !b.allows(0, udpLegAllowance) || b.allows(0, udpLegAllowance+1) {
		t.Errorf("an empty flow allows %d B, want exactly the allowance", udpLegAllowance)
	}
	b.rcvd.Store(1000)
	if !b.allows(udpLegAllowance, 2000) || b.allows(udpLegAllowance, 2001) {
		t.Error("1000 B received allow 2000 B past the allowance, and not one more")
	}
	b.ended.Store(true)
	if b.wait(t.Context(), udpLegAllowance+2000, 1, time.Now().Add(time.Second)) {
		t.Error("an ended flow's budget waits for bytes that cannot come")
	}
}

// startIperf2Caps is startIperf2 with caps of its own.
func startIperf2Caps(t *testing.T, lim Limits, verified time.Duration) (*Iperf2, *event.Recorder, *syncLog) {
	t.Helper()
	rec := &event.Recorder{}
	lg := &syncLog{}
	s, err := NewIperf2(Config{Addr: "127.0.0.1:0", Limits: lim, Sink: rec, Log: slog.New(slog.NewTextHandler(lg, nil)), VerifiedFor: verified})
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, s.Serve, lg)
	return s, rec, lg
}

// tcpTest runs a plain TCP test of n bytes after the header.
func tcpTest(t *testing.T, addr string, n int) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append(buildIperf2Header(0, 5001, -100, 0), make([]byte, n)...)); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Read(make([]byte, 1))
}

// TestIperf2IdleGivesWay: two header-only connections hold both slots;
// a second later a real test takes one of theirs and is recorded, and
// the idle ones are counted, not recorded.
func TestIperf2IdleGivesWay(t *testing.T) {
	s, rec, lg := startIperf2Caps(t, Limits{MaxTests: 2, MaxPerClient: 2}, time.Minute)
	for range 2 {
		c, err := net.DialTimeout("tcp", s.Addr().String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(buildIperf2Header(0, 5001, -6000, 0)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(2*time.Second, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.active == 2 })
	time.Sleep(slotIdle + 100*time.Millisecond)
	tcpTest(t, s.Addr().String(), 100000)
	var fs []event.Fetch
	testenv.WaitFor(5*time.Second, func() bool { fs, _ = rec.Snapshot(); return len(fs) >= 1 })
	if len(fs) != 1 || fs[0].Outcome != event.OutcomeOK || fs[0].Bytes < 100000 {
		t.Fatalf("records %+v, want the real test's alone\n%s", fs, lg.String())
	}
	if n := s.refuse.Count("iperf2: evicted test sent nothing past its header (not recorded)"); n != 1 {
		t.Errorf("%d idle tests counted as evicted, want 1\n%s", n, lg.String())
	}
}

// TestIperf2ReverseNeedsTCP: a UDP -R test gets no leg from an address
// that has not run a TCP test, and gets one after it has.
func TestIperf2ReverseNeedsTCP(t *testing.T) {
	s, _, lg := startIperf2Caps(t, Limits{}, time.Minute)
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addrPort(s.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := func() []byte {
		b := make([]byte, 16, 1470)
		binary.BigEndian.PutUint32(b, 1)
		b = append(b, buildIperf2Header(iperf2HeaderVersion2, 0, -50, iperf2UpperReverse)...)
		return b[:cap(b)]
	}
	got := func() bool {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(make([]byte, 2048))
		return err == nil && n > 0
	}
	if _, err := c.Write(first()); err != nil {
		t.Fatal(err)
	}
	if got() {
		t.Fatalf("an unverified UDP -R got data\n%s", lg.String())
	}
	if n := s.refuse.Count("iperf2: UDP -R from an address that has not shown it receives"); n != 1 {
		t.Errorf("refusals %d, want 1", n)
	}
	tcpTest(t, s.Addr().String(), 1000)
	c2, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addrPort(s.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c = c2
	if _, err := c.Write(first()); err != nil {
		t.Fatal(err)
	}
	if !got() {
		t.Fatalf("a UDP -R after a TCP test from the address got no data\n%s", lg.String())
	}
}

// TestIperf2DoneFlowsBounded: 300 flows that end and keep sending leave
// at most maxDoneFlows behind, and a new flow still gets its server
// report.
func TestIperf2DoneFlowsBounded(t *testing.T) {
	s, _, lg := startIperf2Caps(t, Limits{}, time.Minute)
	to := net.UDPAddrFromAddrPort(addrPort(s.Addr()))
	dgram := func(seq int32) []byte {
		b := make([]byte, 200)
		binary.BigEndian.PutUint32(b, uint32(seq))
		return b
	}
	run := func() bool {
		c, err := net.DialUDP("udp", nil, to)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, seq := range []int32{1, 2, -3, 4} { // data after the FIN keeps it warm
			if _, err := c.Write(dgram(seq)); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(make([]byte, 512))
		return err == nil && n > 16
	}
	for range 300 {
		run()
	}
	if !run() {
		t.Fatalf("no server report after 300 ended flows\n%s", lg.String())
	}
	s.mu.Lock()
	n := len(s.flows)
	s.mu.Unlock()
	if n > maxDoneFlows {
		t.Errorf("%d flows kept, want at most %d", n, maxDoneFlows)
	}
}

// TestIperf2UDPPacketBudget: iperf 2 UDP flows within max_pps and
// max_pps_total run; one asking more datagrams/s than max_pps, and one the
// running flows leave no room for, open nothing and are counted.
func TestIperf2UDPPacketBudget(t *testing.T) {
	// 1 Mbit/s (no rate in the header) of 1470-byte datagrams is 85/s.
	s, _, _ := startIperf2Caps(t, Limits{MaxPPS: 100, MaxPPSTotal: 150}, 0)
	first := func(size int) []byte {
		b := binary.BigEndian.AppendUint32(nil, 1)
		b = append(b, make([]byte, 12)...)
		b = append(b, buildIperf2Header(0, 5001, -300, 0)...)
		return append(b, make([]byte, size-len(b))...)
	}
	send := func(size int) {
		c, err := net.Dial("udp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write(first(size)); err != nil {
			t.Fatal(err)
		}
	}
	refused := func() uint64 { return s.Refusals()["iperf2: UDP packet budget"] }
	send(1470)
	time.Sleep(100 * time.Millisecond)
	if n := refused(); n != 0 {
		t.Fatalf("a flow of 85 datagrams/s refused (%d), max_pps 100", n)
	}
	send(200) // 625/s
	if !testenv.WaitFor(2*time.Second, func() bool { return refused() == 1 }) {
		t.Errorf("a flow of 625 datagrams/s: %d refusals, want 1 (max_pps 100)", refused())
	}
	send(1470) // 85 + 85 > 150
	if !testenv.WaitFor(2*time.Second, func() bool { return refused() == 2 }) {
		t.Errorf("a second flow of 85 datagrams/s: %d refusals, want 2 (max_pps_total 150)", refused())
	}
	s.mu.Lock()
	used := s.udpPPS.used
	s.mu.Unlock()
	if used != 85 {
		t.Errorf("the running flow holds %d datagrams/s of the budget, want 85", used)
	}
}

// TestIperf2SmallDatagramFilter: datagrams under min_udp_len reach the
// server at a flow's start (so its refusal names the rule) and, past it,
// only as a sample (1 in smallSample): the socket filter drops the rest.
func TestIperf2SmallDatagramFilter(t *testing.T) {
	s, _, _ := startIperf2Caps(t, Limits{}, 0)
	c, err := net.Dial("udp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dgram := func(seq uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, seq)
		return append(b, make([]byte, 96)...) // 100 bytes, under the default 128
	}
	if _, err := c.Write(dgram(1)); err != nil {
		t.Fatal(err)
	}
	budget := func() uint64 { return s.Refusals()["iperf2: UDP packet budget"] }
	if !testenv.WaitFor(2*time.Second, func() bool { return budget() == 1 }) {
		t.Fatalf("a flow's first 100-byte datagram: %d packet budget refusals, want 1 (it must reach the server)", budget())
	}
	const n = 8 * smallSample
	for i := range n {
		_, _ = c.Write(dgram(uint32(100 + i)))
	}
	time.Sleep(200 * time.Millisecond)
	sampled := s.Refusals()["iperf2: UDP datagram under min_udp_len (1 in 1024 read, the rest dropped by the kernel)"]
	t.Logf("%d datagrams of 100 bytes past a flow's start: %d read", n, sampled)
	if sampled > n/100 {
		t.Errorf("%d of %d short datagrams past a flow's start were read, want about 1 in %d", sampled, n, smallSample)
	}
}
