package report

import (
	"cmp"
	"slices"
	"strconv"
	"time"

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
	Fetches int `json:"fetches"`
	Failed  int `json:"failed"`
	// Probes are lookups the loader expected to miss (record.KindProbe):
	// not failures.
	Probes  int       `json:"probes"`
	Clients int       `json:"clients"`
	Last    time.Time `json:"last"`
	Median  float64   `json:"median_mbps"`
	Best    float64   `json:"best_mbps"`
	Count   int       `json:"count"` // fetches in the median
}

// Servers is one row per server and site (server.name, server.site: the
// lab segments of a store many pxeperf servers share) and Setup. Fetches
// (all outcomes), failed ones, probes, distinct clients, the last fetch,
// median and best Mbit/s over completed fetches and their count; ordered
// by site, then server.
func Servers(recs []record.Record) Table { return servers(recs, Options{}) }

func servers(recs []record.Record, o Options) Table {
	type key struct {
		server, site string
		st           Setup
	}
	sp := newSplitter(o)
	rows := map[key]*ServerRow{}
	speeds := map[key][]float64{}
	clients := map[key]map[string]bool{}
	for _, r := range recs {
		k := key{r.Server, r.Site, sp.of(&r)}
		if k.server == "" {
			k.server = "unknown"
		}
		row := rows[k]
		if row == nil {
			row = &ServerRow{Server: k.server, Site: k.site, Setup: k.st}
			rows[k], clients[k] = row, map[string]bool{}
		}
		row.Fetches++
		switch {
		case r.Outcome == "ok":
		case record.KindOf(&r) == record.KindProbe:
			row.Probes++
		default:
			row.Failed++
		}
		if r.Time.After(row.Last) {
			row.Last = r.Time.UTC()
		}
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
		if s := stat(speeds[k]); s != nil {
			row.Median, row.Best, row.Count = s.Median, s.Best, s.Count
		}
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b ServerRow) int {
		return cmp.Or(cmp.Compare(a.Site, b.Site), cmp.Compare(a.Server, b.Server), compareSetups(a.Setup, b.Setup))
	})
	t := Table{
		Name:  TableServers,
		Title: "Fetches per server and site (median and best Mbit/s over n completed fetches)",
		Columns: append(append([]Column{{Name: "Site", Key: "site", Left: true}, {Name: "Server", Key: "server", Left: true}}, sp.columns()...),
			Column{Name: "Fetches", Key: "fetches"}, Column{Name: "Failed", Key: "failed"}, Column{Name: "Probes", Key: "probes"},
			Column{Name: "Clients", Key: "clients"},
			Column{Name: "Last (UTC)", Key: "last_utc", Left: true}, Column{Name: "Median Mbit/s", Key: "median_mbps"},
			Column{Name: "Best Mbit/s", Key: "best_mbps"}, Column{Name: "n", Key: "count"}),
		Data:  out,
		Empty: "No fetches match: serve some boots first, or widen the filters (--server, --site, --since, --label).",
	}
	probes := false
	for _, r := range out {
		med, best, n := "", "", ""
		if r.Count > 0 {
			med, best, n = mbps(r.Median), mbps(r.Best), strconv.Itoa(r.Count)
		}
		cells := append([]string{r.Site, r.Server}, sp.cells(r.Setup)...)
		t.Rows = append(t.Rows, append(cells, strconv.Itoa(r.Fetches), strconv.Itoa(r.Failed), strconv.Itoa(r.Probes),
			strconv.Itoa(r.Clients), r.Last.Format("2006-01-02 15:04:05"), med, best, n))
		probes = probes || r.Probes > 0
	}
	if probes {
		t.Notes = append(t.Notes, probesNote)
	}
	addSplitNote(&t, sp, len(out) > 0)
	return t
}
