package httpboot

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/measure"
)

// monitor watches one response: it samples TCP_INFO (measure.Probe;
// keeping the largest window the client advertised, a thinned set of
// window samples for the median, and one interval per period, cut by
// measure.Cut) and, while bytes move, keeps
// the connection's write deadline StallTimeout past the last progress.
// Progress is read from the kernel (tcpi_bytes_acked) as well as from
// counted writes, so the stall timeout also works inside one long sendfile
// call, which Go's poller splits into waits that each honour the deadline.
//
// The server's sampler ticks every monitor from one goroutine (see
// sampler). A sample costs one getsockopt into the probe's own buffer and
// no allocation; intervals and window samples live in slices bounded by
// maxIntervals and maxWndSamples.
type monitor struct {
	conn   net.Conn // nil when the connection is unknown
	probe  *measure.Probe
	w      *countingWriter
	stall  time.Duration
	period time.Duration
	start  time.Time
	smp    *sampler
	idx    int // in smp.mons while sampled; guarded by smp.mu

	// Written by the sampler until it lets the monitor go (finish).
	maxWnd    uint32
	wnds      []uint32 // every wndStride-th sampled window
	wndStride int
	wndTick   int
	intervals []measure.Interval
	base      measure.TCPInfo // at the start of the current interval
	baseAt    time.Duration   // start of the current interval
	haveBase  bool
	lastAcked uint64
	lastN     int64
	// startAcked is the connection's acked count when this fetch began,
	// so the live byte count of Options.Active is this fetch's alone.
	startAcked uint64
	haveStart  bool
	moved      time.Time // when progress was last seen
	// settled says settle ran: the record waits for the client's
	// acknowledgement, so bytes it did not acknowledge are not counted.
	settled  bool
	deadline time.Time // the write deadline set on conn

	// The rate floor (http.min_rate_kib over min_rate_window): at each
	// floorAt the bytes moved since floorBytes must be at least
	// minRate x window, else the response is ended (slow).
	minRate    float64 // bytes/s; 0: no floor
	window     time.Duration
	floorAt    time.Time
	floorBytes int64
	slow       atomic.Bool
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

// sampler ticks every active monitor of a Server from one goroutine, which
// runs only while there are monitors. One goroutine and one timer for all
// fetches instead of one each: per-fetch tickers wake the process once per
// fetch and tick, each a scheduler round trip, where one sweep of every
// fetch's getsockopt costs a few microseconds (see
// httpboot/DESIGN.md#measuring).
type sampler struct {
	every time.Duration

	mu      sync.Mutex
	mons    []*monitor
	running bool
}

func newSampler(every time.Duration) *sampler { return &sampler{every: every} }

// add starts sampling m (every sampler.every, from the next tick on).
func (s *sampler) add(m *monitor) {
	s.mu.Lock()
	m.idx = len(s.mons)
	s.mons = append(s.mons, m)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go s.run()
	}
}

// remove stops sampling m. When it returns, the sampler does not touch m
// again, so its fields are the caller's.
func (s *sampler) remove(m *monitor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.idx < 0 || m.idx >= len(s.mons) || s.mons[m.idx] != m {
		return
	}
	last := len(s.mons) - 1
	s.mons[m.idx] = s.mons[last]
	s.mons[m.idx].idx = m.idx
	s.mons[last] = nil
	s.mons = s.mons[:last]
	m.idx = -1
}

func (s *sampler) run() {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for range t.C {
		s.mu.Lock()
		if len(s.mons) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		// Read under the lock: a monitor added since the tick fired
		// started before now.
		now := time.Now()
		for _, m := range s.mons {
			m.tick(now)
		}
		s.mu.Unlock()
	}
}

