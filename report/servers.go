package report

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/pxeperf/pxeperf/record"
)

// TableServers groups fetches by the server that measured them.
const TableServers = "servers"

// ServerRow is one row of the servers table: a server's fetches over one
// Setup.
type ServerRow struct {
	Server string `json:"server"`
	Site   string `json:"site,omitempty"`
	Setup
	Proto   string `json:"proto"` // tftp, http, tcp, udp: one row each (protoOf)
	Clients int    `json:"clients"`
	Counts
}

// Servers is one row per server and site (server.name, server.site: the
// lab segments of a store many pxeperf servers share), Setup and protocol. Fetches
// (all outcomes), failed ones, probes, distinct clients, the last fetch,
// median and best Mbit/s over completed fetches and their count; ordered
// by site, then server.
func Servers(recs []record.Record) Table { return servers(recs, Options{}) }

func servers(recs []record.Record, o Options) Table {
	type key struct {
		server, site, proto string
		st                  Setup
	}
	sp := newSplitter(o)
	rows := map[key]*ServerRow{}
	speeds := map[key][]float64{}
	clients := map[key]map[string]bool{}
	for _, r := range recs {
		k := key{r.Server, r.Site, protoOf(&r), sp.of(&r)}
		if k.server == "" {
			k.server = "unknown"
		}
		row := rows[k]
		if row == nil {
			row = &ServerRow{Server: k.server, Site: k.site, Setup: k.st, Proto: k.proto}
			rows[k], clients[k] = row, map[string]bool{}
		}
		row.add(&r)
		c := r.ClientMAC
		if c == "" {
			c = r.ClientIP
		}
		clients[k][c] = true
		if measured(r) {
			speeds[k] = append(speeds[k], r.Mbps)
		}
	}
	out := []ServerRow{}
	for k, row := range rows {
		row.Clients = len(clients[k])
		row.speeds(speeds[k])
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b ServerRow) int {
		return cmp.Or(cmp.Compare(a.Site, b.Site), cmp.Compare(a.Server, b.Server), compareSetups(a.Setup, b.Setup), cmp.Compare(a.Proto, b.Proto))
	})
	countCols, speedCols := countColumns()
	cols := append(append([]Column{{Name: "Site", Key: "site", Left: true}, {Name: "Server", Key: "server", Left: true}}, sp.columns()...),
		Column{Name: "Proto", Key: "proto", Left: true})
	t := Table{
		Name:    TableServers,
		Title:   "Fetches per server, site and protocol (median and best Mbit/s over n completed fetches)",
		Columns: append(append(append(cols, countCols...), Column{Name: "Clients", Key: "clients"}), speedCols...),
		Data:    out,
		Empty:   "No fetches match: serve some boots first, or widen the filters (--server, --site, --since, --label).",
	}
	probes := false
	for _, r := range out {
		counts, speeds := r.cells()
		cells := append(append(append([]string{r.Site, r.Server}, sp.cells(r.Setup)...), r.Proto), counts...)
		t.Rows = append(t.Rows, append(append(cells, strconv.Itoa(r.Clients)), speeds...))
		probes = probes || r.Probes > 0
	}
	if probes {
		t.Notes = append(t.Notes, probesNote)
	}
	addSplitNote(&t, sp, len(out) > 0)
	return t
}
