package httpboot

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/measure"
)

// pacedRead reads one response from br in 64 KiB steps with a pause after
// each, so a loopback transfer lasts long enough for several intervals.
func pacedRead(t *testing.T, br *bufio.Reader, pause time.Duration) int64 {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for i := 0; i < 1<<16; i++ {
		k, err := io.ReadFull(resp.Body, buf)
		n += int64(k)
		if err != nil {
			break
		}
		time.Sleep(pause)
	}
	return n
}

// checkIntervals: contiguous from 0, each closed interval at least one
// period long, bytes adding up to the fetch's, TCP fields filled, and about
// duration/period of them.
func checkIntervals(t *testing.T, f event.Fetch, period time.Duration) {
	t.Helper()
	ivs := f.Intervals
	if len(ivs) == 0 {
		t.Fatal("no intervals")
	}
	// Each closed interval lasts at least a period and, unless the sampler
	// was starved, at most a period plus one sampling step.
	lo, hi := int(f.Duration/(2*period)), int(f.Duration/period)+1
	if len(ivs) < lo || len(ivs) > hi {
		t.Errorf("%d intervals for %v at %v, want %d..%d", len(ivs), f.Duration, period, lo, hi)
	}
	var sum, ackedSum int64
	var prev time.Duration
	for i, iv := range ivs {
		if iv.Start != prev || iv.End <= iv.Start {
			t.Errorf("interval %d: %v..%v after %v", i, iv.Start, iv.End, prev)
		}
		if i < len(ivs)-1 {
			if iv.End-iv.Start < period {
				t.Errorf("interval %d lasts %v, shorter than the period %v", i, iv.End-iv.Start, period)
			}
			ackedSum += iv.Bytes
		}
		if iv.Cwnd == 0 || iv.SndWnd == 0 || iv.RTT == 0 {
			t.Errorf("interval %d lacks TCP fields: %+v", i, iv)
		}
		prev = iv.End
		sum += iv.Bytes
	}
	if prev > f.Duration {
		t.Errorf("last interval ends at %v, after the fetch's %v", prev, f.Duration)
	}
	if sum != f.Bytes {
		t.Errorf("interval bytes add up to %d, fetch has %d", sum, f.Bytes)
	}
	// Acked bytes of closed intervals cannot exceed the body plus the
	// response header.
	if ackedSum > f.Bytes+1024 {
		t.Errorf("closed intervals acked %d bytes of a %d-byte body", ackedSum, f.Bytes)
	}
	t.Logf("%d intervals over %v, first %+v, last %+v", len(ivs), f.Duration, ivs[0], ivs[len(ivs)-1])
	ti := f.TCP
	if ti == nil || ti.MedSndWnd == 0 || ti.MedSndWnd > ti.MaxSndWnd {
		t.Errorf("median window: %+v", ti)
	}
}

// TestIntervalsFromTransfer reads two files over one keep-alive connection
// with a slow client on loopback; each fetch gets its own intervals.
func TestIntervalsFromTransfer(t *testing.T) {
	const size = 24 << 20
	const period = 100 * time.Millisecond
	h := defaultHTTP()
	h.Interval = period
	e := newTestEnv(t, envOpts{http: h, files: map[string][]byte{"a.img": pattern(size, 1), "b.img": pattern(size, 2)}})
	// A small receive buffer keeps the server's send pace tied to the reader.
	c := dialGet(t, e.srv.Addr().String(), "/a.img", 256<<10)
	br := bufio.NewReader(c)
	if n := pacedRead(t, br, 4*time.Millisecond); n != size {
		t.Fatalf("first read %d bytes, want %d", n, size)
	}
	fmt.Fprintf(c, "GET /b.img HTTP/1.1\r\nHost: pxeperf\r\n\r\n")
	if n := pacedRead(t, br, 4*time.Millisecond); n != size {
		t.Fatalf("second read %d bytes, want %d", n, size)
	}
	fs := e.waitFetches(t, 2)
	for i, f := range fs {
		t.Run(fmt.Sprint("fetch ", i), func(t *testing.T) {
			if f.Bytes != size || f.Outcome != event.OutcomeOK {
				t.Fatalf("fetch %d: %d bytes, %s", i, f.Bytes, f.Outcome)
			}
			checkIntervals(t, f, period)
		})
	}
}

// TestMonitorBounds: a very long fetch keeps bounded slices, evenly
// thinned windows and merged intervals that still add up.
func TestMonitorBounds(t *testing.T) {
	m := &monitor{period: time.Second, wndStride: 1, w: &countingWriter{}}
	const samples = 100000 // nearly 3 h of 100 ms samples
	var acked uint64
	for i := range samples {
		acked += 1000
		m.observe(measure.TCPInfo{BytesAcked: acked, SndWnd: uint32(i), SndCwnd: 1, MSS: 1, RTT: 1}, time.Duration(i+1)*100*time.Millisecond)
	}
	if len(m.wnds) > maxWndSamples || len(m.intervals) > maxIntervals {
		t.Fatalf("%d window samples, %d intervals: over the bounds", len(m.wnds), len(m.intervals))
	}
	// Windows grow by one per sample, so the median is near the middle.
	if med := measure.Median(append([]uint32(nil), m.wnds...)); med < samples*4/10 || med > samples*6/10 {
		t.Errorf("median of thinned windows %d, want about %d", med, samples/2)
	}
	var sum int64
	var prev time.Duration
	for i, iv := range m.intervals {
		if iv.Start != prev {
			t.Fatalf("interval %d starts at %v, previous ended %v", i, iv.Start, prev)
		}
		prev = iv.End
		sum += iv.Bytes
	}
	// The first sample is the base; every later one added 1000 bytes, and
	// the bytes after the last closed interval are still open.
	if open := int64(acked-m.base.BytesAcked) + sum; open != (samples-1)*1000 {
		t.Errorf("intervals hold %d bytes plus %d open, want %d in all", sum, acked-m.base.BytesAcked, (samples-1)*1000)
	}
	if open := time.Duration(samples)*100*time.Millisecond - prev; open >= m.period {
		t.Errorf("open interval %v is not shorter than the period %v", open, m.period)
	}
}

