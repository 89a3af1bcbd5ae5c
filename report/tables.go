package report

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/record"
)

// Table names, as --table and /api/report?table= take them.
const (
	TableWindowOffload = "window-offload"
	TableDirectionMTU  = "direction-mtu"
	TableClients       = "clients"
	TableLinkSpeed     = "linkspeed"
	TableFetches       = "fetches"
)

// TableNames lists the tables Build makes.
var TableNames = []string{TableWindowOffload, TableDirectionMTU, TableClients, TableLinkSpeed, TableTFTP, TableFetches,
	TableServers}

// Build makes the named table from recs.
func Build(name string, recs []record.Record) (Table, error) {
	switch name {
	case TableWindowOffload:
		return WindowOffload(recs), nil
	case TableDirectionMTU:
		return DirectionMTU(recs), nil
	case TableClients:
		return Clients(recs), nil
	case TableLinkSpeed:
		return LinkSpeed(recs), nil
	case TableFetches:
		return Fetches(recs), nil
	case TableTFTP:
		return TFTP(recs), nil
	case TableServers:
		return Servers(recs), nil
	}
	return Table{}, fmt.Errorf("unknown table %q: use %s", name, strings.Join(TableNames, ", "))
}

// noRecords is the Empty message of the tables built from records.
const noRecords = "No completed fetches match: serve some boots first, or widen the filters (--client, --file, --since, --label)."

// Stat is one cell: throughput over the fetches that fall in it.
type Stat struct {
	Median float64 `json:"median_mbps"`
	Best   float64 `json:"best_mbps"`
	Count  int     `json:"count"`
}

func stat(mbps []float64) *Stat {
	if len(mbps) == 0 {
		return nil
	}
	return &Stat{Median: Median(mbps), Best: slices.Max(mbps), Count: len(mbps)}
}

// Median of xs (the mean of the two middle values for an even count); NaN
// when xs is empty. xs is not changed.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// measured reports whether r's throughput means something: the whole file
// went through.
func measured(r record.Record) bool {
	return r.Outcome == "ok" && r.Bytes > 0 && r.Mbps > 0 && !math.IsInf(r.Mbps, 0) && !math.IsNaN(r.Mbps)
}

func mbps(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func cellMbps(s *Stat) string {
	if s == nil {
		return ""
	}
	return mbps(s.Median)
}

func cellCount(s *Stat) string {
	if s == nil {
		return ""
	}
	return strconv.Itoa(s.Count)
}

// WindowBucket puts a window the client advertised into the nearest power
// of two in log scale (boundaries at 2^(k+0.5)), at least 1024: 16380 and
// 16384 both count as 16384, and gPXE's unscaled 65532 or 65535 as 65536,
// so the rows match the TCP_MAX_WINDOW_SIZE steps of the gPXE study
// (4096 .. 65532). 0 stays 0 (no window known).
func WindowBucket(w uint32) uint32 {
	if w == 0 {
		return 0
	}
	if w <= 1024 {
		return 1024
	}
	lo := uint64(1) << (bits.Len32(w) - 1) // largest power of two <= w
	if lo == uint64(w) {
		return w
	}
	// Nearest in log scale: above lo*sqrt(2) rounds up.
	if float64(w) >= float64(lo)*math.Sqrt2 {
		if lo<<1 > math.MaxUint32 {
			return 1 << 31
		}
		return uint32(lo << 1)
	}
	return uint32(lo)
}

// RxOffload is the RX checksum offload state a fetch ran with, as seen by
// the client: its label rx_offload when present (the server cannot see a
// board's offload: set it on the host entry or the script URL), else the
// server NIC's rx-checksumming.
func RxOffload(r record.Record) record.Offload {
	if v, ok := r.Labels["rx_offload"]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "on", "1", "true", "yes", "y":
			return record.OffloadOn
		case "off", "0", "false", "no", "n":
			return record.OffloadOff
		}
		return record.OffloadUnknown
	}
	return r.RxCsum
}

