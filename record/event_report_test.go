package record_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// TestEventsOutOfTables: even when a caller hands the tables events (a
// --kind event read), no throughput table counts one as a fetch moved.
func TestEventsOutOfTables(t *testing.T) {
	ev := record.FromMilestone(event.Milestone{Time: time.Unix(1700000000, 0), What: event.MilestoneDHCPAck,
		Detail: map[string]string{"addr": "10.0.0.9"}}, "serve")
	for _, name := range []string{report.TableWindowOffload, report.TableDirectionMTU, report.TableLinkSpeed, report.TableTFTP} {
		tb, err := report.BuildWith(name, []record.Record{ev}, report.Options{Kinds: []string{record.KindEvent}})
		if err != nil {
			t.Fatal(err)
		}
		if len(tb.Rows) != 0 {
			t.Errorf("%s: rows %v from an event alone", name, tb.Rows)
		}
		if !strings.Contains(tb.Empty, "No completed fetches") {
			t.Errorf("%s: empty message %q", name, tb.Empty)
		}
	}
}
