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

// ServerRow is one row of the servers table.
type ServerRow struct {
	Server  string    `json:"server"`
	Site    string    `json:"site,omitempty"`
	Fetches int       `json:"fetches"`
	Failed  int       `json:"failed"`
	Clients int       `json:"clients"`
	Last    time.Time `json:"last"`
	Median  float64   `json:"median_mbps"`
	Best    float64   `json:"best_mbps"`
}

// Servers is one row per server and site (server.name, server.site): the
// lab segments of a store many pxeperf servers share. Fetches (all
// outcomes), failed ones, distinct clients, the last fetch, median and
// best Mbit/s over completed fetches; ordered by site, then server.
func Servers(recs []record.Record) Table {
	type key struct{ server, site string }
	rows := map[key]*ServerRow{}
	speeds := map[key][]float64{}
	clients := map[key]map[string]bool{}
	for _, r := range recs {
		k := key{r.Server, r.Site}
		if k.server == "" {
			k.server = "unknown"
		}
		row := rows[k]
		if row == nil {
			row = &ServerRow{Server: k.server, Site: k.site}
			rows[k], clients[k] = row, map[string]bool{}
		}
		row.Fetches++
		if r.Outcome != "ok" {
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
			row.Median, row.Best = s.Median, s.Best
		}
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b ServerRow) int {
		return cmp.Or(cmp.Compare(a.Site, b.Site), cmp.Compare(a.Server, b.Server))
	})
	t := Table{
		Name:  TableServers,
		Title: "Fetches per server and site (median and best Mbit/s over completed fetches)",
		Columns: []Column{{Name: "Site", Key: "site", Left: true}, {Name: "Server", Key: "server", Left: true},
			{Name: "Fetches", Key: "fetches"}, {Name: "Failed", Key: "failed"}, {Name: "Clients", Key: "clients"},
			{Name: "Last (UTC)", Key: "last_utc", Left: true}, {Name: "Median Mbit/s", Key: "median_mbps"},
			{Name: "Best Mbit/s", Key: "best_mbps"}},
		Data:  out,
		Empty: "No fetches match: serve some boots first, or widen the filters (--server, --site, --since, --label).",
	}
	for _, r := range out {
		med, best := "", ""
		if r.Best > 0 {
			med, best = mbps(r.Median), mbps(r.Best)
		}
		t.Rows = append(t.Rows, []string{r.Site, r.Server, strconv.Itoa(r.Fetches), strconv.Itoa(r.Failed),
			strconv.Itoa(r.Clients), r.Last.Format("2006-01-02 15:04:05"), med, best})
	}
	return t
}