// offloadOrder is the column order of offload states.
var offloadOrder = []record.Offload{record.OffloadOff, record.OffloadOn, record.OffloadUnknown}

func offloadName(o record.Offload) string {
	if o == record.OffloadUnknown {
		return "unknown"
	}
	return string(o)
}

// WindowOffloadRow is one row of the window-offload table: cells keyed by
// offload state "off", "on", "unknown".
type WindowOffloadRow struct {
	Window uint32           `json:"window"`
	Cells  map[string]*Stat `json:"cells"`
}

// rowWindow is the window a record counts under: for bench runs the window
// the client was set to (the study's TCP_MAX_WINDOW_SIZE, here the SO_RCVBUF
// request), exactly; for served fetches the largest window the client
// advertised, bucketed by WindowBucket. 0: no window known.
func rowWindow(r record.Record) uint32 {
	if r.WndRequested > 0 {
		return r.WndRequested
	}
	return WindowBucket(r.WndMax)
}

// windowOffload groups measured fetches with a known window by bucket and
// offload; it is shared by the table and the chart.
func windowOffload(recs []record.Record) (rows []WindowOffloadRow, states []record.Offload, skipped int) {
	groups := map[uint32]map[record.Offload][]float64{}
	seen := map[record.Offload]bool{}
	for _, r := range recs {
		if !measured(r) {
			continue
		}
		b := rowWindow(r)
		if b == 0 {
			skipped++
			continue
		}
		o := RxOffload(r)
		if groups[b] == nil {
			groups[b] = map[record.Offload][]float64{}
		}
		groups[b][o] = append(groups[b][o], r.Mbps)
		seen[o] = true
	}
	for _, o := range offloadOrder {
		// Off and on are always columns, as in the study; unknown only
		// when some fetch has it.
		if o != record.OffloadUnknown || seen[o] {
			states = append(states, o)
		}
	}
	for b, byOff := range groups {
		row := WindowOffloadRow{Window: b, Cells: map[string]*Stat{}}
		for o, v := range byOff {
			row.Cells[offloadName(o)] = stat(v)
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b WindowOffloadRow) int { return cmp.Compare(a.Window, b.Window) })
	return rows, states, skipped
}

// WindowOffload is throughput by the window the client advertised (rows,
// bucketed by WindowBucket) and RX checksum offload (columns, RxOffload):
// median Mbit/s and count per cell, the form of the 2010 gPXE study (500 MB
// HTTP imgfetch by TCP_MAX_WINDOW_SIZE, with and without RX checksum
// offload). Fetches without a window (TFTP, no TCP_INFO) are left out and
// counted in a note.
func WindowOffload(recs []record.Record) Table {
	rows, states, skipped := windowOffload(recs)
	t := Table{
		Name:    TableWindowOffload,
		Title:   "Throughput by client window and RX checksum offload (median Mbit/s, n fetches)",
		Columns: []Column{{Name: "Window (bytes)", Key: "window"}},
		Data:    rows,
		Empty:   noRecords,
		Notes: []string{
			"Window: for bench runs the window the client was set to; for served fetches the largest window the client advertised, to the nearest power of two (65532/65535 count as 65536).",
			"RX offload: the client's label rx_offload when set, else the server NIC's rx-checksumming.",
		},
	}
	if rows == nil {
		t.Data = []WindowOffloadRow{}
	}
	for _, o := range states {
		t.Columns = append(t.Columns, Column{Name: "RX csum " + offloadName(o), Key: "rx_csum_" + offloadName(o) + "_mbps"},
			Column{Name: "n", Key: "rx_csum_" + offloadName(o) + "_count"})
	}
	for _, r := range rows {
		cells := []string{strconv.FormatUint(uint64(r.Window), 10)}
		for _, o := range states {
			s := r.Cells[offloadName(o)]
			cells = append(cells, cellMbps(s), cellCount(s))
		}
		t.Rows = append(t.Rows, cells)
	}
	if skipped > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d completed fetch(es) without a window (TFTP, or no TCP_INFO) left out.", skipped))
	}
	return t
}