func (s *Server) watch(r *http.Request, w *countingWriter) *monitor {
	m := &monitor{w: w, stall: s.opt.HTTP.StallTimeout, period: s.opt.HTTP.Interval,
		start: time.Now(), smp: s.sampler, wndStride: 1}
	if m.period <= 0 {
		m.period = defaultInterval
	}
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		m.conn = c
		m.probe = measure.NewProbe(c)
	}
	m.moved = m.start
	if h := s.opt.HTTP; h.MinRateKiB > 0 && h.MinRateWindow > 0 {
		m.minRate, m.window = float64(h.MinRateKiB)*1024, h.MinRateWindow
		m.floorAt = m.start.Add(m.window)
	}
	if m.conn != nil && m.stall > 0 {
		m.deadline = m.start.Add(m.stall)
		_ = m.conn.SetWriteDeadline(m.deadline)
	}
	// The base sample: tcpi_bytes_acked and total_retrans count the whole
	// connection, which may have carried earlier keep-alive requests.
	if sm, ok := m.probe.Read(); ok {
		m.base, m.haveBase = sm, true
	}
	m.lastAcked = m.base.BytesAcked
	m.startAcked, m.haveStart = m.base.BytesAcked, m.haveBase
	m.smp.add(m)
	return m
}

// tick takes one sample at now and keeps the write deadline StallTimeout
// past the last progress. The deadline is moved only once it is less than
// half a StallTimeout away (SetWriteDeadline resets a runtime timer; with
// the default 60 s that is once in 30 s instead of every sample), to the
// same time the old every-sample update would have set: progress seen at
// a tick plus StallTimeout.
func (m *monitor) tick(now time.Time) {
	if m.slow.Load() {
		return // ended: its deadline has passed
	}
	progress := false
	if n := m.w.n.Load(); n != m.lastN {
		m.lastN, progress = n, true
	}
	// moved is what the client took in: acknowledged bytes where the
	// kernel tells, else writes. The live count is it alone: the last
	// write returns once the body's tail is in the send buffer, and
	// counting writes would show the whole body there and nothing moving
	// to the end (see httpboot/DESIGN.md#live-bytes).
	moved := m.lastN
	if sm, ok := m.probe.Read(); ok {
		m.observe(sm, now.Sub(m.start))
		if sm.BytesAcked != m.lastAcked {
			m.lastAcked, progress = sm.BytesAcked, true
		}
		if !m.haveStart {
			m.startAcked, m.haveStart = sm.BytesAcked, true
		}
		// One sendfile call writes a whole image: the kernel's count of
		// acknowledged bytes is what moves while it runs.
		moved = int64(sm.BytesAcked - m.startAcked)
	}
	m.w.live.Set(moved)
	if m.conn == nil {
		return
	}
	if m.minRate > 0 && !now.Before(m.floorAt) {
		if float64(moved-m.floorBytes) < m.minRate*m.window.Seconds() {
			// Ended: the copy fails at its deadline, and the close
			// that follows resets the connection rather than leave
			// the queue for the trickle to take in.
			m.slow.Store(true)
			if l, ok := m.conn.(interface{ SetLinger(int) error }); ok {
				_ = l.SetLinger(0)
			}
			_ = m.conn.SetWriteDeadline(now)
			return
		}
		m.floorAt, m.floorBytes = now.Add(m.window), moved
	}
	if m.stall <= 0 {
		return
	}
	if progress {
		m.moved = now
	}
	if m.deadline.Sub(now) < m.stall/2 && m.moved.Add(m.stall).After(m.deadline) {
		m.deadline = m.moved.Add(m.stall)
		_ = m.conn.SetWriteDeadline(m.deadline)
	}
}

