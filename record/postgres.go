package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// pgBackend is a PostgreSQL database shared by many servers, through
// jackc/pgx. Each server ships its journal into it in batches (the sink's
// writer); uid makes every write idempotent (ON CONFLICT (uid) DO NOTHING),
// so a batch retried after a lost answer, a journal replayed after kill -9,
// or a store copy run twice never doubles a record.
type pgBackend struct {
	s *Store

	mu    sync.Mutex
	ready bool // schema checked (read-only) or migrated (read-write)
}

// pgLockKey serializes migrations of servers starting at once
// (pg_advisory_xact_lock).
const pgLockKey = 0x70786570 // "pxep"

// pgMaxParams is PostgreSQL's limit on one statement's parameters.
const pgMaxParams = 65535

func openPostgres(ctx context.Context, raw string, ro bool) (*Store, error) {
	db, err := sql.Open("pgx", raw)
	if err != nil {
		return nil, fmt.Errorf("record database %s: %w", redact(raw), err)
	}
	// A few connections: one writer (the sink) and the API's readers.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	s := &Store{db: db, path: redact(raw), readOnly: ro}
	b := &pgBackend{s: s}
	s.be = b
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.ensure(cctx); err != nil {
		if !ro && errors.Is(err, ErrUnreachable) {
			return s, err
		}
		db.Close()
		return nil, err
	}
	return s, nil
}

func (b *pgBackend) kind() Backend { return Postgres }

// ensure checks the schema once: a read-only store wants exactly this
// pxeperf's, a read-write one migrates to it (refusing a newer one).
func (b *pgBackend) ensure(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ready {
		return nil
	}
	var err error
	if b.s.readOnly {
		err = b.checkVersion(ctx)
	} else {
		err = b.migrate(ctx)
	}
	b.ready = err == nil
	return err
}

func (b *pgBackend) checkVersion(ctx context.Context) error {
	var v int
	err := b.s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		v, err = 0, nil
	}
	if err != nil {
		return b.wrap("reading the schema version", err)
	}
	switch {
	case v > SchemaVersion:
		return fmt.Errorf("%w: %s has version %d, this pxeperf reads up to %d; use the newer pxeperf that wrote it",
			ErrNewerSchema, b.s.path, v, SchemaVersion)
	case v < SchemaVersion:
		return fmt.Errorf("record database %s has schema version %d, older than %d: run pxeperf store migrate --store URL (or start pxeperf serve with it)",
			b.s.path, v, SchemaVersion)
	}
	return nil
}

