package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/tftp"
)

// The TFTP sweep (--proto tftp, --preset tftp): blksize x windowsize in
// place of the HTTP window. Options asked, RFC limits:
//
//	--blksize     8..65464 bytes (RFC 2348), at most MTU - 32 (IPv4, UDP and
//	              TFTP headers) for every --mtu: 1468 at 1500
//	--windowsize  1..65535 blocks (RFC 7440); 1 is RFC 1350 lock-step
//
// Both take a comma list of numbers and ranges: lo..hi doubles (1..64 is
// 1,2,4,8,16,32,64), lo..hi/step steps linearly (512..1468/478 is
// 512,990,1468); hi is included when the steps reach it.

// Labels of TFTP bench records (besides rx_offload, bench_run, rate).
const (
	LabelBlkSize    = "blksize"    // asked; the record's BlkSize is what was negotiated
	LabelWindowSize = "windowsize" // asked; the record's WindowSize is what was negotiated
)

// IPUDPTFTPOverhead is what a DATA packet adds to its block on the wire:
// 20 (IPv4) + 8 (UDP) + 4 (TFTP); the largest blksize at an MTU is MTU - 32.
const IPUDPTFTPOverhead = 32

// tftpPresetName names the preset whose lists --proto tftp starts from.
const tftpPresetName = "tftp"

func tftpKey(p Point) string {
	return fmt.Sprintf("%s mtu=%d rate=%s rx_offload=%s blksize=%d windowsize=%d", p.Proto, p.MTU, FormatRate(p.Rate), onOff(p.Offload), p.BlkSize, p.WindowSize)
}

// tftpProtocol is a TFTP image fetch from pxeperf's tftp server, swept by
// blksize x windowsize (blksize changing slower); its driver is in
// tftp_linux.go.
var tftpProtocol = protocol{
	inner: func(s Spec) []Point {
		var out []Point
		for _, b := range s.BlkSizes {
			for _, w := range s.WindowSizes {
				out = append(out, Point{BlkSize: b, WindowSize: w, Size: s.Size})
			}
		}
		return out
	},
	// MaxPoints+1 when it is larger than MaxPoints.
	innerCount: func(s Spec) int {
		if n := len(s.BlkSizes) * len(s.WindowSizes); len(s.BlkSizes) <= MaxPoints && len(s.WindowSizes) <= MaxPoints && n <= MaxPoints {
			return n
		}
		return MaxPoints + 1
	},
	key:      tftpKey,
	validate: Spec.validateTFTP,
	use: func(s Spec, proto string, f Flags) (Spec, bool, error) {
		if strings.ToLower(strings.TrimSpace(proto)) != ProtoTFTP {
			return s, false, nil
		}
		if s.Proto != ProtoTFTP {
			s = tftpDefaults(s, f)
		}
		s.Proto = ProtoTFTP
		return s, true, nil
	},
	flags: parseTFTPFlags,
	foreign: func(f Flags) []error {
		if f.BlkSize != "" || f.WindowSize != "" {
			return []error{errors.New("--blksize and --windowsize apply to --proto tftp (or --preset tftp)")}
		}
		return nil
	},
	header: func(runID string, spec Spec) string {
		return fmt.Sprintf("pxeperf bench %s: %d TFTP fetches of %s (%d blksize x %d windowsize x %d offload x %d MTU x %d rate x %d repeats)",
			runID, spec.Count(), configs.ByteSize(spec.Size).String(), len(spec.BlkSizes), len(spec.WindowSizes), len(spec.Offloads), len(spec.MTUs), len(spec.Rates), spec.Repeat)
	},
	progress: func(r *Result) string {
		return fmt.Sprintf("%s: %.1f Mbit/s, %d datagrams, %d resent", r.Point.Key(), r.Record.Mbps, r.Record.Datagrams, r.Record.Retransmits)
	},
	tables: func(results []Result, recs []record.Record, _ Spec, runID string, text bool) []report.Table {
		tt := report.TFTP(recs)
		tt.Notes = append(tt.Notes, fmt.Sprintf("Bench run %s; again with: pxeperf report --table tftp --label %s=%s", runID, LabelRun, runID))
		sum := TFTPSummary(results)
		sum.Notes = append(sum.Notes, DelayLineNotes(results)...)
		if text {
			sum.Notes = append(sum.Notes, netlab.Limits()...)
		}
		return []report.Table{tt, sum}
	},
}

