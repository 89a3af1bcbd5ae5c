package report

import (
	"cmp"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/measure"
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

// Build makes the named table from recs with the default Options.
func Build(name string, recs []record.Record) (Table, error) {
	return BuildWith(name, recs, Options{})
}

// BuildWith makes the named table from recs.
func BuildWith(name string, recs []record.Record, o Options) (Table, error) {
	switch name {
	case TableWindowOffload:
		return windowOffloadTable(recs, o), nil
	case TableDirectionMTU:
		return directionMTU(recs, o), nil
	case TableClients:
		return clients(recs, o), nil
	case TableLinkSpeed:
		return linkSpeed(recs, o), nil
	case TableFetches:
		return Fetches(recs), nil
	case TableTFTP:
		return tftpTable(recs, o), nil
	case TableServers:
		return servers(recs, o), nil
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
	return &Stat{Median: measure.Median(mbps), Best: slices.Max(mbps), Count: len(mbps)}
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

// WindowOffloadRow is one row of the window-offload table: its Setup, the
// window, and cells keyed by offload state "off", "on", "unknown".
type WindowOffloadRow struct {
	Setup
	Window uint32 `json:"window"` // 0 for the auto row
	// Auto marks the row of bench runs with --window auto (autotuned).
	Auto  bool             `json:"auto,omitempty"`
	Cells map[string]*Stat `json:"cells"`
}

// rowWindow is the window a record counts under: for bench runs the window
// the client was set to (the study's TCP_MAX_WINDOW_SIZE, here the SO_RCVBUF
// request), exactly; for served fetches the largest window the client
// advertised, bucketed by WindowBucket. 0: no window known.
func rowWindow(r record.Record) uint32 {
	if r.WndRequested > 0 {
		return r.WndRequested
	}
	if autoWindow(r) {
		return windowAuto
	}
	return WindowBucket(r.WndMax)
}

// windowAuto is the row of bench runs that left the window to the kernel
// (bench --window auto): autotuning grows it to different sizes with
// offload on and off, so bucketing what the client advertised would put the
// two columns in different rows that never compare.
const windowAuto = math.MaxUint32

// autoWindow: a bench run with --window auto (no SO_RCVBUF set).
func autoWindow(r record.Record) bool {
	return r.WndRequested == 0 && r.Source == "bench" && r.Labels["window"] == "auto"
}

// windowOffload groups measured fetches with a known window by Setup,
// bucket and offload; it is shared by the table and the chart.
func windowOffload(recs []record.Record, c *counter, sp splitter) (rows []WindowOffloadRow, states []record.Offload, skipped int) {
	type key struct {
		st Setup
		b  uint32
	}
	groups := map[key]map[record.Offload][]float64{}
	seen := map[record.Offload]bool{}
	for i := range recs {
		r := recs[i]
		if !c.use(&r) {
			continue
		}
		b := rowWindow(r)
		if b == 0 {
			skipped++
			continue
		}
		o := RxOffload(r)
		k := key{sp.of(&r), b}
		if groups[k] == nil {
			groups[k] = map[record.Offload][]float64{}
		}
		groups[k][o] = append(groups[k][o], r.Mbps)
		seen[o] = true
	}
	for _, o := range offloadOrder {
		// Off and on are always columns, as in the study; unknown only
		// when some fetch has it.
		if o != record.OffloadUnknown || seen[o] {
			states = append(states, o)
		}
	}
	for k, byOff := range groups {
		row := WindowOffloadRow{Setup: k.st, Window: k.b, Cells: map[string]*Stat{}}
		if k.b == windowAuto {
			row.Window, row.Auto = 0, true
		}
		for o, v := range byOff {
			row.Cells[offloadName(o)] = stat(v)
		}
		rows = append(rows, row)
	}
	// By setup; auto last.
	slices.SortFunc(rows, func(a, b WindowOffloadRow) int {
		if c := compareSetups(a.Setup, b.Setup); c != 0 {
			return c
		}
		if a.Auto != b.Auto {
			if a.Auto {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Window, b.Window)
	})
	return rows, states, skipped
}

// WindowOffload is throughput by the window the client advertised (rows,
// bucketed by WindowBucket) and RX checksum offload (columns, RxOffload):
// median Mbit/s and count per cell, the form of the 2010 gPXE study (500 MB
// HTTP imgfetch by TCP_MAX_WINDOW_SIZE, with and without RX checksum
// offload), a block of rows per Setup. Fetches without a window (TFTP, no
// TCP_INFO) are left out and counted in a note.
func WindowOffload(recs []record.Record) Table { return windowOffloadTable(recs, Options{}) }

func windowOffloadTable(recs []record.Record, o Options) Table {
	c := newCounter(o, throughputKinds)
	sp := newSplitter(o)
	rows, states, skipped := windowOffload(recs, c, sp)
	t := Table{
		Name:    TableWindowOffload,
		Title:   "Throughput by client window and RX checksum offload (median Mbit/s, n fetches)",
		Columns: append(sp.columns(), Column{Name: "Window (bytes)", Key: "window"}),
		Data:    rows,
		Empty:   noRecords,
		Notes: []string{
			"Window: for bench runs the window the client was set to (auto: left to the kernel's autotuning, one row whatever it grew to); for served fetches the largest window the client advertised, to the nearest power of two (65532/65535 count as 65536).",
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
		cells := append(sp.cells(r.Setup), strconv.FormatUint(uint64(r.Window), 10))
		if r.Auto {
			cells[len(cells)-1] = "auto" // text; CSV's window is a number or empty
		}
		for _, o := range states {
			s := r.Cells[offloadName(o)]
			cells = append(cells, cellMbps(s), cellCount(s))
		}
		t.Rows = append(t.Rows, cells)
	}
	if slices.ContainsFunc(rows, func(r WindowOffloadRow) bool { return r.Auto }) {
		// CSV: the window column holds numbers; auto is a column of its own.
		wi := len(sp.columns())
		t.Columns[wi].TextOnly = true
		t.Columns = slices.Insert(t.Columns, wi+1, Column{Name: "Window", Key: "window", CSVOnly: true},
			Column{Name: "Auto", Key: "window_auto", CSVOnly: true, Left: true})
		for i, r := range rows {
			w, auto := strconv.FormatUint(uint64(r.Window), 10), ""
			if r.Auto {
				w, auto = "", "auto"
			}
			t.Rows[i] = slices.Insert(t.Rows[i], wi+1, w, auto)
		}
	}
	if skipped > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d completed fetch(es) without a window (TFTP, or no TCP_INFO) left out.", skipped))
	}
	addSplitNote(&t, sp, len(rows) > 0)
	c.addNote(&t)
	return t
}

// addSplitNote says what the rows are split by (when there are rows).
func addSplitNote(t *Table, sp splitter, rows bool) {
	if n := sp.note(); n != "" && rows {
		t.Notes = append(t.Notes, n)
	}
}

// DirectionMTURow is one row of the direction-mtu table: its Setup, the
// traffic, and cells keyed by MTU ("1500", "9000", "unknown").
type DirectionMTURow struct {
	Setup
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

// classed yields the records of recs that c counts and that have a
// protocol class (protoClass), with it.
func (c *counter) classed(recs []record.Record) iter.Seq2[string, *record.Record] {
	return func(yield func(string, *record.Record) bool) {
		for i := range recs {
			r := recs[i]
			if p := protoClass(r.Proto); p != "" && c.use(&r) && !yield(p, &r) {
				return
			}
		}
	}
}

// DirectionMTU is throughput by protocol and direction (rows TCP Tx, TCP
// Rx, UDP Tx, UDP Rx, as seen from the board: a served fetch is Rx, a
// block of rows per Setup but its MTU) and MTU (columns, whatever MTUs
// occur), median Mbit/s and count per cell: the form of the Xilinx board
// tables.
func DirectionMTU(recs []record.Record) Table { return directionMTU(recs, Options{}) }

func directionMTU(recs []record.Record, o Options) Table {
	type key struct {
		st  Setup
		row string
		mtu int
	}
	groups := map[key][]float64{}
	var mtus []int
	var setups []Setup
	c := newCounter(o, throughputKinds)
	sp := newSplitter(o, SplitMTU)
	for p, r := range c.classed(recs) {
		d := "Rx"
		if strings.EqualFold(r.Direction, "tx") {
			d = "Tx"
		}
		st := sp.of(r)
		k := key{st, p + " " + d, r.MTU}
		if !slices.Contains(mtus, r.MTU) {
			mtus = append(mtus, r.MTU)
		}
		if !slices.Contains(setups, st) {
			setups = append(setups, st)
		}
		groups[k] = append(groups[k], r.Mbps)
	}
	slices.SortFunc(mtus, compareMTU) // unknown MTU last
	slices.SortFunc(setups, compareSetups)
	mtuName := func(m int) string {
		if m == 0 {
			return "unknown"
		}
		return strconv.Itoa(m)
	}
	t := Table{
		Name:    TableDirectionMTU,
		Title:   "Throughput by direction and MTU (median Mbit/s, n fetches; Tx and Rx as seen from the board)",
		Columns: append(sp.columns(), Column{Name: "Traffic", Key: "traffic", Left: true}),
		Data:    []DirectionMTURow{},
		Empty:   noRecords,
		Notes:   []string{"HTTP counts as TCP, TFTP as UDP; a served fetch is Rx."},
	}
	for _, m := range mtus {
		t.Columns = append(t.Columns, Column{Name: "MTU " + mtuName(m), Key: "mtu_" + mtuName(m) + "_mbps"},
			Column{Name: "n", Key: "mtu_" + mtuName(m) + "_count"})
	}
	var data []DirectionMTURow
	for _, st := range setups {
		for _, p := range []string{"TCP", "UDP"} {
			for _, d := range []string{"Tx", "Rx"} {
				row := DirectionMTURow{Setup: st, Proto: p, Direction: d, Cells: map[string]*Stat{}}
				cells := append(sp.cells(st), p+" "+d)
				for _, m := range mtus {
					s := stat(groups[key{st, p + " " + d, m}])
					if s != nil {
						row.Cells[mtuName(m)] = s
					}
					cells = append(cells, cellMbps(s), cellCount(s))
				}
				if len(row.Cells) == 0 {
					continue // no such traffic in this setup
				}
				data = append(data, row)
				t.Rows = append(t.Rows, cells)
			}
		}
	}
	if data != nil {
		t.Data = data
	}
	addSplitNote(&t, sp, data != nil)
	c.addNote(&t)
	return t
}

// ClientRow is one row of the clients table: a client's fetches over one
// Setup.
type ClientRow struct {
	Client string `json:"client"` // MAC, else IP
	Host   string `json:"host,omitempty"`
	IP     string `json:"ip,omitempty"` // the last one seen
	Setup
	// Proto is the protocol of the row's fetches (tftp, http, tcp, udp):
	// a board's TFTP and HTTP fetches are two rows, no median mixes them.
	Proto string `json:"proto"`
	Counts
}

// Counts are a row's fetches in the clients and servers tables.
type Counts struct {
	Fetches int `json:"fetches"`
	Failed  int `json:"failed"`
	// Probes are lookups the loader expected to miss (record.KindProbe:
	// the pxelinux.cfg chain, GRUB's .lst files, U-Boot's dtb probes):
	// not failures.
	Probes int       `json:"probes"`
	Last   time.Time `json:"last"`
	Median float64   `json:"median_mbps"`
	Best   float64   `json:"best_mbps"`
	Count  int       `json:"count"` // fetches in the median
}

// add counts r: a fetch, and a failed one unless it completed or was a
// probe. It reports whether r is the newest so far.
func (c *Counts) add(r *record.Record) (newest bool) {
	c.Fetches++
	switch {
	case r.Outcome == "ok":
	case record.KindOf(r) == record.KindProbe:
		c.Probes++
	default:
		c.Failed++
	}
	if newest = !r.Time.Before(c.Last); newest {
		c.Last = r.Time.UTC()
	}
	return newest
}

// speeds sets the median, best and count from the Mbit/s counted.
func (c *Counts) speeds(mbps []float64) {
	if s := stat(mbps); s != nil {
		c.Median, c.Best, c.Count = s.Median, s.Best, s.Count
	}
}

// countColumns are the columns of Counts.cells: the Fetches, Failed and
// Probes ones, and the Last, Median, Best and n ones.
func countColumns() (counts, speeds []Column) {
	return []Column{{Name: "Fetches", Key: "fetches"}, {Name: "Failed", Key: "failed"}, {Name: "Probes", Key: "probes"}},
		[]Column{{Name: "Last (UTC)", Key: "last_utc", Left: true}, {Name: "Median Mbit/s", Key: "median_mbps"},
			{Name: "Best Mbit/s", Key: "best_mbps"}, {Name: "n", Key: "count"}}
}

// cells are the Fetches, Failed and Probes cells, and the Last, Median,
// Best and n ones.
func (c *Counts) cells() (counts, speeds []string) {
	med, best, n := "", "", ""
	if c.Count > 0 {
		med, best, n = mbps(c.Median), mbps(c.Best), strconv.Itoa(c.Count)
	}
	return []string{strconv.Itoa(c.Fetches), strconv.Itoa(c.Failed), strconv.Itoa(c.Probes)},
		[]string{c.Last.Format("2006-01-02 15:04:05"), med, best, n}
}

// Clients is one row per client (by MAC, else IP), Setup and protocol: fetches
// (all outcomes), failed ones, the probes a loader expected to miss (not
// failures), the last fetch, median and best Mbit/s over completed
// fetches and their count. Newest client first.
func Clients(recs []record.Record) Table { return clients(recs, Options{}) }

func clients(recs []record.Record, o Options) Table {
	type key struct {
		client, proto string
		st            Setup
	}
	byKey := map[key]*ClientRow{}
	speeds := map[key][]float64{}
	cnt := newCounter(o, throughputKinds)
	sp := newSplitter(o)
	for i := range recs {
		r := recs[i]
		id := strings.ToLower(r.ClientMAC)
		if id == "" {
			id = r.ClientIP
		}
		if id == "" {
			id = "unknown"
		}
		k := key{id, protoOf(&r), sp.of(&r)}
		c := byKey[k]
		if c == nil {
			c = &ClientRow{Client: id, Setup: k.st, Proto: k.proto}
			byKey[k] = c
		}
		if c.add(&r) {
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
		if cnt.use(&r) {
			speeds[k] = append(speeds[k], r.Mbps)
		}
	}
	rows := []ClientRow{}
	for k, c := range byKey {
		c.speeds(speeds[k])
		rows = append(rows, *c)
	}
	slices.SortFunc(rows, func(a, b ClientRow) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Client, b.Client), compareSetups(a.Setup, b.Setup), cmp.Compare(a.Proto, b.Proto))
	})
	countCols, speedCols := countColumns()
	cols := append(append([]Column{{Name: "Client", Key: "client", Left: true}, {Name: "Host", Key: "host", Left: true},
		{Name: "IP", Key: "ip", Left: true}}, sp.columns()...), Column{Name: "Proto", Key: "proto", Left: true})
	t := Table{
		Name:    TableClients,
		Title:   "Fetches per client and protocol (fetches of every kind; median and best Mbit/s over n completed " + strings.Join(cnt.kinds, " and ") + " fetches)",
		Columns: append(append(cols, countCols...), speedCols...),
		Data:    rows,
		Empty:   "No fetches match: serve some boots first, or widen the filters (--client, --file, --since, --label).",
	}
	probes := false
	for _, c := range rows {
		counts, speeds := c.cells()
		cells := append(append(append([]string{c.Client, c.Host, c.IP}, sp.cells(c.Setup)...), c.Proto), counts...)
		t.Rows = append(t.Rows, append(cells, speeds...))
		probes = probes || c.Probes > 0
	}
	if probes {
		t.Notes = append(t.Notes, probesNote)
	}
	addSplitNote(&t, sp, len(rows) > 0)
	cnt.addNote(&t)
	return t
}

// protoOf is the protocol a clients or servers row keeps apart: tftp,
// http, tcp, udp ("unknown" when none was recorded).
func protoOf(r *record.Record) string {
	if r.Proto == "" {
		return "unknown"
	}
	return strings.ToLower(r.Proto)
}

// probesNote explains the Probes column.
const probesNote = "Probes: lookups the loader expects to miss (the pxelinux.cfg chain: UUID, 01-MAC, hex IP prefixes, default; GRUB's grub.cfg-* and .lst files; U-Boot's boot.scr and dtb/ probes), not found and not failures; list them with --table fetches --kind probe."

// LinkSpeedRow is one row of the linkspeed table.
type LinkSpeedRow struct {
	Setup
	Proto string `json:"proto"`    // "TCP" (HTTP too) or "UDP" (TFTP too)
	Link  string `json:"link"`     // "1G", "100M tbf", "speed unknown (veth)"
	Bps   int64  `json:"link_bps"` // 0 unknown
	// Note says where the speed comes from (tbf, nic) or why it is
	// unknown ("veth": a virtual NIC's speed is nominal; "none reported").
	Note string `json:"link_note"`
	Tx   *Stat  `json:"client_tx,omitempty"`
	Rx   *Stat  `json:"client_rx,omitempty"`
	// RxPercent is the median rx rate in % of the link; 0 when its speed
	// is unknown.
	RxPercent float64 `json:"rx_percent_of_link,omitempty"`
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

// LinkSpeed is throughput by link (rows, fastest first: the bench's tbf
// rate, else the NIC's speed, else unknown and why; LinkOf), TCP or UDP,
// and direction
// (client tx: board to server; client rx: server to board), median Mbit/s
// and count, a block of rows per Setup but its speed. The rx median in %
// of the link only where its speed is known.
func LinkSpeed(recs []record.Record) Table { return linkSpeed(recs, Options{}) }

func linkSpeed(recs []record.Record, o Options) Table {
	type key struct {
		st    Setup
		link  Link
		proto string
	}
	type dirKey struct {
		key
		tx bool
	}
	groups := map[dirKey][]float64{}
	var keys []key
	c := newCounter(o, throughputKinds)
	sp := newSplitter(o, SplitSpeed)
	for p, r := range c.classed(recs) {
		k := key{sp.of(r), LinkOf(r), p}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		dk := dirKey{k, strings.EqualFold(r.Direction, "tx")}
		groups[dk] = append(groups[dk], r.Mbps)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(compareSetups(a.st, b.st), cmp.Compare(b.link.Mbps, a.link.Mbps), cmp.Compare(a.link.Note, b.link.Note),
			cmp.Compare(a.proto, b.proto))
	})
	t := Table{
		Name:  TableLinkSpeed,
		Title: "Throughput by link speed and direction (median Mbit/s, n fetches)",
		Columns: append(sp.columns(), Column{Name: "Link", Key: "link", Left: true, TextOnly: true},
			Column{Name: "Link Mbit/s", Key: "link_mbps", CSVOnly: true}, Column{Name: "Link note", Key: "link_note", Left: true, CSVOnly: true},
			Column{Name: "Traffic", Key: "traffic", Left: true},
			Column{Name: "Client tx Mbit/s", Key: "tx_median_mbps"}, Column{Name: "n", Key: "tx_count"},
			Column{Name: "Client rx Mbit/s", Key: "rx_median_mbps"}, Column{Name: "n", Key: "rx_count"},
			Column{Name: "Rx % of link", Key: "rx_percent_of_link", Unit: "%"}),
		Data:  []LinkSpeedRow{},
		Empty: noRecords,
		Notes: []string{
			"Link: the bench's tbf rate when set, else the speed the server NIC's driver reports; speed unknown when it reports none (loopback) or only a nominal one (a virtual NIC: veth says 10G, tun 10M), so no % of it; unverified: a record of a pxeperf that did not record the driver, no % either.",
			"Client tx: board to server; client rx: server to board (a served fetch). HTTP counts as TCP, TFTP as UDP.",
		},
	}
	var rows []LinkSpeedRow
	for _, k := range keys {
		row := LinkSpeedRow{Setup: k.st, Proto: k.proto, Link: k.link.String(), Bps: int64(k.link.Mbps * 1e6), Note: k.link.Note,
			Tx: stat(groups[dirKey{k, true}]), Rx: stat(groups[dirKey{k, false}])}
		pct := ""
		if k.link.Known() && row.Rx != nil {
			row.RxPercent = math.Round(row.Rx.Median / k.link.Mbps * 100)
			pct = strconv.FormatFloat(row.RxPercent, 'f', 0, 64)
		}
		rows = append(rows, row)
		t.Rows = append(t.Rows, append(sp.cells(k.st), row.Link, num(k.link.Mbps), k.link.Note, k.proto,
			cellMbps(row.Tx), cellCount(row.Tx), cellMbps(row.Rx), cellCount(row.Rx), pct))
	}
	if rows != nil {
		t.Data = rows
	}
	addSplitNote(&t, sp, rows != nil)
	c.addNote(&t)
	return t
}

// Fetches lists the records themselves, newest first: where the IDs for
// --intervals and --netperf come from.
func Fetches(recs []record.Record) Table {
	rows := slices.Clone(recs)
	for i := range rows {
		rows[i].Kind = record.KindOf(&rows[i])
	}
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
			{Name: "Proto", Key: "proto", Left: true}, {Name: "File", Key: "file", Left: true}, {Name: "Kind", Key: "kind", Left: true},
			{Name: "Bytes", Key: "bytes"},
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
			r.Host, r.Proto, r.File, r.Kind, strconv.FormatInt(r.Bytes, 10), mbps(r.Mbps), r.Outcome})
	}
	return t
}
