package report

import (
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
			cells = append(cells, cellMbps(s))
		}
		data = append(data, row)
		t.Rows = append(t.Rows, cells)
	}
	t.Data = data
	return t
}
