package bench

import (
	"fmt"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/stream"
)

// clientFetch is what the bench's client saw of one fetch: the record's
// bytes, timing and outcome are the client's (the board's side).
type clientFetch struct {
	proto      string
	file       string
	start      time.Time
	bytes      int64
	size       int64 // expected; -1 unknown
	dur        time.Duration
	err        error
	serverless bool // no server event is expected (remote mode: it is the remote's record)
}

// fetchRecord is the record of one bench fetch: the server's event (nil
// when none came) through record.FromFetch, the one event -> record
// conversion (windows, RTT, retransmits, the TFTP sender's effective
// window, loss events and RTT, intervals), with the client's view of the
// transfer on top. The testbed (stampTestbed) and the bench's own fields
// (Rcvbuf, CPU, the client's counts) are the caller's.
func fetchRecord(f *event.Fetch, c clientFetch) (record.Record, []record.Interval) {
	var rec record.Record
	var ivs []record.Interval
	if f != nil {
		rec, ivs = record.FromFetch(f, record.Conditions{Source: Source})
	}
	server, serverErr := rec.Outcome, rec.Err
	if c.start.IsZero() {
		c.start = time.Now()
	}
	rec.Time, rec.Source, rec.Proto, rec.Direction = c.start.UTC(), Source, c.proto, "rx"
	rec.File, rec.Bytes, rec.Size, rec.Duration = c.file, c.bytes, c.size, c.dur
	rec.Outcome, rec.Err, rec.Mbps = event.OutcomeOK, "", 0
	if c.dur > 0 {
		rec.Mbps = float64(c.bytes) * 8 / c.dur.Seconds() / 1e6
	}
	switch {
	case c.err != nil:
		rec.Outcome, rec.Err = event.OutcomeError, c.err.Error()
	case c.size >= 0 && c.bytes != c.size:
		rec.Outcome, rec.Err = event.OutcomeAborted, fmt.Sprintf("received %d of %d bytes", c.bytes, c.size)
	}
	switch {
	case f == nil && !c.serverless && rec.Outcome == event.OutcomeOK:
		rec.Outcome, rec.Err = event.OutcomeError, "the server reported no fetch"
	case f != nil && server != event.OutcomeOK && rec.Outcome == event.OutcomeOK:
		rec.Outcome, rec.Err = server, "server: "+serverErr
	}
	rec.Kind = record.Classify(&rec)
	return rec, ivs
}

// streamRecord is the record of one stream run (without the testbed's
// fields): the receiver's measure as an event through record.FromFetch
// (bytes, time, the sender's retransmits and RTT, UDP loss and jitter,
// intervals), the rest of what the client knows on top: its rate, the
// sender's. A run that failed (err) is a record with outcome error.
func streamRecord(p Point, res stream.Result, err error, begin time.Time) (*record.Record, []record.Interval) {
	recv := res.Receiver
	f := &event.Fetch{Start: begin, Proto: p.Proto, Direction: p.Direction, Source: Source,
		// A stream has no file; this name lets `report --file 'stream/*'` select runs.
		File:  "stream/" + p.Proto + "-" + p.Direction,
		Bytes: recv.Bytes, Duration: recv.End - recv.Start, Outcome: event.OutcomeOK}
	if err != nil {
		f.Outcome, f.Err = event.OutcomeError, err.Error()
	}
	if p.Proto == ProtoUDP {
		f.UDP = &event.UDPInfo{JitterMs: recv.JitterMs, Lost: recv.Lost, Packets: recv.Packets + recv.Lost}
	} else {
		f.TCP = &event.TCPInfo{RTT: res.Sender.RTT}
	}
	for _, s := range res.Intervals {
		f.Intervals = append(f.Intervals, event.Interval{Start: s.Start, End: s.End, Bytes: s.Bytes,
			Retransmits: uint32(max(s.Retransmits, 0)), Cwnd: uint32(max(s.SndCwnd, 0)), RTT: s.RTT})
	}
	rec, ivs := record.FromFetch(f, record.Conditions{Source: Source})
	// The client's own figures: its rate over its clock, the loss it
	// computed, the sender's retransmits (-1: unknown) and datagrams.
	rec.Mbps, rec.SenderMbps, rec.WndRequested = recv.BitsPerSecond/1e6, res.Sender.BitsPerSecond/1e6, uint32(p.Window)
	rec.Retransmits = res.Sender.Retransmits
	rec.Labels = map[string]string{"rate": FormatRate(p.Rate)}
	if p.Proto == ProtoUDP {
		rec.Labels[LabelUDPRate] = FormatUDPRate(p.UDPRate)
		rec.UDPLostPct = recv.LostPercent
		rec.Datagrams, rec.Retransmits = res.Sender.Packets, 0
	} else {
		rec.Labels["window"] = FormatWindow(p.Window)
	}
	return &rec, ivs
}
