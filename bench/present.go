package bench

import (
	"fmt"
	"strings"

	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// What a sweep prints: the header before it, a progress line per point and
// the tables after it. The CLI only renders them (cmd/pxeperf/bench.go).

// Header is the line printed before a sweep on a testbed.
func Header(runID string, spec Spec) string {
	switch spec.Proto {
	case ProtoStream:
		return fmt.Sprintf("pxeperf bench %s: %d runs of %v (%s x %s x %d MTU x %d rate x %d repeats)", runID, spec.Count(), spec.Duration,
			strings.Join(spec.Streams, ","), strings.Join(spec.Directions, ","), len(spec.MTUs), len(spec.Rates), spec.Repeat)
	case ProtoTFTP:
		return fmt.Sprintf("pxeperf bench %s: %d TFTP fetches of %s (%d blksize x %d windowsize x %d offload x %d MTU x %d rate x %d repeats)",
			runID, spec.Count(), images.FormatSizeExact(spec.Size), len(spec.BlkSizes), len(spec.WindowSizes), len(spec.Offloads), len(spec.MTUs), len(spec.Rates), spec.Repeat)
	}
	return fmt.Sprintf("pxeperf bench %s: %d fetches of %s (%d windows x %d offload x %d MTU x %d rate x %d repeats)",
		runID, spec.Count(), images.FormatSizeExact(spec.Size), len(spec.Windows), len(spec.Offloads), len(spec.MTUs), len(spec.Rates), spec.Repeat)
}

// ProgressLine is the last point's part of the progress line.
func ProgressLine(r *Result) string {
	rec := &r.Record
	switch {
	case rec.Outcome != "ok":
		return fmt.Sprintf("%s: %s", r.Point.Key(), rec.Outcome)
	case rec.Proto == ProtoTCP || rec.Proto == ProtoUDP:
		s := fmt.Sprintf("%s: %.1f Mbit/s", r.Point.Key(), rec.Mbps)
		if lost, ok := rec.Labels[LabelUDPLostPct]; ok {
			return s + ", lost " + lost + "%"
		}
		return fmt.Sprintf("%s, %d retransmits", s, rec.Retransmits)
	case rec.Proto == ProtoTFTP:
		return fmt.Sprintf("%s: %.1f Mbit/s, %d datagrams, %d resent", r.Point.Key(), rec.Mbps, rec.Datagrams, rec.Retransmits)
	}
	return fmt.Sprintf("%s: %.1f Mbit/s, window seen %d", r.Point.Key(), rec.Mbps, rec.WndMax)
}

// Tables are what a testbed sweep prints at its end; text says the format
// is for people (text or Markdown), which adds the fit and the testbed's
// limits as notes.
func Tables(results []Result, spec Spec, runID string, text bool) []report.Table {
	if len(results) == 0 {
		return nil
	}
	recs := records(results)
	switch spec.Proto {
	case ProtoStream:
		return streamTables(results, recs, spec, runID, text, false)
	case ProtoTFTP:
		tt := report.TFTP(recs)
		tt.Notes = append(tt.Notes, fmt.Sprintf("Bench run %s; again with: pxeperf report --table tftp --label %s=%s", runID, LabelRun, runID))
		sum := TFTPSummary(results)
		if text {
			sum.Notes = append(sum.Notes, netlab.Limits()...)
		}
		return []report.Table{tt, sum}
	}
	fit := FitModel(recs)
	wo := report.WindowOffload(recs)
	wo.Notes = append(wo.Notes, fmt.Sprintf("Bench run %s; again with: pxeperf report --table window-offload --label %s=%s", runID, LabelRun, runID))
	if len(spec.MTUs) > 1 || len(spec.Rates) > 1 {
		wo.Notes = append(wo.Notes, "This table mixes MTUs and rates; the sweep table below keeps them apart.")
	}
	sum := Summary(results, fit)
	if text {
		sum.Notes = append(sum.Notes, FitLines(fit)...)
		if rows, ok := sum.Data.([]SummaryRow); ok && fit.Identified {
			if l := RowFitLine(rows); l != "" {
				sum.Notes = append(sum.Notes, l)
			}
		}
		sum.Notes = append(sum.Notes, netlab.Limits()...)
	}
	return []report.Table{wo, sum}
}

// RemoteTables are what a remote sweep (RunRemote) prints at its end.
func RemoteTables(results []Result, spec Spec, runID, server string, text bool) []report.Table {
	if len(results) == 0 {
		return nil
	}
	recs := records(results)
	if spec.Proto == ProtoStream {
		return streamTables(results, recs, spec, runID, text, true)
	}
	wo := report.WindowOffload(recs)
	wo.Notes = append(wo.Notes, fmt.Sprintf("Remote run %s against %s; again with: pxeperf report --table window-offload --label %s=%s", runID, server, LabelRun, runID))
	return []report.Table{wo, report.Fetches(recs)}
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
	if !remote && text {
		sum.Notes = append(sum.Notes, netlab.Limits()...)
	}
	tables = append(tables, sum)
	if cc, _, n := CrossCheck(results); n > 0 {
		tables = append(tables, cc)
	}
	return tables
}
