package record

import (
	"maps"

	"github.com/pxeperf/pxeperf/event"
)

// ProtoEvent is the Proto of a record of kind KindEvent.
const ProtoEvent = "event"

// FromMilestone converts a milestone into its record of kind KindEvent,
// the one conversion from milestone to record: File is what happened
// (event.Milestone*), Labels the milestone's detail, Outcome ok. It moves
// nothing, so it has no bytes, size or rate.
func FromMilestone(m event.Milestone, source string) Record {
	r := Record{
		Time: m.Time.UTC(), Source: source, Proto: ProtoEvent, Host: m.Host, File: m.What,
		Kind: KindEvent, Outcome: event.OutcomeOK, Size: -1,
	}
	if m.MAC != nil {
		r.ClientMAC = m.MAC.String()
	}
	if len(m.Detail) > 0 {
		r.Labels = maps.Clone(m.Detail)
	}
	return r
}

var _ event.MilestoneSink = (*Sink)(nil)

// Milestone records one milestone as a record of kind KindEvent,
// journaled and stored as a fetch's record is (the same commit point,
// the same bounds), so none acknowledged is lost.
func (s *Sink) Milestone(m event.Milestone) {
	r := FromMilestone(m, s.opt.Source)
	r.Server, r.Site = s.opt.Server, s.opt.Site
	s.put(&entry{UID: newUID(), Record: &r})
}
