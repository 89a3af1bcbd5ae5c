package perfsrv

import (
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// iperf2Group gathers the parallel streams of one iperf 2 -P test: iperf 2 has
// no test id, so streams from one address whose headers agree (the same
// -P count, port, length, time and flags) within the setup window are one
// test, recorded as one record per direction summed over its streams, as
// iperf3 tests are.
type iperf2Group struct {
	key    string
	want   int
	opened time.Time
	closed bool // no more streams join (all came, or the window passed)
	joined int
	legs   map[string][]iperf2Leg // by direction
	done   map[string]bool
	emit   func(dir string, l iperf2Leg, streams int)
}

// groupKey is what the streams of one -P test share.
func groupKey(ip netip.Addr, head []byte) string {
	n := min(len(head), iperf2HeaderV1Len)
	return ip.String() + "/" + string(head[:n])
}

// joinGroup returns the -P group a new stream belongs to (nil: a single
// stream), opening one when none is open for its key. emit records a
// direction once all its streams ended.
func (s *Iperf2) joinGroup(ip netip.Addr, h iperf2Header, head []byte, emit func(dir string, l iperf2Leg, streams int)) *iperf2Group {
	if h.threads <= 1 || h.threads > 1024 || len(head) < iperf2HeaderV1Len {
		return nil
	}
	key := groupKey(ip, head)
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if s.groups == nil {
		s.groups = map[string]*iperf2Group{}
	}
	g := s.groups[key]
	if g == nil || g.closed {
		g = &iperf2Group{key: key, want: h.threads, opened: time.Now(), legs: map[string][]iperf2Leg{}, done: map[string]bool{}, emit: emit}
		s.groups[key] = g
		time.AfterFunc(s.cfg.SetupTimeout, func() { s.closeGroup(g) })
	}
	g.joined++
	if g.joined >= g.want {
		s.closeGroupLocked(g)
	}
	return g
}

func (s *Iperf2) closeGroup(g *iperf2Group) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	s.closeGroupLocked(g)
}

// closeGroups closes every open group (Serve ended).
func (s *Iperf2) closeGroups() {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	for _, g := range s.groups {
		s.closeGroupLocked(g)
	}
}

// closeGroupLocked stops joins and records what is complete. Holds s.gmu.
func (s *Iperf2) closeGroupLocked(g *iperf2Group) {
	if !g.closed {
		g.closed = true
		if s.groups[g.key] == g {
			delete(s.groups, g.key)
		}
	}
	for dir := range g.legs {
		s.flushLocked(g, dir)
	}
}

// add puts a stream's ended leg in its group.
func (s *Iperf2) addLeg(g *iperf2Group, l iperf2Leg) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	g.legs[l.dir] = append(g.legs[l.dir], l)
	s.flushLocked(g, l.dir)
}

// flushLocked records a direction when every stream that joined has ended
// it and no more can join. Holds s.gmu.
func (s *Iperf2) flushLocked(g *iperf2Group, dir string) {
	if !g.closed || g.done[dir] || len(g.legs[dir]) < g.joined {
		return
	}
	g.done[dir] = true
	legs := g.legs[dir]
	g.emit(dir, sumLegs(legs), len(legs))
}

// sumLegs adds parallel legs: bytes, and the k-th sample of each (its
// streams tick one period apart from their own starts, a few ms apart),
// over the span from the first start to the last end. The first leg that
// did not end well gives the outcome.
func sumLegs(legs []iperf2Leg) iperf2Leg {
	sort.Slice(legs, func(i, j int) bool { return legs[i].start.Before(legs[j].start) })
	out := legs[0]
	out.bytes, out.samples = 0, nil
	most := 0
	for _, l := range legs {
		out.bytes += l.bytes
		if l.end.After(out.end) {
			out.end = l.end
		}
		if out.outcome == event.OutcomeOK && l.outcome != event.OutcomeOK {
			out.outcome, out.why = l.outcome, l.why
		}
		most = max(most, len(l.samples))
	}
	for k := range most {
		var sm sample
		for _, l := range legs {
			i := min(k, len(l.samples)-1)
			if i < 0 {
				continue
			}
			x := l.samples[i]
			sm.at = max(sm.at, l.start.Sub(out.start)+x.at)
			sm.bytes += x.bytes
			sm.retransmits += x.retransmits
			sm.cwnd += x.cwnd
		}
		out.samples = append(out.samples, sm)
	}
	if n := len(out.samples); n > 0 {
		out.samples[n-1].at = out.end.Sub(out.start)
	}
	return out
}

// streamsLabel is the record's stream count.
func streamsLabel(n int) string { return strconv.Itoa(n) }
