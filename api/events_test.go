package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
)

// TestFetchesEvents: against a real store, /api/fetches lists fetches
// alone by default, the milestones with kind=event, one board's with mac=
// (any common MAC form); a bad mac= is a 400 naming the fix.
func TestFetchesEvents(t *testing.T) {
	dir := t.TempDir()
	st, err := record.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sink := record.NewSink(st, slog.New(slog.DiscardHandler), record.SinkOptions{Kernel: "k"})
	a := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	b := net.HardwareAddr{0x52, 0x54, 0, 0, 0, 2}
	at := time.Now().Add(-time.Minute)
	sink.Fetch(&event.Fetch{Start: at, Proto: event.ProtoHTTP, MAC: a, File: "vmlinuz", Bytes: 10, Size: 10,
		Duration: time.Millisecond, Outcome: event.OutcomeOK})
	sink.Milestone(event.Milestone{Time: at.Add(-time.Second), MAC: a, What: event.MilestoneDHCPAck})
	sink.Milestone(event.Milestone{Time: at.Add(time.Second), MAC: a, What: event.MilestoneKernelFetched,
		Detail: map[string]string{"file": "vmlinuz"}})
	sink.Milestone(event.Milestone{Time: at, MAC: b, What: event.MilestoneDHCPAck})
	if err := sink.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(st, nil, Limits{}))
	t.Cleanup(srv.Close)
	list := func(query string) (int, []record.Record, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/fetches?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var e struct{ Error string }
			_ = json.NewDecoder(resp.Body).Decode(&e)
			return resp.StatusCode, nil, e.Error
		}
		var recs []record.Record
		if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, recs, ""
	}
	whats := func(recs []record.Record) string {
		var w []string
		for _, r := range recs {
			w = append(w, r.Kind+":"+r.File)
		}
		return strings.Join(w, ",")
	}
	for query, want := range map[string]string{
		"":                                       "image:vmlinuz",
		"kind=all":                               "image:vmlinuz",
		"kind=event":                             "event:kernel-fetched,event:dhcp-ack,event:dhcp-ack",
		"kind=event&mac=52-54-00-12-34-56":       "event:kernel-fetched,event:dhcp-ack",
		"kind=event&client=52:54:00:00:00:02":    "event:dhcp-ack",
		"kind=image,event&mac=52:54:00:12:34:56": "event:kernel-fetched,image:vmlinuz,event:dhcp-ack",
	} {
		code, recs, msg := list(query)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", query, code, msg)
			continue
		}
		if got := whats(recs); got != want {
			t.Errorf("%s: %s, want %s", query, got, want)
		}
	}
	for query, want := range map[string]string{
		"mac=board7":                            "mac=52:54:00:12:34:56",
		"mac=52:54:00:12:34:56&client=10.0.0.9": "give one of them",
	} {
		if code, _, msg := list(query); code != http.StatusBadRequest || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %q, want 400 with %q", query, code, msg, want)
		}
	}
}