// observe takes one TCP_INFO sample taken at offset at from the start.
func (m *monitor) observe(sm measure.TCPInfo, at time.Duration) {
	m.maxWnd = max(m.maxWnd, sm.SndWnd)
	m.addWnd(sm.SndWnd)
	if !m.haveBase {
		m.base, m.haveBase = sm, true
		return
	}
	if at-m.baseAt >= m.period {
		m.closeInterval(sm, at, sm.BytesAcked-m.base.BytesAcked)
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
func (m *monitor) closeInterval(sm measure.TCPInfo, at time.Duration, bytes uint64) {
	iv := measure.Cut(m.base.Sample(m.baseAt), sm.Sample(at))
	iv.Bytes = int64(bytes)
	if len(m.intervals) == maxIntervals {
		// Half as many intervals, twice as long.
		m.intervals = measure.Halve(m.intervals)
		m.period *= 2
	}
	m.intervals = append(m.intervals, iv)
	m.base, m.baseAt = sm, at
}

// finish stops sampling, reads TCP_INFO a last time, closes the last
// (usually shorter) interval and clears the write deadline (the connection
// may carry the next keep-alive request). It returns the fetch's bytes:
// the body bytes written plus pending (bytes still to be written), or,
// when the body's writes failed (the client went away, or stalled) or
// settle gave up before the client acknowledged the queue, the body bytes
// the client acknowledged: written less what the socket still holds
// unacknowledged (SIOCOUTQ: write_seq - snd_una, readable after a reset
// too), since the written count of an aborted download holds a send
// buffer's worth the client never got (see
// httpboot/DESIGN.md#aborted-fetch-bytes). A fetch that wrote its whole
// body and was not settled (under bigBody) keeps the written count: its
// tail is in flight, not lost. The intervals' bytes add up to the
// returned bytes: the last interval gets what the earlier ones' acked
// bytes leave over, and the header's bytes, which acked counts too, come
// off the first ones.
func (m *monitor) finish(pending int64) (*event.TCPInfo, []event.Interval, int64) {
	m.smp.remove(m)
	m.disarm()
	at := time.Since(m.start)
	bytes := m.w.n.Load() + pending
	if m.w.err != nil || m.settled {
		if q := m.probe.Outq(); q > 0 {
			bytes = max(m.w.n.Load()-int64(q), 0)
		}
	}
	sm, ok := m.probe.Read()
	if !ok {
		return nil, eventIntervals(m.intervals), bytes
	}
	m.maxWnd = max(m.maxWnd, sm.SndWnd)
	m.addWnd(sm.SndWnd)
	if m.haveBase {
		m.closeInterval(sm, at, uint64(fitIntervals(m.intervals, bytes)))
	}
	return &event.TCPInfo{
		RTT: sm.RTT, MinRTT: sm.MinRTT, RTTVar: sm.RTTVar, Retransmits: sm.Retransmits,
		MaxSndWnd: m.maxWnd, MedSndWnd: measure.Median(m.wnds), SndWnd: sm.SndWnd,
		SndCwnd: sm.SndCwnd, MSS: sm.MSS, PMTU: sm.PMTU, DeliveryRate: sm.DeliveryRate,
		RWndLimited: sm.RWndLimited, SndBufLimited: sm.SndBufLimited,
	}, eventIntervals(m.intervals), bytes
}

// eventIntervals are a fetch's intervals as its event keeps them.
func eventIntervals(ivs []measure.Interval) []event.Interval {
	if ivs == nil {
		return nil
	}
	out := make([]event.Interval, len(ivs))
	for i, iv := range ivs {
		out[i] = event.Interval{Start: iv.Start, End: iv.End, Bytes: iv.Bytes, Retransmits: uint32(iv.Retransmits),
			Cwnd: uint32(iv.Cwnd), SndWnd: uint32(iv.SndWnd), RTT: iv.RTT}
	}
	return out
}

// bigBody is the body size from which a connection gets its send buffer
// (http.send_buffer_kib, Linux) and its record waits for the client's
// acknowledgement (settle): a smaller body's queue drains within a round
// trip or two, which is not worth a wait on every script and config.
const bigBody = 1 << 20

// settleStep bounds one of settle's sleeps to this fraction of the fetch
// so far. A sleep longer than the queue takes (it drained faster than the
// estimate: at 32 streams a stream's rate jumps as the others end) is
// time the client waits for the last byte and the record counts (see
// httpboot/DESIGN.md#settling).
const settleStep = 128

// settle waits until the client has acknowledged every byte handed to the
// kernel (SIOCOUTQ reaches 0), so that a record's duration, bytes and last
// interval end where the client's download did, not where the server's
// last copy into a send buffer of up to http.send_buffer_kib did (a full
// buffer can be a second of a stream's data, see
// httpboot/DESIGN.md#settling). sent is the body bytes written; smaller
// bodies do not wait. The wait sleeps for the time the queue should take
// at the rate it drains (the fetch's average at first), at least 1 ms and
// at most settleStep of the fetch so far a step, and gives up when the
// queue has not moved for StallTimeout (60 s when unset): the last byte's
// write then meets the stall deadline. A connection that can (acker; Linux, with the send
// buffer it sized itself and a stall timeout set) first waits in Go's
// poller until at most a segment is left, so the sleeps only cover that.
func (m *monitor) settle(sent int64) {
	q := m.probe.Outq()
	if q <= 0 || sent < bigBody {
		return
	}
	m.settled = true
	stall := m.stall
	if stall <= 0 {
		stall = time.Minute
	} else if a, ok := m.conn.(acker); ok {
		// The stall deadline bounds this wait; at most a segment is left.
		waited, err := a.awaitAcked(m.probe.Outq)
		if err != nil {
			return
		}
		if waited {
			if q = m.probe.Outq(); q <= 0 {
				return
			}
		}
	}
	now := time.Now()
	elapsed := now.Sub(m.start)
	rate := float64(sent) / max(elapsed.Seconds(), 1e-3) // bytes/s
	step := min(max(elapsed/settleStep, time.Millisecond), 100*time.Millisecond)
	moved := now
	for q > 0 {
		d := time.Duration(float64(q) / rate * float64(time.Second))
		time.Sleep(min(max(d, time.Millisecond), step))
		was, at := q, now
		if q, now = m.probe.Outq(), time.Now(); q < 0 {
			return
		}
		if q < was {
			rate, moved = float64(was-q)/max(now.Sub(at).Seconds(), 1e-6), now
		} else if now.Sub(moved) >= stall {
			return
		}
	}
}

// acker is a connection that can wait for the client's acknowledgement of
// its queue without a timer (sendfileConn.awaitAcked, Linux), until at most
// a segment is left unacknowledged; waited is false when it cannot wait
// so, err set when the write deadline passed (or the connection closed).
type acker interface {
	awaitAcked(outq func() int) (waited bool, err error)
}

// fitIntervals makes the closed intervals hold at most total bytes (the
// body's) and returns what is left for the last one. tcpi_bytes_acked
// counts the response header too, which went out first: once the body is
// acknowledged (settle), the intervals hold the header on top of the body,
// so it comes off the earliest ones.
func fitIntervals(ivs []measure.Interval, total int64) (rest int64) {
	var sum int64
	for _, iv := range ivs {
		sum += iv.Bytes
	}
	for i := 0; i < len(ivs) && sum > total; i++ {
		d := min(sum-total, ivs[i].Bytes)
		ivs[i].Bytes -= d
		sum -= d
	}
	return max(total-sum, 0)
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

// peerClosed says whether c's client has closed its side (TCP_INFO's
// state is CLOSE_WAIT; connLimiter counts such an idle connection as
// gone), or the server already has closed c: net/http closes a connection
// before its ConnState hook releases it, and a new connection must not
// be lost in that gap (see httpboot/DESIGN.md#closed-connections). Any
// other error, and off Linux (no TCP_INFO): false, so a client's closed
// connection counts until the server has closed it too.
func peerClosed(c net.Conn) bool {
	i, err := measure.ReadTCPInfo(c)
	if err != nil {
		return errors.Is(err, net.ErrClosed)
	}
	return i.State == measure.TCPCloseWait
}