// DirectionMTURow is one row of the direction-mtu table: cells keyed by MTU
// ("1500", "9000", "unknown").
type DirectionMTURow struct {
	Proto     string           `json:"proto"`     // "TCP" or "UDP"
	Direction string           `json:"direction"` // "Tx" or "Rx", from the board's side
	Cells     map[string]*Stat `json:"cells"`
}

// protoClass maps a record's protocol to the TCP/UDP rows: HTTP is TCP,
// TFTP is UDP.
func protoClass(p string) string {
	switch strings.ToLower(p) {
	case "http", "https", "tcp":
		return "TCP"
	case "tftp", "udp":
		return "UDP"
	}
	return ""
}

// DirectionMTU is throughput by protocol and direction (rows TCP Tx, TCP
// Rx, UDP Tx, UDP Rx, as seen from the board: a served fetch is Rx) and MTU
// (columns, whatever MTUs occur), median Mbit/s per cell: the form of the
// Xilinx board tables. Counts are in the JSON rows.
func DirectionMTU(recs []record.Record) Table {
	type key struct {
		row string
		mtu int
	}
	groups := map[key][]float64{}
	var mtus []int
	for _, r := range recs {
		p := protoClass(r.Proto)
		if !measured(r) || p == "" {
			continue
		}
		d := "Rx"
		if strings.EqualFold(r.Direction, "tx") {
			d = "Tx"
		}
		k := key{p + " " + d, r.MTU}
		if !slices.Contains(mtus, r.MTU) {
			mtus = append(mtus, r.MTU)
		}
		groups[k] = append(groups[k], r.Mbps)
	}
	slices.Sort(mtus)
	if len(mtus) > 0 && mtus[0] == 0 { // unknown MTU last
		mtus = append(mtus[1:], 0)
	}
	mtuName := func(m int) string {
		if m == 0 {
			return "unknown"
		}
		return strconv.Itoa(m)
	}
	t := Table{
		Name:    TableDirectionMTU,
		Title:   "Throughput by direction and MTU (median Mbit/s; Tx and Rx as seen from the board)",
		Columns: []Column{{Name: "Traffic", Key: "traffic", Left: true}},
		Data:    []DirectionMTURow{},
		Empty:   noRecords,
		Notes:   []string{"HTTP counts as TCP, TFTP as UDP; a served fetch is Rx. Counts per cell: --format json."},
	}
	for _, m := range mtus {
		t.Columns = append(t.Columns, Column{Name: "MTU " + mtuName(m), Key: "mtu_" + mtuName(m) + "_mbps"})
	}
	if len(groups) == 0 {
		return t
	}
	var data []DirectionMTURow
	for _, p := range []string{"TCP", "UDP"} {
		for _, d := range []string{"Tx", "Rx"} {
			row := DirectionMTURow{Proto: p, Direction: d, Cells: map[string]*Stat{}}
			cells := []string{p + " " + d}
			for _, m := range mtus {
				s := stat(groups[key{p + " " + d, m}])
				if s != nil {
					row.Cells[mtuName(m)] = s
				}
				cells = append(cells, cellMbps(s))
			}
			data = append(data, row)
			t.Rows = append(t.Rows, cells)
		}
	}
	t.Data = data
	return t
}

// ClientRow is one row of the clients table.
type ClientRow struct {
	Client  string    `json:"client"` // MAC, else IP
	Host    string    `json:"host,omitempty"`
	IP      string    `json:"ip,omitempty"` // the last one seen
	Fetches int       `json:"fetches"`
	Failed  int       `json:"failed"`
	Last    time.Time `json:"last"`
	Median  float64   `json:"median_mbps"`
	Best    float64   `json:"best_mbps"`
}

