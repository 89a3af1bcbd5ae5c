//go:build linux

package netlab

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// TestDelayVia: a DelayLine testbed takes netem where the kernel has it and
// the delay line where it has not; an unknown way is refused by name.
func TestDelayVia(t *testing.T) {
	testenv.RequireRoot(t)
	want := DelayNetem
	probe, err := New(Options{DelayLine: true, DelayVia: DelayNetem})
	switch {
	case errors.Is(err, errNoNetem):
		want = DelayOwnLine
	case err != nil:
		t.Fatalf("New with DelayNetem: %v", err)
	default:
		if err := probe.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	t.Logf("netem probe: %v; auto picks %s", err, want)
	tb := newTB(t, Options{DelayLine: true})
	if via := tb.DelayVia(); via != want {
		t.Errorf("DelayVia %q, want %q", via, want)
	}
	if via := newTB(t, Options{}).DelayVia(); via != "" {
		t.Errorf("a testbed without DelayLine: DelayVia %q", via)
	}
	_, err = New(Options{DelayLine: true, DelayVia: "tc"})
	if err == nil || !strings.Contains(err.Error(), `"tc"`) || !strings.Contains(err.Error(), DelayNetem) {
		t.Errorf("DelayVia tc: %v, want an error naming it and the choices", err)
	}
}

// udpRTT returns the smallest round trip of n UDP echoes from the client
// to an echo socket on the server.
func udpRTT(t *testing.T, tb *Testbed, n int) time.Duration {
	t.Helper()
	var srv, cli *net.UDPConn
	if err := tb.Run(Server, func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tb.ServerIP, 0)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := tb.Run(Client, func() (err error) {
		cli, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	go func() {
		b := make([]byte, 64)
		for {
			k, from, err := srv.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDPAddrPort(b[:k], from)
		}
	}()
	best := time.Duration(-1)
	b := make([]byte, 64)
	for i := range n {
		start := time.Now()
		b[0] = byte(i)
		if _, err := cli.Write(b[:8]); err != nil {
			t.Fatal(err)
		}
		_ = cli.SetReadDeadline(start.Add(5 * time.Second))
		for {
			k, err := cli.Read(b)
			if err != nil {
				t.Fatalf("echo %d: %v", i, err)
			}
			if k == 8 && b[0] == byte(i) {
				break
			}
		}
		if rtt := time.Since(start); best < 0 || rtt < best {
			best = rtt
		}
	}
	return best
}

// TestNetemDelay: with netem the round trip grows by twice the one-way
// delay, a tbf goes under the netem (shaping what waited out its delay)
// and reads back, and clearing the rate keeps the delay.
func TestNetemDelay(t *testing.T) {
	tb := newTB(t, Options{DelayLine: true, DelayVia: DelayNetem})
	if via := tb.DelayVia(); via != DelayNetem {
		t.Fatalf("DelayVia %q", via)
	}
	base := udpRTT(t, tb, 20)
	// 10 ms: a TCG guest (e2e's TestNetemInGuest) adds 1-4 ms of timer
	// and scheduling slack to a netem delay; the bound allows 10.
	const d = 10 * time.Millisecond
	if err := tb.SetDelay(d); err != nil {
		t.Fatal(err)
	}
	if got, ok := tb.Delay(); !ok || got != d {
		t.Errorf("Delay() = %v, %v", got, ok)
	}
	// The minimum of 20: a loaded host (or a TCG guest) delays some.
	rtt := udpRTT(t, tb, 20)
	t.Logf("UDP echo min RTT: %v without delay, %v with %v each way", base, rtt, d)
	if rtt < 2*d || rtt > 2*d+base+d {
		t.Errorf("delay %v: UDP echo min %v (without delay %v), want %v .. %v", d, rtt, base, 2*d, 2*d+base+d)
	}

	const rate = 50_000_000
	r, err := tb.SetRate(Server, rate)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tb.State()
	if err != nil {
		t.Fatal(err)
	}
	if r.BitsPerSec != rate || st.Server.Rate.BitsPerSec != rate || st.Client.Rate.BitsPerSec != 0 {
		t.Errorf("rate %+v, state server %+v client %+v; want %d on the server only", r, st.Server.Rate, st.Client.Rate, rate)
	}
	for _, s := range []Side{Server, Client} {
		link, err := tb.nl[s].LinkByName(tb.iface(s))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := readNetem(tb.nl[s], link); err != nil || got != d {
			t.Errorf("%s after SetRate: netem delay %v, %v; want %v", tb.iface(s), got, err, d)
		}
	}
	// 2 MiB server -> client through netem and the tbf: it arrives whole,
	// and no faster than the rate allows beyond the tbf's 64 KiB bucket.
	const size = 2 << 20
	elapsed := tcpPush(t, tb, size)
	if mbps := float64(size) * 8 / elapsed.Seconds() / 1e6; mbps > rate/1e6*1.2 {
		t.Errorf("%.1f Mbit/s through a %d Mbit/s tbf under netem", mbps, rate/1_000_000)
	}

	if err := tb.ClearRate(Server); err != nil {
		t.Fatal(err)
	}
	if st, err := tb.State(); err != nil || st.Server.Rate.BitsPerSec != 0 {
		t.Errorf("after ClearRate: %+v, %v", st.Server.Rate, err)
	}
	if err := tb.SetDelay(0); err != nil {
		t.Fatal(err)
	}
	if rtt := udpRTT(t, tb, 20); rtt >= 2*d {
		t.Errorf("delay 0: UDP echo min %v, want below %v", rtt, 2*d)
	}
}

// tcpPush sends size bytes from the server to the client over TCP and
// returns how long the client took to read them all.
func tcpPush(t *testing.T, tb *Testbed, size int) time.Duration {
	t.Helper()
	c := tcpPair(t, tb, func(c net.Conn) { _, _ = c.Write(make([]byte, size)) })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	start := time.Now()
	n, err := io.Copy(io.Discard, c)
	if err != nil || n != int64(size) {
		t.Fatalf("read %d of %d bytes: %v", n, size, err)
	}
	return time.Since(start)
}