func (s Spec) validateTFTP() []error {
	var errs []error
	if len(s.BlkSizes) == 0 || len(s.WindowSizes) == 0 {
		errs = append(errs, errors.New("--blksize and --windowsize each need at least one value for --proto tftp"))
	}
	if len(s.Windows) > 0 {
		errs = append(errs, errors.New("--window is the HTTP client's SO_RCVBUF; a TFTP sweep takes --windowsize (blocks)"))
	}
	for _, b := range s.BlkSizes {
		if b < tftp.MinBlkSize || b > tftp.MaxBlkSize {
			errs = append(errs, fmt.Errorf("--blksize %d: out of range %d..%d (RFC 2348)", b, tftp.MinBlkSize, tftp.MaxBlkSize))
			continue
		}
		for _, m := range s.MTUs {
			if b > m-IPUDPTFTPOverhead {
				errs = append(errs, fmt.Errorf("--blksize %d does not fit --mtu %d: at most MTU - %d = %d (a larger block would fragment)", b, m, IPUDPTFTPOverhead, m-IPUDPTFTPOverhead))
			}
		}
	}
	for _, w := range s.WindowSizes {
		if w < tftp.MinWindowSize || w > tftp.MaxWindowSize {
			errs = append(errs, fmt.Errorf("--windowsize %d: out of range %d..%d (RFC 7440)", w, tftp.MinWindowSize, tftp.MaxWindowSize))
		}
	}
	return errs
}

// tftpDefaults turns a spec into a TFTP one when --proto tftp is given
// without --preset tftp: the preset's blksize and windowsize lists, no
// HTTP window, and RX checksum offload on only unless --offload says.
func tftpDefaults(s Spec, f Flags) Spec {
	p, _ := Preset(tftpPresetName)
	s.Windows = nil
	s.BlkSizes, s.WindowSizes = p.BlkSizes, p.WindowSizes
	if f.Offload == "" {
		s.Offloads = []bool{true}
	}
	return s
}

// parseTFTPFlags applies --blksize and --windowsize to a TFTP spec and
// refuses --window for it.
func parseTFTPFlags(s *Spec, f Flags) []error {
	var errs []error
	if f.Window != "" {
		errs = append(errs, errors.New("--window is the HTTP client's SO_RCVBUF; for TFTP use --windowsize (blocks per ACK)"))
	}
	if f.BlkSize != "" {
		b, err := ParseCounts(f.BlkSize, tftp.MinBlkSize, tftp.MaxBlkSize)
		if err != nil {
			errs = append(errs, fmt.Errorf("--blksize: %w", err))
		}
		s.BlkSizes = b
	}
	if f.WindowSize != "" {
		w, err := ParseCounts(f.WindowSize, tftp.MinWindowSize, tftp.MaxWindowSize)
		if err != nil {
			errs = append(errs, fmt.Errorf("--windowsize: %w", err))
		}
		s.WindowSizes = w
	}
	return errs
}

const countForms = "a number (16), a doubling range (1..64), a range with a step (512..1468/478), or a comma list of those"

// ParseCounts parses --blksize and --windowsize: comma-separated items,
// each a whole number in lo..hi, a doubling range a..b (a, 2a, 4a, ... up
// to b) or a linear range a..b/step. Duplicates are dropped; the order is
// as given.
func ParseCounts(s string, lo, hi int) ([]int, error) {
	num := func(t string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number; use %s", t, countForms)
		}
		if n < lo || n > hi {
			return 0, fmt.Errorf("%d out of range %d..%d", n, lo, hi)
		}
		return n, nil
	}
	points := pointList{noun: "values"}
	add := points.add
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		a, rest, isRange := strings.Cut(item, "..")
		switch {
		case item == "":
			return nil, fmt.Errorf("%q: empty item; use %s", s, countForms)
		case !isRange:
			n, err := num(item)
			if err != nil {
				return nil, err
			}
			if err := add(n); err != nil {
				return nil, err
			}
		default:
			b, st, linear := strings.Cut(rest, "/")
			from, err := num(a)
			if err != nil {
				return nil, fmt.Errorf("range %q: start: %w", item, err)
			}
			to, err := num(b)
			if err != nil {
				return nil, fmt.Errorf("range %q: end: %w", item, err)
			}
			if from > to {
				return nil, fmt.Errorf("range %q: start is above the end", item)
			}
			step := 0
			if !linear && from < 1 {
				return nil, fmt.Errorf("range %q: a doubling range starts at 1 or more", item)
			}
			if linear {
				if step, err = strconv.Atoi(strings.TrimSpace(st)); err != nil || step < 1 {
					return nil, fmt.Errorf("range %q: the step is a whole number from 1; use %s", item, countForms)
				}
				if (to-from)/step >= MaxPoints {
					return nil, fmt.Errorf("range %q: more than %d steps", item, MaxPoints)
				}
			}
			for n := from; n <= to; {
				if err := add(n); err != nil {
					return nil, err
				}
				if linear {
					n += step
				} else {
					n *= 2
				}
			}
		}
	}
	return points.vals, nil
}

