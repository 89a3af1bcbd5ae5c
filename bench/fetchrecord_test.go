package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
)

// TestFetchRecord: a bench fetch's record is the server's event through
// record.FromFetch (the TFTP sender's window, loss events and RTT) with the
// client's view on top: its bytes, clock and outcome, the server's failure
// when the client saw none, and no event at all an error unless none is
// expected (remote mode).
func TestFetchRecord(t *testing.T) {
	const img = "bench.img"
	start := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	ev := &event.Fetch{Start: start.Add(-time.Millisecond), Proto: event.ProtoTFTP, File: img, Bytes: 4 << 20, Size: 4 << 20,
		Duration: 2 * time.Second, Outcome: event.OutcomeOK,
		TFTP: &event.TFTPInfo{BlockSize: 1468, WindowSize: 16, Datagrams: 2860, Retransmits: 2, Timeouts: 1,
			WindowMin: 4, WindowMedian: 16, WindowMax: 16, LossEvents: 2, RTT: 178 * time.Microsecond}}
	c := clientFetch{proto: ProtoTFTP, file: img, start: start, bytes: 4 << 20, size: 4 << 20, dur: time.Second}
	r, _ := fetchRecord(ev, c)
	if r.EffWndMin != 4 || r.EffWndMedian != 16 || r.EffWndMax != 16 || r.LossEvents != 2 || r.RTT != 178*time.Microsecond ||
		r.Datagrams != 2860 || r.Retransmits != 2 || r.Timeouts != 1 || r.Acked != 2858 {
		t.Errorf("server side: %+v", r)
	}
	if r.Time != start || r.Duration != time.Second || r.Mbps != float64(4<<20)*8/1e6 || r.Source != Source ||
		r.Outcome != event.OutcomeOK || r.Kind != record.KindImage {
		t.Errorf("client side: %+v", r)
	}
	for name, tt := range map[string]struct {
		ev      *event.Fetch
		c       clientFetch
		outcome string
	}{
		"client error":         {ev, clientFetch{file: img, size: 10, bytes: 3, err: errors.New("reset")}, event.OutcomeError},
		"short":                {ev, clientFetch{file: img, size: 10, bytes: 3}, event.OutcomeAborted},
		"server failed":        {&event.Fetch{Outcome: event.OutcomeAborted, Err: "gone"}, clientFetch{file: img, size: 3, bytes: 3}, event.OutcomeAborted},
		"no server event":      {nil, clientFetch{file: img, size: 3, bytes: 3}, event.OutcomeError},
		"remote: no event":     {nil, clientFetch{file: img, size: 3, bytes: 3, serverless: true}, event.OutcomeOK},
		"remote: size unknown": {nil, clientFetch{file: img, size: -1, bytes: 3, serverless: true}, event.OutcomeOK},
	} {
		// A completed fetch of the image is an image (a remote one once went as "api": no file).
		if r, _ := fetchRecord(tt.ev, tt.c); r.Outcome != tt.outcome || (r.Outcome == event.OutcomeOK && r.Kind != record.KindImage) {
			t.Errorf("%s: outcome %s (%s), kind %s; want %s", name, r.Outcome, r.Err, r.Kind, tt.outcome)
		}
	}
}
