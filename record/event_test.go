package record

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pxeperf/pxeperf/event"
)

// TestMilestoneRecords: a milestone goes through the journal like a fetch
// (written by a journal-only sink, imported by the next start's sink), is
// stored as kind event with its detail as labels, and is left out of every
// read that does not name the kind, while kind=event (with the client
// filter on its MAC) lists it.
func TestMilestoneRecords(t *testing.T) {
	dir := t.TempDir()
	j := openJournal(t, dir)
	sink := NewSink(nil, quiet, SinkOptions{Journal: j, Kernel: "k", Server: "s1"})
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	m := event.Milestone{Time: time.Unix(1700000001, 0), MAC: mac, Host: "board7", What: event.MilestoneKernelFetched,
		Detail: map[string]string{"file": "vmlinuz", "mbps": "812.5", "proto": "http", "record": "3"}}
	sink.Fetch(testFetch(0))
	sink.Milestone(m)
	closeSink(t, sink)
	if st := sink.Stats(); st.JournalOnly != 2 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 2 journal-only", st)
	}
	j.Close()

	store := openTest(t, dir)
	sink2 := NewSink(store, quiet, SinkOptions{Journal: openJournal(t, dir)})
	closeSink(t, sink2)
	ctx := context.Background()
	fetches, err := store.Query(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fetches) != 1 || fetches[0].Kind == KindEvent {
		t.Fatalf("a read without kinds: %+v, want the one fetch", fetches)
	}
	all, err := ParseKinds("all")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Query(ctx, Filter{Kinds: all}); len(got) != 1 {
		t.Errorf("--kind all read %d records, want the fetch alone", len(got))
	}
	kinds, err := ParseKinds("event")
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Query(ctx, Filter{Kinds: kinds, Client: "52-54-00-12-34-56"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{{Time: m.Time.UTC(), Source: "serve", Proto: ProtoEvent, ClientMAC: mac.String(), Host: "board7",
		File: event.MilestoneKernelFetched, Kind: KindEvent, Size: -1, Outcome: event.OutcomeOK, Labels: m.Detail,
		Server: "s1"}}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(Record{}, "ID")); d != "" {
		t.Errorf("kind=event (-want +got):\n%s", d)
	}
	if got, _ := store.Query(ctx, Filter{Kinds: kinds, Client: "52:54:00:00:00:01"}); len(got) != 0 {
		t.Errorf("another MAC's events: %+v", got)
	}
	if !HasKind(&got[0], kinds) || HasKind(&got[0], nil) {
		t.Error("HasKind: an event must match kind event only")
	}
}

// TestClassifyEvent: an event record stays an event whatever its other
// fields say (Classify runs again on read for kind "" and error).
func TestClassifyEvent(t *testing.T) {
	for name, r := range map[string]Record{
		"kind":  {Kind: KindEvent, File: "pxelinux.0", Outcome: "ok"},
		"proto": {Proto: ProtoEvent, File: event.MilestoneDHCPAck, Outcome: "ok"},
	} {
		if k := Classify(&r); k != KindEvent {
			t.Errorf("%s: Classify = %q, want event", name, k)
		}
	}
	if k := Classify(&Record{Proto: "http", File: "dhcp-ack", Outcome: "ok"}); k == KindEvent {
		t.Error("a fetch named like a milestone is classified an event")
	}
}