// Clients is one row per client (by MAC, else IP): fetches (all outcomes),
// failed ones, the last fetch, median and best Mbit/s over completed
// fetches. Newest client first.
func Clients(recs []record.Record) Table {
	byKey := map[string]*ClientRow{}
	speeds := map[string][]float64{}
	for _, r := range recs {
		k := strings.ToLower(r.ClientMAC)
		if k == "" {
			k = r.ClientIP
		}
		if k == "" {
			k = "unknown"
		}
		c := byKey[k]
		if c == nil {
			c = &ClientRow{Client: k}
			byKey[k] = c
		}
		c.Fetches++
		if r.Outcome != "ok" {
			c.Failed++
		}
		if !r.Time.Before(c.Last) {
			c.Last = r.Time.UTC()
			if r.ClientIP != "" {
				c.IP = r.ClientIP
			}
			if r.Host != "" {
				c.Host = r.Host
			}
		}
		if c.Host == "" {
			c.Host = r.Host
		}
		if c.IP == "" {
			c.IP = r.ClientIP
		}
		if measured(r) {
			speeds[k] = append(speeds[k], r.Mbps)
		}
	}
	rows := []ClientRow{}
	for k, c := range byKey {
		if s := stat(speeds[k]); s != nil {
			c.Median, c.Best = s.Median, s.Best
		}
		rows = append(rows, *c)
	}
	slices.SortFunc(rows, func(a, b ClientRow) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return cmp.Compare(a.Client, b.Client)
	})
	t := Table{
		Name:  TableClients,
		Title: "Fetches per client (median and best Mbit/s over completed fetches)",
		Columns: []Column{{Name: "Client", Key: "client", Left: true}, {Name: "Host", Key: "host", Left: true},
			{Name: "IP", Key: "ip", Left: true}, {Name: "Fetches", Key: "fetches"}, {Name: "Failed", Key: "failed"},
			{Name: "Last (UTC)", Key: "last_utc", Left: true}, {Name: "Median Mbit/s", Key: "median_mbps"},
			{Name: "Best Mbit/s", Key: "best_mbps"}},
		Data:  rows,
		Empty: "No fetches match: serve some boots first, or widen the filters (--client, --file, --since, --label).",
	}
	for _, c := range rows {
		med, best := "", ""
		if c.Best > 0 {
			med, best = mbps(c.Median), mbps(c.Best)
		}
		t.Rows = append(t.Rows, []string{c.Client, c.Host, c.IP, strconv.Itoa(c.Fetches), strconv.Itoa(c.Failed),
			c.Last.Format("2006-01-02 15:04:05"), med, best})
	}
	return t
}

// LinkSpeedRow is one row of the linkspeed table.
type LinkSpeedRow struct {
	Link string `json:"link"`     // "1G", "100M", "10M", "unknown"
	Bps  int64  `json:"link_bps"` // 0 unknown
	Tx   *Stat  `json:"client_tx,omitempty"`
	Rx   *Stat  `json:"client_rx,omitempty"`
}

// linkBps is the link a fetch ran over, bits/s: the bench's tbf rate when
// set, else the NIC's link speed; 0 unknown (veth reports none).
func linkBps(r record.Record) int64 {
	if r.RateLimit > 0 {
		return r.RateLimit
	}
	return int64(r.LinkMbps) * 1e6
}

// LinkName writes a rate in bits/s the way link speeds are named: 1G,
// 100M, 10M, 2.5G, 512K.
func LinkName(bps int64) string {
	switch {
	case bps <= 0:
		return "unknown"
	case bps >= 1e9:
		return strconv.FormatFloat(float64(bps)/1e9, 'g', 4, 64) + "G"
	case bps >= 1e6:
		return strconv.FormatFloat(float64(bps)/1e6, 'g', 4, 64) + "M"
	case bps >= 1e3:
		return strconv.FormatFloat(float64(bps)/1e3, 'g', 4, 64) + "K"
	}
	return strconv.FormatInt(bps, 10)
}

