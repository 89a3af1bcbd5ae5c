package report

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pxeperf/pxeperf/netstate"
	"github.com/pxeperf/pxeperf/record"
)

// What a throughput cell is split by unless Options.Merge says otherwise:
// no lab puts a served iPXE fetch under TCG and an iperf3 test over veth,
// or a 1500- and a 9000-byte MTU, in one median.
const (
	SplitSource = "source" // record Source: serve (served boot fetches), bench, iperf3, iperf2
	SplitIface  = "iface"  // the interface the fetch went through
	SplitMTU    = "mtu"
	SplitSpeed  = "speed" // the link: the bench's tbf rate, a NIC's speed, or unknown (and why)
)

// Splits lists the split keys in the order of their columns.
var Splits = []string{SplitSource, SplitIface, SplitMTU, SplitSpeed}

// ParseMerge reads a --merge value: a comma list of split keys (source,
// iface, mtu, speed), "link" for iface, mtu and speed, "all" for every
// one; "" or "none" merges nothing.
func ParseMerge(s string) ([]string, error) {
	var out []string
	add := func(ks ...string) {
		for _, k := range ks {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	for _, k := range strings.Split(s, ",") {
		switch k = strings.ToLower(strings.TrimSpace(k)); k {
		case "", "none":
		case "all":
			add(Splits...)
		case "link":
			add(SplitIface, SplitMTU, SplitSpeed)
		case SplitSource, SplitIface, SplitMTU, SplitSpeed:
			add(k)
		default:
			return nil, fmt.Errorf("merge %q: use source, iface, mtu, speed, link (iface, mtu and speed) or all, or a comma list of them", k)
		}
	}
	return out, nil
}

// Link is the link a fetch ran over, as far as it is known.
type Link struct {
	// Mbps is the link's rate: the bench's tbf rate when set, else the
	// NIC's speed; 0 unknown.
	Mbps float64
	// Note says where Mbps comes from: "tbf", "nic" (a NIC's driver), or
	// "unverified" (a record written before the driver was recorded: the
	// speed may be a virtual NIC's nominal one); or, when Mbps is 0, why
	// the speed is unknown: the driver of a virtual NIC, whose speed is
	// nominal ("veth": it says 10000 whatever carries the frames), or
	// "none reported" (loopback, a driver with no speed).
	Note string
}

// LinkOf is the link r ran over. A virtual NIC's nominal speed is no
// link speed (netstate.NominalSpeed). For records written before the
// driver was recorded, a bench record without a tbf rate ran over the
// testbed's veth pair and an interface named veth* is one; any other
// speed is shown, unverified, with no percentage of it.
func LinkOf(r *record.Record) Link {
	if r.RateLimit > 0 {
		return Link{Mbps: float64(r.RateLimit) / 1e6, Note: "tbf"}
	}
	drv := r.LinkDriver
	if drv == "" && (strings.HasPrefix(r.Iface, "veth") || r.Source == "bench" && r.Labels["remote"] == "") {
		drv = "veth"
	}
	switch {
	case r.LinkMbps > 0 && netstate.NominalSpeed(drv):
		return Link{Note: drv}
	case r.LinkMbps > 0 && drv == "":
		return Link{Mbps: float64(r.LinkMbps), Note: "unverified"}
	case r.LinkMbps > 0:
		return Link{Mbps: float64(r.LinkMbps), Note: "nic"}
	}
	return Link{Note: "none reported"}
}

// Known reports whether the link's speed is known: a tbf rate, or the
// speed of a NIC whose driver was recorded and is not a virtual one's.
func (l Link) Known() bool { return l.Mbps > 0 && (l.Note == "tbf" || l.Note == "nic") }

// String names the link the way link speeds are named (1G, 100M tbf,
// 10G unverified), or says that its speed is unknown and why.
func (l Link) String() string {
	if l.Mbps <= 0 {
		return "speed unknown (" + l.Note + ")"
	}
	s := LinkName(int64(l.Mbps * 1e6))
	if l.Note != "nic" {
		s += " " + l.Note
	}
	return s
}

// Setup is what a row's fetches have in common, by the split keys the
// table uses; a merged key is empty. JSON rows carry it inline.
type Setup struct {
	Source   string  `json:"source,omitempty"`
	Iface    string  `json:"iface,omitempty"`
	MTU      int     `json:"mtu,omitempty"`
	LinkMbps float64 `json:"link_mbps,omitempty"` // 0: unknown, or merged
	LinkNote string  `json:"link_note,omitempty"` // tbf, nic, or why the speed is unknown
}

func (s Setup) link() Link { return Link{Mbps: s.LinkMbps, Note: s.LinkNote} }

// splitter puts records in Setups by the split keys a table uses: all of
// them but the merged ones and the table's own axes (direction-mtu has MTU
// columns, linkspeed a row per link).
type splitter struct {
	keys []string
}

func newSplitter(o Options, axes ...string) splitter {
	var s splitter
	for _, k := range Splits {
		if !slices.Contains(o.Merge, k) && !slices.Contains(axes, k) {
			s.keys = append(s.keys, k)
		}
	}
	return s
}

func (s splitter) has(k string) bool { return slices.Contains(s.keys, k) }

// of is r's Setup.
func (s splitter) of(r *record.Record) Setup {
	var st Setup
	if s.has(SplitSource) {
		st.Source = r.Source
		if st.Source == "" {
			st.Source = "unknown"
		}
	}
	if s.has(SplitIface) {
		st.Iface = r.Iface
	}
	if s.has(SplitMTU) {
		st.MTU = r.MTU
	}
	if s.has(SplitSpeed) {
		l := LinkOf(r)
		st.LinkMbps, st.LinkNote = l.Mbps, l.Note
	}
	return st
}

// columns are the leading columns naming a row's Setup: text shows the
// link as one cell (1G, 100M tbf, speed unknown (veth)), CSV its speed as
// a number and the note beside it.
func (s splitter) columns() []Column {
	var cols []Column
	for _, k := range s.keys {
		switch k {
		case SplitSource:
			cols = append(cols, Column{Name: "Source", Key: "source", Left: true})
		case SplitIface:
			cols = append(cols, Column{Name: "Iface", Key: "iface", Left: true})
		case SplitMTU:
			cols = append(cols, Column{Name: "MTU", Key: "mtu"})
		case SplitSpeed:
			cols = append(cols, Column{Name: "Link", Key: "link", Left: true, TextOnly: true},
				Column{Name: "Link Mbit/s", Key: "link_mbps", CSVOnly: true},
				Column{Name: "Link note", Key: "link_note", Left: true, CSVOnly: true})
		}
	}
	return cols
}

// cells are st's cells of columns.
func (s splitter) cells(st Setup) []string {
	var c []string
	for _, k := range s.keys {
		switch k {
		case SplitSource:
			c = append(c, st.Source)
		case SplitIface:
			c = append(c, st.Iface)
		case SplitMTU:
			c = append(c, mtuCell(st.MTU))
		case SplitSpeed:
			c = append(c, st.link().String(), num(st.LinkMbps), st.LinkNote)
		}
	}
	return c
}

// note says what the rows are split by, and how to merge them.
func (s splitter) note() string {
	if len(s.keys) == 0 {
		return ""
	}
	return "Rows are split by " + strings.Join(s.keys, ", ") + ": a cell never mixes them (--merge " + s.keys[0] +
		", or link, or all, lets rows share them)."
}

// sourceOrder puts served fetches first, then the bench, then the boards'
// own iperf tests.
var sourceOrder = []string{"serve", "bench", "iperf3", "iperf2"}

func rank(s string) int {
	if i := slices.Index(sourceOrder, s); i >= 0 {
		return i
	}
	return len(sourceOrder)
}

// compareSetups orders Setups: by source (sourceOrder), interface, MTU
// (unknown last), then the fastest link first (unknown last).
func compareSetups(a, b Setup) int {
	return cmp.Or(cmp.Compare(rank(a.Source), rank(b.Source)), cmp.Compare(a.Source, b.Source),
		cmp.Compare(a.Iface, b.Iface), compareMTU(a.MTU, b.MTU),
		cmp.Compare(b.LinkMbps, a.LinkMbps), cmp.Compare(a.LinkNote, b.LinkNote))
}

func compareMTU(a, b int) int {
	if (a == 0) != (b == 0) {
		if a == 0 {
			return 1
		}
		return -1
	}
	return cmp.Compare(a, b)
}

func mtuCell(m int) string {
	if m == 0 {
		return ""
	}
	return strconv.Itoa(m)
}

// num is a number cell: "" for 0 (none).
func num(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
