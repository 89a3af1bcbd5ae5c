package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/notify"
)

// TestStreamMilestone: a real client reading /api/active/stream gets each
// milestone as "event: milestone" with the {time,mac,host,what,detail}
// data, between the periodic "active" events.
func TestStreamMilestone(t *testing.T) {
	d := New(Options{Active: event.NewActive(), Interval: time.Hour})
	mux := http.NewServeMux()
	d.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/active/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	next := sseReader(t, resp.Body)
	if name, _ := next(); name != "active" {
		t.Fatalf("first event %q, want active", name)
	}
	// Subscribed before the first event was written: this one is seen.
	m := event.Milestone{Time: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), MAC: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56},
		Host: "board7", What: event.MilestoneKernelFetched, Detail: map[string]string{"file": "vmlinuz", "mbps": "800"}}
	d.Milestone(m)
	name, data := next()
	if name != "milestone" {
		t.Fatalf("event %q (%s), want milestone", name, data)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("data %q: %v", data, err)
	}
	want := map[string]any{"time": "2026-12-02T14:00:00Z", "mac": "52:54:00:12:34:56", "host": "board7",
		"what": "kernel-fetched", "detail": map[string]any{"file": "vmlinuz", "mbps": "800"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("milestone data (-want +got):\n%s", d)
	}
}

// sseReader reads server-sent events from body: each call returns the
// next one's name and data line.
func sseReader(t *testing.T, body io.Reader) func() (name, data string) {
	br := bufio.NewReader(body)
	return func() (name, data string) {
		t.Helper()
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "":
				return name, data
			}
		}
	}
}

// TestMilestoneSlowReader: a reader that takes nothing loses milestones
// past its buffer (counted); Milestone never waits for it.
func TestMilestoneSlowReader(t *testing.T) {
	d := New(Options{})
	ch, unsubscribe := d.subscribe()
	for i := range streamBuffer + 10 {
		d.Milestone(event.Milestone{What: event.MilestoneDHCPAck, Detail: map[string]string{"i": string(rune('a' + i%26))}})
	}
	if n := d.LostMilestones(); n != 10 || len(ch) != streamBuffer {
		t.Errorf("lost %d (want 10), buffered %d (want %d)", n, len(ch), streamBuffer)
	}
	var first notify.Message
	if err := json.Unmarshal(<-ch, &first); err != nil || first.Detail["i"] != "a" {
		t.Errorf("first buffered %+v, %v: want the oldest kept", first, err)
	}
	unsubscribe()
	d.Milestone(event.Milestone{What: event.MilestoneDHCPAck})
	if n := d.LostMilestones(); n != 10 {
		t.Errorf("a gone reader still counts: lost %d", n)
	}
}
