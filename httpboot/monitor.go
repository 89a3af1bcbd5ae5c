package httpboot

import (
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// monitor watches one response: it samples TCP_INFO (keeping the largest
// window the client advertised, a thinned set of window samples for the
// median, and one event.Interval per period) and, while bytes move, pushes
// the connection's write deadline StallTimeout ahead. Progress is read from
// the kernel (tcpi_bytes_acked) as well as from counted writes, so the stall
// timeout also works inside one long sendfile call, which Go's poller
// splits into chunks that each honour the deadline.
//
// A sample costs one getsockopt into the probe's own buffer and no
// allocation; intervals and window samples live in slices bounded by
// maxIntervals and maxWndSamples.
type monitor struct {
	conn   net.Conn // nil when the connection is unknown
	probe  *tcpProbe
	w      *countingWriter
	stall  time.Duration
	period time.Duration
	start  time.Time
	stop   chan struct{}
	done   chan struct{}

	// Written by run until done is closed.
	maxWnd    uint32
	wnds      []uint32 // every wndStride-th sampled window
	wndStride int
	wndTick   int
	intervals []event.Interval
	base      tcpSample     // at the start of the current interval
	baseAt    time.Duration // start of the current interval
	haveBase  bool
}

const (
	// maxIntervals bounds a fetch's interval list; a longer fetch merges
	// neighbours and doubles its period, as a chart would.
	maxIntervals = 3600
	// maxWndSamples bounds the window samples kept for the median.
	maxWndSamples = 1024
	// defaultInterval is the interval period when http.interval is unset.
	defaultInterval = time.Second
)

// sampleEvery is how often a download is sampled; smaller for short stall
// timeouts so the deadline is refreshed well before it passes, and for
// short interval periods (tests) so each interval sees samples.
func sampleEvery(stall, period time.Duration) time.Duration {
	d := 100 * time.Millisecond
	if stall > 0 && stall/4 < d {
		d = max(stall/4, time.Millisecond)
	}
	if period > 0 && period/4 < d {
		d = max(period/4, time.Millisecond)
	}
	return d
}

func (s *Server) watch(r *http.Request, w *countingWriter) *monitor {
	m := &monitor{w: w, stall: s.opt.HTTP.StallTimeout, period: s.opt.HTTP.Interval,
		start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), wndStride: 1}
	if m.period <= 0 {
		m.period = defaultInterval
	}
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		m.conn = c
		m.probe = newTCPProbe(c)
	}
	if m.conn != nil && m.stall > 0 {
		_ = m.conn.SetWriteDeadline(time.Now().Add(m.stall))
	}
	// The base sample: tcpi_bytes_acked and total_retrans count the whole
	// connection, which may have carried earlier keep-alive requests.
	if sm, ok := m.probe.sample(); ok {
		m.base, m.haveBase = sm, true
	}
	go m.run(sampleEvery(m.stall, m.period))
	return m
}

func (m *monitor) run(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	lastAcked := m.base.acked
	startAcked, haveStart := m.base.acked, m.haveBase
	var lastN int64
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		progress := false
		if n := m.w.n.Load(); n != lastN {
			lastN, progress = n, true
		}
		if sm, ok := m.probe.sample(); ok {
			m.observe(sm, time.Since(m.start))
			if sm.acked != lastAcked {
				lastAcked, progress = sm.acked, true
			}
			if !haveStart {
				startAcked, haveStart = sm.acked, true
			}
			// One sendfile call writes a whole image: the kernel's count
			// of acknowledged bytes is what moves while it runs.
			m.w.live.Set(max(lastN, int64(sm.acked-startAcked)))
		} else {
			m.w.live.Set(lastN)
		}
		if progress && m.conn != nil && m.stall > 0 {
			_ = m.conn.SetWriteDeadline(time.Now().Add(m.stall))
		}
	}
}

