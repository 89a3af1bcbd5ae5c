package report

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/record"
)

// TableTFTP is the TFTP table's name for --table and /api/report.
const TableTFTP = "tftp"

// TFTPRow is one blksize of the TFTP table and Setup: a cell per
// windowsize.
type TFTPRow struct {
	Setup
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
	a.WndMedian = int(measure.Median(meds))
	a.Losses, a.Resent = measure.Median(losses), measure.Median(resent)
	return &a
}

// TFTP is the RFC 7440 study's table: rows blksize (a block of rows per
// Setup), columns windowsize, cells the median Mbit/s and count of the
// completed TFTP fetches with that negotiated blksize and windowsize (a
// client that asked for no windowsize counts as 1, lock-step RFC 1350),
// with what the adaptive sender did. Rows and columns ascend.
func TFTP(recs []record.Record) Table { return tftpTable(recs, Options{}) }

func tftpTable(recs []record.Record, o Options) Table {
	c := newCounter(o, tftpKinds)
	sp := newSplitter(o)
	g := newTFTPGrid()
	for i := range recs {
		r := recs[i]
		if r.Proto != "tftp" || !c.use(&r) {
			continue
		}
		g.add(r, sp.of(&r))
	}
	g.sort()
	t := Table{
		Name:    TableTFTP,
		Title:   "TFTP throughput by blksize and windowsize (median Mbit/s, n fetches)",
		Columns: append(append(sp.columns(), Column{Name: "blksize", Key: "blksize"}), tftpWindowColumns(g.wins)...),
		Data:    []TFTPRow{},
		Empty:   noRecords,
		Notes:   []string{"Rows: the negotiated blksize (bytes); columns: the negotiated windowsize (RFC 7440, blocks per ACK; 1 is lock-step RFC 1350)."},
	}
	if (!sp.has(SplitMTU) && len(g.mtus) > 1) || (!sp.has(SplitSpeed) && len(g.rates) > 1) {
		t.Notes = append(t.Notes, "These fetches mix MTUs or rate limits (--merge); narrow them with --label (e.g. rate=1gbit) to compare like with like.")
	}
	var data []TFTPRow
	adapted := false
	for _, rk := range g.rows {
		row, cells := g.row(rk, sp)
		adapted = adapted || row.Adapt != nil
		data = append(data, row)
		t.Rows = append(t.Rows, cells)
	}
	if data != nil {
		t.Data = data
	}
	if adapted {
		t.Notes = append(t.Notes, "(w min/median/max, N loss, N resent): the adaptive sender's effective window in blocks per round, its loss events and the blocks it sent again (medians over the cell's fetches).")
	}
	addSplitNote(&t, sp, data != nil)
	c.addNote(&t)
	return t
}

// tftpRowKey is a row of the TFTP table: a Setup and a blksize.
type tftpRowKey struct {
	st  Setup
	blk int
}

// tftpCellKey is a cell: a row and a windowsize.
type tftpCellKey struct {
	tftpRowKey
	win int
}

// tftpGrid is the TFTP table's fetches by cell, its rows and windowsizes,
// and the rate limits and MTUs the fetches ran with.
type tftpGrid struct {
	cells map[tftpCellKey][]record.Record
	rows  []tftpRowKey
	wins  []int
	rates map[int64]bool
	mtus  map[int]bool
}

func newTFTPGrid() *tftpGrid {
	return &tftpGrid{cells: map[tftpCellKey][]record.Record{}, rates: map[int64]bool{}, mtus: map[int]bool{}}
}

// add puts r, a fetch of Setup st, in its cell: its negotiated blksize
// (512, RFC 1350's block, without the option) and windowsize (1 without
// the option: lock-step).
func (g *tftpGrid) add(r record.Record, st Setup) {
	b, w := r.BlkSize, max(r.WindowSize, 1)
	if b == 0 {
		b = 512 // no blksize option: RFC 1350's block
	}
	rk := tftpRowKey{st, b}
	if !slices.Contains(g.rows, rk) {
		g.rows = append(g.rows, rk)
	}
	if !slices.Contains(g.wins, w) {
		g.wins = append(g.wins, w)
	}
	k := tftpCellKey{rk, w}
	g.cells[k] = append(g.cells[k], r)
	g.rates[r.RateLimit], g.mtus[r.MTU] = true, true
}

// sort puts rows (by Setup, then blksize) and windowsizes in ascending order.
func (g *tftpGrid) sort() {
	slices.SortFunc(g.rows, func(a, b tftpRowKey) int { return cmp.Or(compareSetups(a.st, b.st), cmp.Compare(a.blk, b.blk)) })
	slices.Sort(g.wins)
}

// tftpWindowColumns are each windowsize's columns. Text: the median with
// the adaptive sender's figures in one cell; CSV: each a number column of
// its own.
func tftpWindowColumns(wins []int) []Column {
	var cols []Column
	for _, w := range wins {
		ws := "windowsize_" + strconv.Itoa(w)
		cols = append(cols, Column{Name: "win " + strconv.Itoa(w), Key: ws, TextOnly: true},
			Column{Name: "win " + strconv.Itoa(w) + " Mbit/s", Key: ws + "_mbps", CSVOnly: true},
			Column{Name: "n", Key: ws + "_count"},
			Column{Name: "eff wnd min", Key: ws + "_eff_wnd_min", CSVOnly: true},
			Column{Name: "eff wnd median", Key: ws + "_eff_wnd_median", CSVOnly: true},
			Column{Name: "eff wnd max", Key: ws + "_eff_wnd_max", CSVOnly: true},
			Column{Name: "loss events", Key: ws + "_loss_events", CSVOnly: true},
			Column{Name: "resent", Key: ws + "_retransmits", CSVOnly: true})
	}
	return cols
}

// row is row rk as data and cells: per windowsize the median and count,
// and what the adaptive sender did (empty cells for a lock-step one).
func (g *tftpGrid) row(rk tftpRowKey, sp splitter) (TFTPRow, []string) {
	row := TFTPRow{Setup: rk.st, BlkSize: rk.blk, Cells: map[string]*Stat{}}
	cells := append(sp.cells(rk.st), strconv.Itoa(rk.blk))
	for _, w := range g.wins {
		rs := g.cells[tftpCellKey{rk, w}]
		var mb []float64
		for _, r := range rs {
			mb = append(mb, r.Mbps)
		}
		s := stat(mb)
		if s != nil {
			row.Cells[strconv.Itoa(w)] = s
		}
		text := cellMbps(s)
		adapt := make([]string, 5)
		if a := adaptOf(rs); a != nil {
			if row.Adapt == nil {
				row.Adapt = map[string]*TFTPAdapt{}
			}
			row.Adapt[strconv.Itoa(w)] = a
			text += a.String()
			adapt = []string{strconv.Itoa(a.WndMin), strconv.Itoa(a.WndMedian), strconv.Itoa(a.WndMax),
				strconv.FormatFloat(a.Losses, 'f', -1, 64), strconv.FormatFloat(a.Resent, 'f', -1, 64)}
		}
		cells = append(append(cells, text, cellMbps(s), cellCount(s)), adapt...)
	}
	return row, cells
}