// TFTPSummaryRow is one TFTP point over its repeats.
type TFTPSummaryRow struct {
	MTU        int     `json:"mtu"`
	Rate       string  `json:"rate_name"`           // tbf, as --rate names it (1gbit, none)
	RateMbps   float64 `json:"rate_mbps,omitempty"` // the same in Mbit/s
	BlkSize    int     `json:"blksize"`             // asked
	WindowSize int     `json:"windowsize"`          // asked
	N          int     `json:"n"`
	Median     float64 `json:"median_mbps"`
	Min        float64 `json:"min_mbps"`
	Max        float64 `json:"max_mbps"`
	Datagrams  int64   `json:"datagrams"`   // server DATA sent, summed over the repeats
	Resent     int64   `json:"retransmits"` // server DATA sent again, summed
	Timeouts   int64   `json:"timeouts"`    // server and client timeouts, summed
	EarlyACKs  int64   `json:"client_early_acks"`
	CPUms      float64 `json:"cpu_ms_median"` // bench process CPU per fetch (client and server)
	Failed     int     `json:"failed"`
}

// TFTPSummary is the TFTP sweep's own table: each point with the median
// and spread over its repeats and the packets it took.
func TFTPSummary(results []Result) report.Table {
	type group struct {
		row  TFTPSummaryRow
		mbps []float64
		cpu  []float64
	}
	groups := byPoint(results, func(r Result) *group {
		return &group{row: TFTPSummaryRow{MTU: r.Point.MTU, Rate: FormatRate(r.Point.Rate), RateMbps: float64(r.Point.Rate) / 1e6, BlkSize: r.Point.BlkSize, WindowSize: r.Point.WindowSize}}
	}, func(g *group, r Result) {
		rec := r.Record
		g.row.Datagrams += rec.Datagrams
		g.row.Resent += rec.Retransmits
		g.row.Timeouts += rec.Timeouts + rec.ClientTimeouts
		g.row.EarlyACKs += rec.ClientEarlyACKs
		if rec.Outcome != "ok" {
			g.row.Failed++
			return
		}
		g.mbps = append(g.mbps, rec.Mbps)
		g.cpu = append(g.cpu, float64(rec.CPU)/float64(time.Millisecond))
	})
	t := report.Table{
		Name:  "bench-tftp-summary",
		Title: "TFTP sweep by point (median and min-max over repeats)",
		Columns: append(append(append([]report.Column{{Name: "MTU", Key: "mtu"}}, rateColumns...), report.Column{Name: "blksize", Key: "blksize"},
			report.Column{Name: "windowsize", Key: "windowsize"}, report.Column{Name: "n", Key: "n"}, report.Column{Name: "Mbit/s", Key: "median_mbps"}),
			append(spreadColumns, report.Column{Name: "Datagrams", Key: "datagrams"}, report.Column{Name: "Resent", Key: "retransmits"},
				report.Column{Name: "Timeouts", Key: "timeouts"}, report.Column{Name: "Early ACKs", Key: "client_early_acks"},
				report.Column{Name: "CPU ms", Key: "cpu_ms_median"}, report.Column{Name: "Failed", Key: "failed"})...),
		Empty: "No fetches ran.",
		Notes: []string{
			"Datagrams and Resent: DATA packets the server sent and sent again; Timeouts: the server's and the client's; Early ACKs: the client's at a gap (RFC 7440). Summed over the repeats.",
			"CPU ms: user+system CPU of the bench process (server and client together) per fetch, median.",
		},
	}
	var rows []TFTPSummaryRow
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for _, g := range groups {
		row := g.row
		row.N = len(g.mbps)
		cells := append(append([]string{strconv.Itoa(row.MTU)}, rateCells(row.Rate, row.RateMbps)...), strconv.Itoa(row.BlkSize),
			strconv.Itoa(row.WindowSize), strconv.Itoa(row.N), "", "", "", "", strconv.FormatInt(row.Datagrams, 10),
			strconv.FormatInt(row.Resent, 10), strconv.FormatInt(row.Timeouts, 10), strconv.FormatInt(row.EarlyACKs, 10), "",
			strconv.Itoa(row.Failed))
		if row.N > 0 {
			row.Median, row.Min, row.Max = measure.Median(g.mbps), slices.Min(g.mbps), slices.Max(g.mbps)
			cells[7] = f1(row.Median)
			copy(cells[8:11], spreadCells(row.Min, row.Max))
		}
		if len(g.cpu) > 0 {
			row.CPUms = measure.Median(g.cpu)
			cells[15] = strconv.FormatFloat(row.CPUms, 'f', 0, 64)
		}
		rows = append(rows, row)
		t.Rows = append(t.Rows, cells)
	}
	t.Data = rows
	if rows == nil {
		t.Data = []TFTPSummaryRow{}
	}
	return t
}