// observe takes one TCP_INFO sample taken at offset at from the start.
func (m *monitor) observe(sm tcpSample, at time.Duration) {
	m.maxWnd = max(m.maxWnd, sm.sndWnd)
	m.addWnd(sm.sndWnd)
	if !m.haveBase {
		m.base, m.haveBase = sm, true
		return
	}
	if at-m.baseAt >= m.period {
		m.closeInterval(sm, at, sm.acked-m.base.acked)
	}
}

// addWnd keeps every wndStride-th window; when the slice is full, it keeps
// every other sample and doubles the stride, so the kept samples stay
// evenly spread over the whole fetch.
func (m *monitor) addWnd(w uint32) {
	m.wndTick++
	if m.wndTick%m.wndStride != 0 {
		return
	}
	if len(m.wnds) == maxWndSamples {
		for i := 0; i < maxWndSamples/2; i++ {
			m.wnds[i] = m.wnds[2*i+1]
		}
		m.wnds = m.wnds[:maxWndSamples/2]
		m.wndStride *= 2
		m.wndTick = 0
		return
	}
	if m.wnds == nil {
		m.wnds = make([]uint32, 0, 64)
	}
	m.wnds = append(m.wnds, w)
}

// closeInterval ends the current interval at offset at with the given
// payload bytes, and starts the next one from sm.
func (m *monitor) closeInterval(sm tcpSample, at time.Duration, bytes uint64) {
	iv := event.Interval{
		Start: m.baseAt, End: at, Bytes: int64(bytes),
		Retransmits: sm.retrans - m.base.retrans,
		Cwnd:        sm.cwnd, SndWnd: sm.sndWnd, RTT: sm.rtt,
	}
	if len(m.intervals) == maxIntervals {
		// Merge neighbours: half as many intervals, twice as long.
		for i := 0; i < maxIntervals/2; i++ {
			a, b := m.intervals[2*i], m.intervals[2*i+1]
			b.Start, b.Bytes, b.Retransmits = a.Start, a.Bytes+b.Bytes, a.Retransmits+b.Retransmits
			m.intervals[i] = b
		}
		m.intervals = m.intervals[:maxIntervals/2]
		m.period *= 2
	}
	m.intervals = append(m.intervals, iv)
	m.base, m.baseAt = sm, at
}

// finish stops sampling, reads TCP_INFO a last time, closes the last
// (usually shorter) interval and clears the write deadline (the connection
// may carry the next keep-alive request). The intervals' bytes add up to the
// bytes written plus pending (bytes still to be written): the last interval
// gets what the earlier ones' acked bytes leave over, since the tail is
// still in flight when the handler returns.
func (m *monitor) finish(pending int64) (*event.TCPInfo, []event.Interval) {
	close(m.stop)
	<-m.done
	m.disarm()
	at := time.Since(m.start)
	if sm, ok := m.probe.sample(); ok {
		m.maxWnd = max(m.maxWnd, sm.sndWnd)
		m.addWnd(sm.sndWnd)
		if m.haveBase {
			var sum int64
			for _, iv := range m.intervals {
				sum += iv.Bytes
			}
			m.closeInterval(sm, at, uint64(max(m.w.n.Load()+pending-sum, 0)))
		}
	}
	info := m.probe.final(m.maxWnd)
	if info != nil {
		info.MedSndWnd = median(m.wnds)
	}
	return info, m.intervals
}

// arm sets the write deadline StallTimeout ahead (after finish, for the
// bytes still to be written).
func (m *monitor) arm() {
	if m.conn != nil && m.stall > 0 {
		_ = m.conn.SetWriteDeadline(time.Now().Add(m.stall))
	}
}

// disarm clears the write deadline.
func (m *monitor) disarm() {
	if m.conn != nil && m.stall > 0 {
		_ = m.conn.SetWriteDeadline(time.Time{})
	}
}

// median of the samples (the upper one for an even count); 0 when none.
// It sorts in place.
func median(v []uint32) uint32 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
