package bench

import (
	"fmt"

	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// What a sweep prints: the header before it, a progress line per point and
// the tables after it. The CLI only renders them (cmd/pxeperf/bench.go).

// Header is the line printed before a sweep on a testbed.
func Header(runID string, spec Spec) string {
	return presenter(spec.Proto).header(runID, spec)
}

// ProgressLine is the last point's part of the progress line.
func ProgressLine(r *Result) string {
	if rec := &r.Record; rec.Outcome != "ok" {
		return fmt.Sprintf("%s: %s", r.Point.Key(), rec.Outcome)
	}
	return presenter(r.Record.Proto).progress(r)
}

// Tables are what a testbed sweep prints at its end; text says the format
// is for people (text or Markdown), which adds the fit and the testbed's
// limits as notes.
func Tables(results []Result, spec Spec, runID string, text bool) []report.Table {
	if len(results) == 0 {
		return nil
	}
	return presenter(spec.Proto).tables(results, records(results), spec, runID, text)
}

// RemoteTables are what a remote sweep (RunRemote) prints at its end.
func RemoteTables(results []Result, spec Spec, runID, server string, text bool) []report.Table {
	pr := presenter(spec.Proto)
	if len(results) == 0 || pr.remoteTables == nil {
		return nil
	}
	return pr.remoteTables(results, records(results), spec, runID, server, text)
}

// presenter is the protocol that prints a sweep of proto: HTTP's way for
// any other.
func presenter(proto string) protocol {
	if pr, ok := protocolOf(proto); ok {
		return pr
	}
	return httpProtocol
}

func records(results []Result) []record.Record {
	recs := make([]record.Record, 0, len(results))
	for _, r := range results {
		recs = append(recs, r.Record)
	}
	return recs
}

// streamTables: the direction-mtu table, the linkspeed table when the
// sweep has several rates (or is the linkspeed preset), the sweep's own
// table and the cross-check pairs.
func streamTables(results []Result, recs []record.Record, spec Spec, runID string, text, remote bool) []report.Table {
	again := fmt.Sprintf("Bench run %s; again with: pxeperf report --table %%s --label %s=%s", runID, LabelRun, runID)
	var tables []report.Table
	if len(spec.Rates) > 1 {
		ls := report.LinkSpeed(recs)
		ls.Notes = append(ls.Notes, fmt.Sprintf(again, report.TableLinkSpeed))
		tables = append(tables, ls)
	}
	if len(spec.Rates) == 1 || len(spec.MTUs) > 1 || len(spec.Streams) > 1 {
		dm := report.DirectionMTU(recs)
		dm.Notes = append(dm.Notes, fmt.Sprintf(again, report.TableDirectionMTU))
		if len(spec.Windows) > 1 || len(spec.UDPRates) > 1 || len(spec.Rates) > 1 {
			dm.Notes = append(dm.Notes, "This table mixes windows, UDP rates or link rates; the sweep table below keeps them apart.")
		}
		tables = append(tables, dm)
	}
	sum := StreamSummary(results)
	sum.Notes = append(sum.Notes, DelayLineNotes(results)...)
	if !remote && text {
		sum.Notes = append(sum.Notes, netlab.Limits()...)
	}
	tables = append(tables, sum)
	if cc, _, n := CrossCheck(results); n > 0 {
		tables = append(tables, cc)
	}
	return tables
}
