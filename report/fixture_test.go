package report

import (
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report/reporttest"
)

// The labs live in reporttest, for cmd/pxeperf's tests too.
var t0 = reporttest.T0

func gpxeStudy() []record.Record { return reporttest.GPXEStudy() }
func lab() []record.Record       { return reporttest.Lab() }
func issue28() []record.Record   { return reporttest.Issue28() }
func compareLab() []record.Record {
	return reporttest.CompareLab()
}

func fetchWithIntervals() (record.Record, []record.Interval) { return reporttest.FetchWithIntervals() }
