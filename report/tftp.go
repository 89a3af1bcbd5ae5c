package report

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/pxeperf/pxeperf/record"
)

// TableTFTP is the TFTP table's name for --table and /api/report.
const TableTFTP = "tftp"

// TFTPRow is one blksize of the TFTP table: a cell per windowsize.
type TFTPRow struct {
	BlkSize int              `json:"blksize"`
	Cells   map[string]*Stat `json:"cells"` // by windowsize
	// Adapt is, by windowsize, what the adaptive sender did (fetches
	// recorded with it only).
	Adapt map[string]*TFTPAdapt `json:"adapt,omitempty"`
}

// TFTPAdapt sums up the adaptive sender over a cell's fetches: the
// effective window (least of the minima, median of the medians, largest of
// the maxima), and the medians of loss events and blocks resent.
type TFTPAdapt struct {
	WndMin    int     `json:"eff_wnd_min"`
	WndMedian int     `json:"eff_wnd_median"`
	WndMax    int     `json:"eff_wnd_max"`
	Losses    float64 `json:"loss_events"`
	Resent    float64 `json:"retransmits"`
}

// String is the cell's suffix: " (w 3/12/16, 4 loss, 40 resent)".
func (a *TFTPAdapt) String() string {
	return fmt.Sprintf(" (w %d/%d/%d, %.0f loss, %.0f resent)", a.WndMin, a.WndMedian, a.WndMax, a.Losses, a.Resent)
}

func adaptOf(rs []record.Record) *TFTPAdapt {
	var a TFTPAdapt
	var meds, losses, resent []float64
	for _, r := range rs {
		if r.EffWndMax == 0 {
			continue
		}
		if a.WndMin == 0 || r.EffWndMin < a.WndMin {
			a.WndMin = r.EffWndMin
		}
		a.WndMax = max(a.WndMax, r.EffWndMax)
		meds = append(meds, float64(r.EffWndMedian))
		losses = append(losses, float64(r.LossEvents))
		resent = append(resent, float64(r.Retransmits))
	}
	if len(meds) == 0 {
		return nil
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	a.WndMedian, a.Losses, a.Resent = int(med(meds)), med(losses), med(resent)
	return &a
}

// TFTP is the RFC 7440 study's table: rows blksize, columns windowsize,
// cells the median Mbit/s of the completed TFTP fetches with that
// negotiated blksize and windowsize (served boots and bench runs alike; a
// client that asked for no windowsize counts as 1, lock-step RFC 1350).
// Rows and columns ascend.
func TFTP(recs []record.Record) Table { return tftpTable(recs, Options{}) }

func tftpTable(recs []record.Record, o Options) Table {
	type key struct{ blk, win int }
	groups := map[key][]float64{}
	byKey := map[key][]record.Record{}
	var blks, wins []int
	rates := map[int64]bool{}
	mtus := map[int]bool{}
	c := newCounter(o, tftpKinds)
	for i := range recs {
		r := recs[i]
		if r.Proto != "tftp" || !c.use(&r) {
			continue
		}
		b, w := r.BlkSize, max(r.WindowSize, 1)
		if b == 0 {
			b = 512 // no blksize option: RFC 1350's block
		}
		if !slices.Contains(blks, b) {
			blks = append(blks, b)
		}
		if !slices.Contains(wins, w) {
			wins = append(wins, w)
		}
		groups[key{b, w}] = append(groups[key{b, w}], r.Mbps)
		byKey[key{b, w}] = append(byKey[key{b, w}], r)
		rates[r.RateLimit], mtus[r.MTU] = true, true
	}
	slices.Sort(blks)
	slices.Sort(wins)
	t := Table{
		Name:    TableTFTP,
		Title:   "TFTP throughput by blksize and windowsize (median Mbit/s)",
		Columns: []Column{{Name: "blksize", Key: "blksize"}},
		Data:    []TFTPRow{},
		Empty:   noRecords,
		Notes:   []string{"Rows: the negotiated blksize (bytes); columns: the negotiated windowsize (RFC 7440, blocks per ACK; 1 is lock-step RFC 1350). Counts per cell: --format json."},
	}
	if len(rates) > 1 || len(mtus) > 1 {
		t.Notes = append(t.Notes, "These fetches mix MTUs or rate limits; narrow them with --label (e.g. rate=1gbit) to compare like with like.")
	}
	c.addNote(&t)
	for _, w := range wins {
		t.Columns = append(t.Columns, Column{Name: "win " + strconv.Itoa(w), Key: "windowsize_" + strconv.Itoa(w) + "_mbps"})
	}
	if len(groups) == 0 {
		return t
	}
	var data []TFTPRow
	for _, b := range blks {
		row := TFTPRow{BlkSize: b, Cells: map[string]*Stat{}}
		cells := []string{strconv.Itoa(b)}
		for _, w := range wins {
			s := stat(groups[key{b, w}])
			if s != nil {
				row.Cells[strconv.Itoa(w)] = s
			}
			cell := cellMbps(s)
			if a := adaptOf(byKey[key{b, w}]); a != nil {
				if row.Adapt == nil {
					row.Adapt = map[string]*TFTPAdapt{}
				}
				row.Adapt[strconv.Itoa(w)] = a
				cell += a.String()
			}
			cells = append(cells, cell)
		}
		data = append(data, row)
		t.Rows = append(t.Rows, cells)
	}
	t.Data = data
	for _, row := range data {
		if row.Adapt != nil {
			t.Notes = append(t.Notes, "(w min/median/max, N loss, N resent): the adaptive sender's effective window in blocks per round, its loss events and the blocks it sent again (medians over the cell's fetches).")
			break
		}
	}
	return t
}
