package configs

import (
	"os"
	"strings"
)

// Store says where records go.
type Store struct {
	// URL of the record store: "" (default) is <data>/pxeperf.db, SQLite;
	// sqlite:PATH another data folder; postgres://USER@HOST/DB (a libpq
	// URL, a unix socket folder as ?host=/path) a PostgreSQL database that
	// the servers of many lab segments share. The journal in the data
	// folder stays the commit point: records are shipped from it in
	// batches, retried while the database is away.
	URL string `yaml:"url"`
	// Batch is how many records one transaction writes (the shipper's
	// batch). Default 1000.
	Batch int `yaml:"batch"`
}

// Server names this pxeperf on its records, so one store can hold many.
type Server struct {
	// Name of this server. Default "": the host name.
	Name string `yaml:"name"`
	// Site is the lab segment or location, optional; reports and the API
	// filter and group by it.
	Site string `yaml:"site"`
}

// ServerName is server.name, else the host name ("pxeperf" when unknown).
func (c *Config) ServerName() string {
	if c.Server.Name != "" {
		return c.Server.Name
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "pxeperf"
}

// validateStore checks store and server.
func (c *Config) validateStore(add func(key, format string, a ...any)) {
	u := strings.TrimSpace(c.Store.URL)
	switch {
	case u == "", strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
	case strings.HasPrefix(u, "sqlite:"):
		if strings.TrimPrefix(strings.TrimPrefix(u, "sqlite:"), "//") == "" {
			add("store.url", "%q names no folder; write sqlite:./pxeperf-data, or leave store.url empty for the data folder", u)
		}
	default:
		add("store.url", "%q is not a store; use postgres://USER@HOST/DB (PostgreSQL), sqlite:PATH, or leave it empty for <data>/pxeperf.db", u)
	}
	if c.Store.Batch < 1 || c.Store.Batch > 10000 {
		add("store.batch", "%d is outside 1..10000; the default is 1000", c.Store.Batch)
	}
	for key, v := range map[string]string{"server.name": c.Server.Name, "server.site": c.Server.Site} {
		if len(v) > 64 || strings.ContainsAny(v, "\x00\r\n\t") {
			add(key, "%q: use a short name on one line (at most 64 bytes), e.g. lab-north", v)
		}
	}
}
