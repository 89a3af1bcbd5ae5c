package record

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Backend names the database behind a Store.
type Backend string

const (
	// SQLite: <data>/pxeperf.db, one per server (the default).
	SQLite Backend = "sqlite"
	// Postgres: one database for the records of many servers.
	Postgres Backend = "postgres"
)

// backend is what differs between SQLite and PostgreSQL: how a batch is
// written, how placeholders and globs are spelled, how the schema version
// is kept and how errors are explained. The queries, the row scans and the
// migrations' text (translated by pgSchema) are shared in Store.
type backend interface {
	kind() Backend
	// addBatch writes entries in one transaction, skipping uids already
	// stored.
	addBatch(ctx context.Context, es []*entry) error
	// rebind turns the ? placeholders of a shared query into the
	// backend's own.
	rebind(q string) string
	// fileGlob is the WHERE clause and argument matching file against a
	// glob with * and ? (and nothing else special).
	fileGlob(pattern string) (clause string, arg any)
	wrap(what string, err error) error
}

// Kind is the store's backend.
func (s *Store) Kind() Backend { return s.be.kind() }

// sqliteBackend is the embedded store.
type sqliteBackend struct{ s *Store }

func (b sqliteBackend) kind() Backend { return SQLite }

func (b sqliteBackend) addBatch(ctx context.Context, es []*entry) error {
	return b.s.addBatchSQLite(ctx, es)
}

func (sqliteBackend) rebind(q string) string { return q }

// fileGlob: GLOB also treats [ as a class; escape it so only * and ? are
// special.
func (sqliteBackend) fileGlob(p string) (string, any) {
	return "file GLOB ?", strings.ReplaceAll(p, "[", "[[]")
}

func (b sqliteBackend) wrap(what string, err error) error { return b.s.wrapSQLite(what, err) }

// Location is where a store lives, as store.url and --store take it:
// "" (the data folder's pxeperf.db), sqlite:PATH (a data folder or a .db
// file), or postgres://... / postgresql://... (a libpq URL; a unix socket
// folder goes in ?host=/path).
type Location struct {
	Kind Backend
	// Dir is the SQLite data folder; URL the PostgreSQL connection URL.
	Dir, URL string
}

// ParseLocation reads a store URL; dataDir is the folder "" means.
func ParseLocation(raw, dataDir string) (Location, error) {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return Location{Kind: SQLite, Dir: dataDir}, nil
	case strings.HasPrefix(raw, "sqlite:"):
		p := strings.TrimPrefix(strings.TrimPrefix(raw, "sqlite:"), "//")
		if p == "" {
			return Location{}, fmt.Errorf("store %q: name the data folder or its %s, e.g. sqlite:./pxeperf-data", raw, FileName)
		}
		if st, err := os.Stat(p); (err == nil && !st.IsDir()) || filepath.Ext(p) == ".db" {
			if filepath.Base(p) != FileName {
				return Location{}, fmt.Errorf("store %q: the SQLite file must be named %s (pass its folder)", raw, FileName)
			}
			p = filepath.Dir(p)
		}
		return Location{Kind: SQLite, Dir: p}, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		if _, err := url.Parse(raw); err != nil {
			return Location{}, fmt.Errorf("store: %w (write e.g. postgres://pxeperf@db.lab/pxeperf or postgres:///pxeperf?host=/run/postgresql)", err)
		}
		return Location{Kind: Postgres, URL: raw}, nil
	}
	return Location{}, fmt.Errorf("store %q: use sqlite:PATH or postgres://USER@HOST/DB (empty: %s in the data folder)", raw, FileName)
}

// String is the location for messages, without a password.
func (l Location) String() string {
	if l.Kind == SQLite {
		return "sqlite:" + filepath.Join(l.Dir, FileName)
	}
	return redact(l.URL)
}

// redact drops the password from a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// ErrUnreachable marks an OpenURL of a PostgreSQL store that could not
// reach the database: the Store is returned anyway and connects (and
// migrates) on first use, so a server starts while the database is away.
var ErrUnreachable = errors.New("record database unreachable")

// OpenURL opens the store at loc for reading and writing, creating or
// migrating its schema (and refusing a newer one). A PostgreSQL database
// that cannot be reached now gives a usable Store and an error wrapping
// ErrUnreachable.
func OpenURL(ctx context.Context, loc Location, opts ...Option) (*Store, error) {
	if loc.Kind == Postgres {
		return openPostgres(ctx, loc.URL, false)
	}
	return Open(loc.Dir, opts...)
}

// OpenURLReadOnly opens the store at loc for reading; its schema must be
// this pxeperf's.
func OpenURLReadOnly(ctx context.Context, loc Location, opts ...Option) (*Store, error) {
	if loc.Kind == Postgres {
		return openPostgres(ctx, loc.URL, true)
	}
	return OpenReadOnly(loc.Dir, opts...)
}