// migrate brings the schema to SchemaVersion in one transaction, with the
// migrations SQLite runs (translated by pgSchema), refusing a newer one.
// An advisory lock makes servers that start together take turns.
func (b *pgBackend) migrate(ctx context.Context) error {
	tx, err := b.s.db.BeginTx(ctx, nil)
	if err != nil {
		return b.wrap("starting the schema check", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", pgLockKey); err != nil {
		return b.wrap("locking the schema", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_ns BIGINT NOT NULL)`); err != nil {
		return b.wrap("creating schema_migrations", err)
	}
	var v int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		return b.wrap("reading the schema version", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: %s has version %d, this pxeperf knows up to %d; upgrade this pxeperf (every server on one database needs the newest)",
			ErrNewerSchema, b.s.path, v, SchemaVersion)
	}
	if v == SchemaVersion {
		return nil
	}
	for i := v; i < SchemaVersion; i++ {
		m := migrations[i]
		if _, err := tx.ExecContext(ctx, pgSchema(m.sql)); err != nil {
			return b.wrap(fmt.Sprintf("migrating to schema %d (%s)", i+1, m.name), err)
		}
		if m.data != nil {
			if err := m.data(ctx, tx, b.rebind); err != nil {
				return b.wrap(fmt.Sprintf("migrating the records to schema %d (%s)", i+1, m.name), err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_ns) VALUES ($1, $2, $3)`,
			i+1, m.name, time.Now().UnixNano()); err != nil {
			return b.wrap("recording the migration", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return b.wrap("committing the schema", err)
	}
	return nil
}

// pgSchema translates a migration written for SQLite: INTEGER is 64-bit
// there (BIGINT here), REAL is a double (DOUBLE PRECISION; PostgreSQL's
// REAL is 32-bit) and an INTEGER PRIMARY KEY is SQLite's rowid (an
// identity column here).
func pgSchema(q string) string {
	return strings.NewReplacer(
		"id INTEGER PRIMARY KEY", "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
		" INTEGER", " BIGINT",
		" REAL", " DOUBLE PRECISION",
	).Replace(q)
}

// rebind numbers the placeholders: ? becomes $1, $2, ...
func (*pgBackend) rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fileGlob: LIKE with * and ? as % and _, and LIKE's own specials escaped
// (case-sensitive, as SQLite's GLOB).
func (*pgBackend) fileGlob(p string) (string, any) {
	var b strings.Builder
	for _, c := range p {
		switch c {
		case '\\', '%', '_':
			b.WriteByte('\\')
			b.WriteRune(c)
		case '*':
			b.WriteByte('%')
		case '?':
			b.WriteByte('_')
		default:
			b.WriteRune(c)
		}
	}
	return `file LIKE ? ESCAPE '\'`, b.String()
}

// values writes rows tuples of cols placeholders, numbered from 1.
func values(rows, cols int) string {
	var b strings.Builder
	n := 0
	for r := range rows {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			n++
			b.WriteString("$" + strconv.Itoa(n))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// insertRows runs "INSERT INTO head VALUES (...),(...) tail" over rows of
// cols values each, as many rows per statement as the parameter limit
// allows; each returned row goes to scan.
func insertRows(ctx context.Context, tx *sql.Tx, head, tail string, cols int, args []any, scan func(*sql.Rows) error) error {
	per := min(pgMaxParams/cols, 1000) * cols
	for len(args) > 0 {
		n := min(per, len(args))
		q := "INSERT INTO " + head + " VALUES " + values(n/cols, cols) + " " + tail
		if scan == nil {
			if _, err := tx.ExecContext(ctx, q, args[:n]...); err != nil {
				return err
			}
		} else {
			rows, err := tx.QueryContext(ctx, q, args[:n]...)
			if err != nil {
				return err
			}
			for rows.Next() {
				if err := scan(rows); err != nil {
					rows.Close()
					return err
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		args = args[n:]
	}
	return nil
}

// addBatch writes a batch with multi-row INSERTs in one transaction:
// records not stored yet (RETURNING their ids), then their labels and
// intervals, then leases. A uid already stored is skipped.
func (b *pgBackend) addBatch(ctx context.Context, es []*entry) error {
	if err := b.ensure(ctx); err != nil {
		return err
	}
	tx, err := b.s.db.BeginTx(ctx, nil)
	if err != nil {
		return b.wrap("starting a write", err)
	}
	defer tx.Rollback()
	ids, err := storedIDs(ctx, tx, es)
	if err != nil {
		return b.wrap("looking up stored records", err)
	}
	w, err := planBatch(es, ids)
	if err != nil {
		return err
	}
	if err := b.insertBatch(ctx, tx, w); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return b.wrap("committing", err)
	}
	return nil
}

// storedIDs looks up which of the batch's records are stored already (a
// journal replayed after a kill, a batch whose commit answer was lost, a
// copy run again), by uid: ON CONFLICT alone would still draw an id for
// each, leaving gaps.
func storedIDs(ctx context.Context, tx *sql.Tx, es []*entry) (map[string]int64, error) {
	ids := map[string]int64{}
	var uids []string
	for _, e := range es {
		if e.Record != nil {
			uids = append(uids, e.UID)
		}
	}
	if len(uids) == 0 {
		return ids, nil
	}
	rows, err := tx.QueryContext(ctx, "SELECT id, uid FROM records WHERE uid = ANY($1)", uids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scanID(rows, ids); err != nil {
			return nil, err
		}
	}
	return ids, rows.Err()
}

// scanID reads a row of (id, uid) into ids.
func scanID(rows *sql.Rows, ids map[string]int64) error {
	var id int64
	var uid string
	if err := rows.Scan(&id, &uid); err != nil {
		return err
	}
	ids[uid] = id
	return nil
}

// pgBatch is what one batch inserts: the records not stored yet with
// their columns' arguments, and the leases'.
type pgBatch struct {
	ids       map[string]int64 // by uid: stored before, or inserted now
	recs      []*entry
	recArgs   []any
	leaseArgs []any
}

// planBatch sorts es out, once per uid: a record stored already gets its
// id and is left out, the others' columns are bound; leases are bound.
func planBatch(es []*entry, ids map[string]int64) (*pgBatch, error) {
	w := &pgBatch{ids: ids}
	seen := make(map[string]bool, len(es))
	for _, e := range es {
		if seen[e.UID] {
			continue
		}
		seen[e.UID] = true
		switch {
		case e.Record != nil:
			if id, ok := ids[e.UID]; ok {
				e.Record.ID = id
				continue
			}
			a, err := recordArgs(e)
			if err != nil {
				return nil, fmt.Errorf("record %s: %w", e.UID, err)
			}
			w.recs = append(w.recs, e)
			w.recArgs = append(w.recArgs, a...)
		case e.Lease != nil:
			w.leaseArgs = append(w.leaseArgs, leaseArgs(e)...)
		}
	}
	return w, nil
}

// insertBatch inserts w: its records (learning their ids), their labels
// and intervals, and the leases.
func (b *pgBackend) insertBatch(ctx context.Context, tx *sql.Tx, w *pgBatch) error {
	if len(w.recs) > 0 {
		cols := len(w.recArgs) / len(w.recs)
		err := insertRows(ctx, tx, "records ("+recordInsertColumns+")", "ON CONFLICT (uid) DO NOTHING RETURNING id, uid",
			cols, w.recArgs, func(rows *sql.Rows) error { return scanID(rows, w.ids) })
		if err != nil {
			return b.wrap("adding records", err)
		}
	}
	labelArgs, ivArgs := w.childArgs()
	if err := insertRows(ctx, tx, "labels(record_id, key, value)", "", 3, labelArgs, nil); err != nil {
		return b.wrap("adding labels", err)
	}
	if err := insertRows(ctx, tx, "intervals(record_id, seq, start_us, end_us, bytes, retransmits, cwnd, snd_wnd, rtt_us)",
		"", 9, ivArgs, nil); err != nil {
		return b.wrap("adding intervals", err)
	}
	if len(w.leaseArgs) > 0 {
		cols := strings.Count(leaseInsertColumns, ",") + 1
		if err := insertRows(ctx, tx, "leases("+leaseInsertColumns+")", "ON CONFLICT (uid) DO NOTHING", cols,
			w.leaseArgs, nil); err != nil {
			return b.wrap("adding leases", err)
		}
	}
	return nil
}

// childArgs gives each inserted record its id and binds its labels' and
// intervals' rows to it.
func (w *pgBatch) childArgs() (labelArgs, ivArgs []any) {
	for _, e := range w.recs {
		r := e.Record
		id, ok := w.ids[e.UID]
		if !ok {
			continue // stored meanwhile by another writer (a concurrent copy)
		}
		r.ID = id
		for k, v := range r.Labels {
			labelArgs = append(labelArgs, id, k, v)
		}
		for i := range e.Intervals {
			iv := &e.Intervals[i]
			iv.RecordID = id
			ivArgs = append(ivArgs, id, i, us(iv.Start), us(iv.End), iv.Bytes, int64(iv.Retransmits),
				int64(iv.Cwnd), int64(iv.SndWnd), us(iv.RTT))
		}
	}
	return labelArgs, ivArgs
}

// wrap turns a PostgreSQL or connection error into one that names the
// database (without its password) and the fix. Connection failures wrap
// ErrUnreachable.
func (b *pgBackend) wrap(what string, err error) error {
	db := b.s.path
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		hint := ""
		switch pe.Code {
		case "42P01", "42703":
			hint = " (the schema is missing or old: run pxeperf store migrate --store URL)"
		case "28P01", "28000":
			hint = " (check the user and password in store.url, or ~/.pgpass, and pg_hba.conf)"
		case "3D000":
			hint = " (create it: createdb -O USER DBNAME)"
		case "42501":
			hint = " (grant the store.url user CREATE and INSERT on the database)"
		case "53100":
			hint = " (the database's disk is full; records wait in each server's journal)"
		}
		return fmt.Errorf("record database %s: %s: %w%s", db, what, err, hint)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrNewerSchema) {
		return fmt.Errorf("record database %s: %s: %w", db, what, err)
	}
	return fmt.Errorf("record database %s: %s: %w: %w (is PostgreSQL running and reachable? records wait in the journal and are shipped when it is back)",
		db, what, ErrUnreachable, err)
}
