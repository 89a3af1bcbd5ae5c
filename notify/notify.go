// Package notify fans a board's milestones (event.Milestone: host and next
// boot changes, DHCP ACK, loader and kernel fetched, next boot consumed)
// out to whoever automation reads them from: the record sink (records of
// kind event), the admin event stream (dashboard) and a webhook. Each
// consumer is an event.MilestoneSink that never blocks a boot; Fanout
// calls them in turn and derives dhcp-ack from the DHCP server's lease
// events, so the protocol code knows nothing of milestones.
package notify

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// Message is a milestone as the event stream and the webhook carry it:
// {"time","mac","host","what","detail"}.
type Message struct {
	Time   time.Time         `json:"time"`
	MAC    string            `json:"mac"`
	Host   string            `json:"host"`
	What   string            `json:"what"`
	Detail map[string]string `json:"detail"`
}

// MessageOf is m as Message (time in UTC, detail never null).
func MessageOf(m event.Milestone) Message {
	msg := Message{Time: m.Time.UTC(), Host: m.Host, What: m.What, Detail: m.Detail}
	if m.MAC != nil {
		msg.MAC = m.MAC.String()
	}
	if msg.Detail == nil {
		msg.Detail = map[string]string{}
	}
	return msg
}

// Encode is m's Message as JSON, without a trailing newline.
func Encode(m event.Milestone) []byte {
	msg := MessageOf(m)
	b, err := json.Marshal(msg)
	if err != nil {
		// A Message is strings and a time: only a year past 9999 fails.
		msg.Time = time.Time{}
		b, _ = json.Marshal(msg)
	}
	return b
}

// Fanout hands each milestone to every sink in turn, and is an event.Sink
// that turns each lease event (a DHCP ACK in full mode, a boot reply in
// proxy mode) into the milestone dhcp-ack. Its sinks share the Detail
// map and must not change it.
type Fanout struct {
	sinks []event.MilestoneSink
	now   func() time.Time
}

var (
	_ event.MilestoneSink = (*Fanout)(nil)
	_ event.Sink          = (*Fanout)(nil)
)

// NewFanout fans out to sinks; nil ones are left out.
func NewFanout(sinks ...event.MilestoneSink) *Fanout {
	f := &Fanout{now: time.Now}
	for _, s := range sinks {
		if s != nil {
			f.sinks = append(f.sinks, s)
		}
	}
	return f
}

// Milestone gives m to every sink; a zero Time is now.
func (f *Fanout) Milestone(m event.Milestone) {
	if m.Time.IsZero() {
		m.Time = f.now()
	}
	for _, s := range f.sinks {
		s.Milestone(m)
	}
}

// Fetch does nothing: the fetch-derived milestones come from the host
// store's sink, which knows what each board was told to boot.
func (f *Fanout) Fetch(*event.Fetch) {}

// Lease emits dhcp-ack, its detail the address (none in proxy mode), the
// boot file, the architecture (option 93) and whether it was a proxy
// answer.
func (f *Fanout) Lease(l *event.Lease) {
	d := map[string]string{"boot_file": l.BootFile, "proxy": strconv.FormatBool(l.Proxy)}
	if l.Addr.IsValid() {
		d["addr"] = l.Addr.String()
	}
	if l.Arch != 0xffff {
		d["arch"] = strconv.Itoa(int(l.Arch))
	}
	f.Milestone(event.Milestone{Time: l.Time, MAC: l.MAC, Host: l.Host, What: event.MilestoneDHCPAck, Detail: d})
}
