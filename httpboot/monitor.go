package httpboot

import (
	"net"
	"net/http"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// monitor watches one response: it samples TCP_INFO (keeping the largest
// window the client advertised) and, while bytes move, pushes the
// connection's write deadline StallTimeout ahead. Progress is read from the
// kernel (tcpi_bytes_acked) as well as from counted writes, so the stall
// timeout also works inside one long sendfile call, which Go's poller
// splits into chunks that each honour the deadline.
type monitor struct {
	conn   net.Conn // nil when the connection is unknown
	probe  *tcpProbe
	w      *countingWriter
	stall  time.Duration
	stop   chan struct{}
	done   chan struct{}
	maxWnd uint32 // written by run until done is closed
}

// sampleEvery is how often a download is sampled; smaller for short stall
// timeouts so the deadline is refreshed well before it passes.
func sampleEvery(stall time.Duration) time.Duration {
	d := 100 * time.Millisecond
	if stall > 0 && stall/4 < d {
		d = max(stall/4, time.Millisecond)
	}
	return d
}

func (s *Server) watch(r *http.Request, w *countingWriter) *monitor {
	m := &monitor{w: w, stall: s.opt.HTTP.StallTimeout, stop: make(chan struct{}), done: make(chan struct{})}
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		m.conn = c
		m.probe = newTCPProbe(c)
	}
	if m.conn != nil && m.stall > 0 {
		_ = m.conn.SetWriteDeadline(time.Now().Add(m.stall))
	}
	go m.run(sampleEvery(m.stall))
	return m
}

func (m *monitor) run(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	var lastAcked uint64
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
			m.maxWnd = max(m.maxWnd, sm.sndWnd)
			if sm.acked != lastAcked {
				lastAcked, progress = sm.acked, true
			}
		}
		if progress && m.conn != nil && m.stall > 0 {
			_ = m.conn.SetWriteDeadline(time.Now().Add(m.stall))
		}
	}
}

// finish stops sampling, reads TCP_INFO a last time and clears the write
// deadline (the connection may carry the next keep-alive request).
func (m *monitor) finish() *event.TCPInfo {
	close(m.stop)
	<-m.done
	if m.conn != nil && m.stall > 0 {
		_ = m.conn.SetWriteDeadline(time.Time{})
	}
	return m.probe.final(m.maxWnd)
}
