package bench

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// httpProtocol is an HTTP image fetch from pxeperf's httpboot server, swept
// by the client's window (SO_RCVBUF); its drivers are in http_linux.go
// (testbed) and remote.go.
var httpProtocol = protocol{
	inner: func(s Spec) []Point {
		var out []Point
		for _, w := range s.Windows {
			out = append(out, Point{Window: w, Size: s.Size})
		}
		return out
	},
	innerCount: func(s Spec) int { return len(s.Windows) },
	key: func(p Point) string {
		return fmt.Sprintf("%s mtu=%d rate=%s rx_offload=%s window=%s", p.Proto, p.MTU, FormatRate(p.Rate), onOff(p.Offload), FormatWindow(p.Window))
	},
	validate: func(s Spec) []error {
		if len(s.BlkSizes) > 0 || len(s.WindowSizes) > 0 {
			return []error{errors.New("--blksize and --windowsize apply to --proto tftp")}
		}
		return nil
	},
	// --proto http keeps the rest of the spec; --window is a common flag
	// (streams take it too).
	use: func(s Spec, proto string, _ Flags) (Spec, bool, error) {
		if strings.ToLower(strings.TrimSpace(proto)) != ProtoHTTP {
			return s, false, nil
		}
		s.Proto = ProtoHTTP
		return s, true, nil
	},
	header: func(runID string, spec Spec) string {
		return fmt.Sprintf("pxeperf bench %s: %d fetches of %s (%d windows x %d offload x %d MTU x %d rate x %d repeats)",
			runID, spec.Count(), configs.ByteSize(spec.Size).String(), len(spec.Windows), len(spec.Offloads), len(spec.MTUs), len(spec.Rates), spec.Repeat)
	},
	progress: func(r *Result) string {
		return fmt.Sprintf("%s: %.1f Mbit/s, window seen %d", r.Point.Key(), r.Record.Mbps, r.Record.WndMax)
	},
	tables:       httpTables,
	remoteTables: httpRemoteTables,
}

// httpTables: the window x offload table and the sweep's own with the
// model fit.
func httpTables(results []Result, recs []record.Record, spec Spec, runID string, text bool) []report.Table {
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
	}
	// Whether the delay line kept up, before the testbed's limits: a row
	// it fell behind in is not the model missing.
	sum.Notes = append(sum.Notes, DelayLineNotes(results)...)
	if text {
		sum.Notes = append(sum.Notes, netlab.Limits()...)
	}
	return []report.Table{wo, sum}
}

// httpRemoteTables: the window x offload table and every fetch.
func httpRemoteTables(_ []Result, recs []record.Record, _ Spec, runID, server string, _ bool) []report.Table {
	wo := report.WindowOffload(recs)
	wo.Notes = append(wo.Notes, fmt.Sprintf("Remote run %s against %s; again with: pxeperf report --table window-offload --label %s=%s", runID, server, LabelRun, runID))
	return []report.Table{wo, report.Fetches(recs)}
}