// LinkSpeed is throughput by link speed (rows, fastest first: the bench's
// tbf rate, else the NIC's speed) and direction (client tx: board to
// server; client rx: server to board), median Mbit/s and count.
func LinkSpeed(recs []record.Record) Table {
	type key struct {
		bps int64
		tx  bool
	}
	groups := map[key][]float64{}
	var speeds []int64
	for _, r := range recs {
		if !measured(r) {
			continue
		}
		b := linkBps(r)
		if !slices.Contains(speeds, b) {
			speeds = append(speeds, b)
		}
		k := key{b, strings.EqualFold(r.Direction, "tx")}
		groups[k] = append(groups[k], r.Mbps)
	}
	// Fastest first; unknown (0) sorts last.
	slices.SortFunc(speeds, func(a, b int64) int { return cmp.Compare(b, a) })
	t := Table{
		Name:  TableLinkSpeed,
		Title: "Throughput by link speed and direction (median Mbit/s, n fetches)",
		Columns: []Column{{Name: "Link", Key: "link", Left: true}, {Name: "Client tx Mbit/s", Key: "tx_median_mbps"},
			{Name: "n", Key: "tx_count"}, {Name: "Client rx Mbit/s", Key: "rx_median_mbps"}, {Name: "n", Key: "rx_count"},
			{Name: "Rx % of link", Key: "rx_percent_of_link"}},
		Data:  []LinkSpeedRow{},
		Empty: noRecords,
		Notes: []string{
			"Link: the bench's tbf rate when set, else the server NIC's speed (veth reports none: unknown).",
			"Client tx: board to server; client rx: server to board (a served fetch).",
		},
	}
	var rows []LinkSpeedRow
	for _, b := range speeds {
		row := LinkSpeedRow{Link: LinkName(b), Bps: b, Tx: stat(groups[key{b, true}]), Rx: stat(groups[key{b, false}])}
		pct := ""
		if b > 0 && row.Rx != nil {
			pct = strconv.FormatFloat(row.Rx.Median*1e6/float64(b)*100, 'f', 0, 64) + "%"
		}
		rows = append(rows, row)
		t.Rows = append(t.Rows, []string{row.Link, cellMbps(row.Tx), cellCount(row.Tx), cellMbps(row.Rx), cellCount(row.Rx), pct})
	}
	if rows != nil {
		t.Data = rows
	}
	return t
}

// Fetches lists the records themselves, newest first: where the IDs for
// --intervals and --netperf come from.
func Fetches(recs []record.Record) Table {
	rows := slices.Clone(recs)
	slices.SortStableFunc(rows, func(a, b record.Record) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if rows == nil {
		rows = []record.Record{}
	}
	t := Table{
		Name:  TableFetches,
		Title: "Fetches, newest first",
		Columns: []Column{{Name: "ID", Key: "id"}, {Name: "Time (UTC)", Key: "time_utc", Left: true},
			{Name: "Client", Key: "client", Left: true}, {Name: "Host", Key: "host", Left: true},
			{Name: "Proto", Key: "proto", Left: true}, {Name: "File", Key: "file", Left: true}, {Name: "Bytes", Key: "bytes"},
			{Name: "Mbit/s", Key: "mbps"}, {Name: "Outcome", Key: "outcome", Left: true}},
		Data:  rows,
		Empty: "No fetches match: serve some boots first, or widen the filters (--client, --file, --since, --label).",
	}
	for _, r := range rows {
		client := r.ClientMAC
		if client == "" {
			client = r.ClientIP
		}
		t.Rows = append(t.Rows, []string{strconv.FormatInt(r.ID, 10), r.Time.UTC().Format("2006-01-02 15:04:05"), client,
			r.Host, r.Proto, r.File, strconv.FormatInt(r.Bytes, 10), mbps(r.Mbps), r.Outcome})
	}
	return t
}