// deadlineConn is a net.Conn that only records SetWriteDeadline.
type deadlineConn struct {
	net.Conn
	sets     int
	deadline time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.sets++
	c.deadline = t
	return nil
}

// TestTickDeadline: the sampler moves the write deadline only when it is
// less than half a stall timeout away, yet to the same time as setting it
// on every sample would: the last tick that saw progress plus the stall
// timeout.
func TestTickDeadline(t *testing.T) {
	const stall = time.Second
	every := sampleEvery(stall, time.Second)
	t0 := time.Unix(1000, 0)
	c := &deadlineConn{deadline: t0.Add(stall)} // as watch sets it
	m := &monitor{conn: c, stall: stall, period: time.Second, start: t0, wndStride: 1, w: &countingWriter{},
		moved: t0, deadline: t0.Add(stall)}
	now := t0
	const moving = 10 * time.Second
	for now.Sub(t0) < moving {
		now = now.Add(every)
		m.w.n.Add(1000) // progress at every tick
		m.tick(now)
		if !c.deadline.After(now) {
			t.Fatalf("at %v the deadline %v has passed while bytes move", now.Sub(t0), c.deadline.Sub(t0))
		}
	}
	lastProgress := now
	if max := int(moving/(stall/2)) + 1; c.sets > max {
		t.Errorf("%d deadline moves in %v with a %v stall timeout, want at most %d", c.sets, moving, stall, max)
	}
	// The client stops: the deadline ends up one stall after the last
	// progress and stays there.
	for range 3 * int(stall/every) {
		now = now.Add(every)
		m.tick(now)
	}
	if want := lastProgress.Add(stall); !c.deadline.Equal(want) {
		t.Errorf("deadline %v after the last progress, want %v", c.deadline.Sub(lastProgress), stall)
	}
}

// TestSamplerAddRemove: monitors come and go in any order; the sampler's
// goroutine stops when none is left and starts again for the next.
func TestSamplerAddRemove(t *testing.T) {
	s := newSampler(time.Millisecond)
	ms := make([]*monitor, 8)
	for i := range ms {
		ms[i] = &monitor{w: &countingWriter{}, period: time.Second, wndStride: 1, start: time.Now()}
		s.add(ms[i])
	}
	for _, i := range []int{3, 0, 7, 5, 1, 2, 6, 4} {
		s.remove(ms[i])
		s.remove(ms[i]) // twice is harmless
		s.mu.Lock()
		for j, m := range s.mons {
			if m.idx != j || m == ms[i] {
				t.Fatalf("after removing %d: monitor at %d has idx %d", i, j, m.idx)
			}
		}
		s.mu.Unlock()
	}
	stopped := func() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.running }
	deadline := time.Now().Add(5 * time.Second)
	for !stopped() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !stopped() {
		t.Fatal("sampler still running with no monitors")
	}
	s.add(ms[0])
	defer s.remove(ms[0])
	if stopped() {
		t.Fatal("sampler not restarted for a new monitor")
	}
}

// TestFitIntervals: intervals made from tcpi_bytes_acked hold the
// response header on top of the body once the body is acknowledged; the
// excess comes off the earliest intervals and the last gets the rest.
func TestFitIntervals(t *testing.T) {
	ivs := func(b ...int64) []measure.Interval {
		var out []measure.Interval
		for _, v := range b {
			out = append(out, measure.Interval{Bytes: v})
		}
		return out
	}
	tests := map[string]struct {
		in    []measure.Interval
		total int64
		want  []int64
		rest  int64
	}{
		"tail in flight":        {ivs(100, 100), 250, []int64{100, 100}, 50},
		"header on top":         {ivs(150, 100, 100), 200, []int64{0, 100, 100}, 0},
		"header over the first": {ivs(30, 100, 100), 180, []int64{0, 80, 100}, 0},
		"exact":                 {ivs(100, 100), 200, []int64{100, 100}, 0},
		"no intervals":          {nil, 70, nil, 70},
		"more than all of them": {ivs(10, 10), 0, []int64{0, 0}, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rest := fitIntervals(tc.in, tc.total)
			var got []int64
			for _, iv := range tc.in {
				got = append(got, iv.Bytes)
			}
			if rest != tc.rest || !slices.Equal(got, tc.want) {
				t.Errorf("fitIntervals(total %d) = %v rest %d, want %v rest %d", tc.total, got, rest, tc.want, tc.rest)
			}
		})
	}
}
