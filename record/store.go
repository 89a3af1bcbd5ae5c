package record

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// FileName is the store's file inside the data folder.
const FileName = "pxeperf.db"

// SchemaVersion is the schema this pxeperf writes (PRAGMA user_version).
const SchemaVersion = 7

// ErrNewerSchema means the file was written by a newer pxeperf.
var ErrNewerSchema = errors.New("record store schema is newer than this pxeperf")

// migrations[i] brings the schema from version i to i+1.
var migrations = []struct {
	name string
	sql  string
	// data, when set, runs after sql in the same transaction (both
	// backends; rebind spells the placeholders).
	data func(ctx context.Context, tx *sql.Tx, rebind func(string) string) error
}{
	{"records, intervals, labels, leases", `
CREATE TABLE records (
	id INTEGER PRIMARY KEY,
	uid TEXT NOT NULL UNIQUE,
	time_ns INTEGER NOT NULL,
	source TEXT NOT NULL, proto TEXT NOT NULL, direction TEXT NOT NULL,
	client_mac TEXT NOT NULL, client_ip TEXT NOT NULL, host TEXT NOT NULL, arch TEXT NOT NULL,
	file TEXT NOT NULL, bytes INTEGER NOT NULL, size INTEGER NOT NULL, duration_us INTEGER NOT NULL,
	mbps REAL NOT NULL, outcome TEXT NOT NULL, err TEXT NOT NULL, labels TEXT NOT NULL,
	wnd_max INTEGER NOT NULL, wnd_median INTEGER NOT NULL, wnd_requested INTEGER NOT NULL,
	rtt_us INTEGER NOT NULL, min_rtt_us INTEGER NOT NULL, retransmits INTEGER NOT NULL,
	delivery_rate INTEGER NOT NULL, rwnd_limited_us INTEGER NOT NULL, sndbuf_limited_us INTEGER NOT NULL,
	mss INTEGER NOT NULL, pmtu INTEGER NOT NULL,
	blksize INTEGER NOT NULL, windowsize INTEGER NOT NULL, tsize INTEGER NOT NULL,
	datagrams INTEGER NOT NULL, acked INTEGER NOT NULL, timeouts INTEGER NOT NULL,
	iface TEXT NOT NULL, mtu INTEGER NOT NULL, link_mbps INTEGER NOT NULL, rate_limit_bps INTEGER NOT NULL,
	rx_csum TEXT NOT NULL, tx_csum TEXT NOT NULL, tso TEXT NOT NULL, gso TEXT NOT NULL, gro TEXT NOT NULL,
	kernel TEXT NOT NULL
);
CREATE INDEX records_time ON records(time_ns);
CREATE INDEX records_client_mac ON records(client_mac);
CREATE INDEX records_client_ip ON records(client_ip);
CREATE TABLE labels (
	record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
	key TEXT NOT NULL, value TEXT NOT NULL,
	PRIMARY KEY (record_id, key)
);
CREATE INDEX labels_kv ON labels(key, value);
CREATE TABLE intervals (
	record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
	seq INTEGER NOT NULL,
	start_us INTEGER NOT NULL, end_us INTEGER NOT NULL, bytes INTEGER NOT NULL,
	retransmits INTEGER NOT NULL, cwnd INTEGER NOT NULL, snd_wnd INTEGER NOT NULL, rtt_us INTEGER NOT NULL,
	PRIMARY KEY (record_id, seq)
);
CREATE TABLE leases (
	id INTEGER PRIMARY KEY,
	uid TEXT NOT NULL UNIQUE,
	time_ns INTEGER NOT NULL, client_mac TEXT NOT NULL, addr TEXT NOT NULL, arch INTEGER NOT NULL,
	host TEXT NOT NULL, boot_file TEXT NOT NULL, expiry_ns INTEGER NOT NULL, proxy INTEGER NOT NULL
);
CREATE INDEX leases_time ON leases(time_ns);
`, nil},
	{"records.kind", `ALTER TABLE records ADD COLUMN kind TEXT NOT NULL DEFAULT '';`, nil},
	{"records and leases: server, site", `
ALTER TABLE records ADD COLUMN server TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN site TEXT NOT NULL DEFAULT '';
CREATE INDEX records_server ON records(server, site);
ALTER TABLE leases ADD COLUMN server TEXT NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN site TEXT NOT NULL DEFAULT '';
`, nil},
	{"records: TFTP effective window, loss events", `
ALTER TABLE records ADD COLUMN eff_wnd_min INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN eff_wnd_median INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN eff_wnd_max INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN loss_events INTEGER NOT NULL DEFAULT 0;`, nil},
	{"records: the bench's delay asked and what its delay line delivered", `
ALTER TABLE records ADD COLUMN delay_asked_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN delay_p50_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN delay_p99_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN delay_max_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN delay_frames INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN delay_late INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN delay_behind INTEGER NOT NULL DEFAULT 0;`, nil},
	{"records: link driver", `ALTER TABLE records ADD COLUMN link_driver TEXT NOT NULL DEFAULT '';`, nil},
	{"records: measured figures in columns, not labels", `
ALTER TABLE records ADD COLUMN jitter_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN udp_lost INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN udp_packets INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN udp_lost_pct REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN server_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN server_written INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN server_duration_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_clock INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_mbps REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_retransmits INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN sender_mbps REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN rcvbuf INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN cpu_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_duplicates INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_out_of_order INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_early_acks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN client_timeouts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN iperf3_mbps REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN iperf3_dev_pct REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN iperf3_udp_lost_pct REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN iperf3_err TEXT NOT NULL DEFAULT '';`, migrateMeasured},
}

// Store is the record database: one SQLite file in WAL mode, or a
// PostgreSQL database (OpenURL) that many servers share. Safe for
// concurrent use. A read-write SQLite Store is held by one process (serve or
// bench); any number of read-only ones (report) may read while it writes.
// The queries, the scans and the migrations are the same for both; what
// differs is behind backend.
type Store struct {
	db       *sql.DB
	path     string // the file, or the URL without its password
	readOnly bool
	be       backend

	// ins are SQLite's inserts, prepared once on the database and bound to
	// each write transaction (Tx.StmtContext reuses a connection's prepared
	// statement), so that a batch of one fetch does not parse the record's
	// wide INSERT again (see DESIGN.md#sqlites-inserts-are-prepared-once).
	insMu sync.Mutex
	ins   *stmts
}

// Option tunes Open and OpenReadOnly.
type Option func(*options)

type options struct{ busyTimeout time.Duration }

// WithBusyTimeout sets how long a statement waits for another process's
// lock before failing with a "locked" error. Default 5 s.
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Open opens (creating or migrating) <dataDir>/pxeperf.db for reading and
// writing.
//
// Durability: WAL with synchronous=NORMAL. A commit is in the WAL file (in
// the OS page cache) when Add returns, so it survives the process being
// killed (kill -9, OOM, panic); only a power loss or kernel crash may undo
// the last transactions, never corrupt the file. FULL would fsync the WAL on
// every commit, which buys power-loss durability the lab does not need at
// the cost of a disk flush per batch.
func Open(dataDir string, opts ...Option) (*Store, error) {
	o := options{busyTimeout: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data folder %s: %w (set --data to a writable folder)", dataDir, err)
	}
	path := filepath.Join(dataDir, FileName)
	q := url.Values{}
	busy := fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds())
	for _, p := range []string{busy, "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(ON)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	s, err := open(path, "file:"+path+"?"+q.Encode(), false)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(); err != nil {
		s.db.Close()
		return nil, err
	}
	if err := s.classifyOld(context.Background()); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// OpenReadOnly opens <dataDir>/pxeperf.db for reading, also while another
// process writes it. It fails when the file does not exist.
func OpenReadOnly(dataDir string, opts ...Option) (*Store, error) {
	o := options{busyTimeout: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	path := filepath.Join(dataDir, FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("record store %s: %w (run pxeperf serve with --data %s first, or point --data at the folder holding %s)",
			path, err, dataDir, FileName)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	s, err := open(path, "file:"+path+"?"+q.Encode(), true)
	if err != nil {
		return nil, err
	}
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		s.db.Close()
		return nil, s.wrap("reading the schema version", err)
	}
	if v > SchemaVersion {
		s.db.Close()
		return nil, fmt.Errorf("%w: %s has version %d, this pxeperf reads up to %d; use the newer pxeperf that wrote it",
			ErrNewerSchema, path, v, SchemaVersion)
	}
	if v < SchemaVersion {
		s.db.Close()
		return nil, fmt.Errorf("record store %s has schema version %d, older than %d: run pxeperf serve once to upgrade it",
			path, v, SchemaVersion)
	}
	return s, nil
}

func open(path, dsn string, ro bool) (*Store, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("record store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, readOnly: ro}
	s.be = sqliteBackend{s}
	// Ping runs the pragmas: a corrupt or locked file fails here.
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, s.wrap("opening", err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.insMu.Lock()
	if s.ins != nil {
		s.ins.close()
		s.ins = nil
	}
	s.insMu.Unlock()
	return s.db.Close()
}

// wrap turns a database error into one that names the store and the fix.
func (s *Store) wrap(what string, err error) error { return s.be.wrap(what, err) }

// wrapSQLite turns a SQLite error into one that names the file and the fix.
func (s *Store) wrapSQLite(what string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("record store %s: %s: locked by another process (another pxeperf serve or bench on the same --data?); stop it or use another --data: %w", s.path, what, err)
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("record store %s: %s: disk full; free space on that filesystem (records wait in memory and the journal meanwhile): %w", s.path, what, err)
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("record store %s: %s: not a readable SQLite database (corrupt?); move it aside (mv %s %s.bad) and pxeperf starts a new one: %w", s.path, what, s.path, s.path, err)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("record store %s: %s: cannot read or write the file (permissions, or a read-only filesystem?); make the folder writable or set --data elsewhere: %w", s.path, what, err)
		}
	}
	return fmt.Errorf("record store %s: %s: %w", s.path, what, err)
}

// migrate brings the schema to SchemaVersion, refusing a newer one.
func (s *Store) migrate() error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("starting the schema check", err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return s.wrap("reading the schema version", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: %s has version %d, this pxeperf knows up to %d; use the newer pxeperf, or move the file aside to start a new store",
			ErrNewerSchema, s.path, v, SchemaVersion)
	}
	if v == SchemaVersion {
		return nil
	}
	if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ns INTEGER NOT NULL)`); err != nil {
		return s.wrap("creating schema_migrations", err)
	}
	for i := v; i < SchemaVersion; i++ {
		m := migrations[i]
		if _, err := tx.Exec(m.sql); err != nil {
			return s.wrap(fmt.Sprintf("migrating to schema %d (%s)", i+1, m.name), err)
		}
		if m.data != nil {
			if err := m.data(ctx, tx, s.be.rebind); err != nil {
				return s.wrap(fmt.Sprintf("migrating the records to schema %d (%s)", i+1, m.name), err)
			}
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations(version, name, applied_ns) VALUES (?, ?, ?)`,
			i+1, m.name, time.Now().UnixNano()); err != nil {
			return s.wrap("recording the migration", err)
		}
	}
	// PRAGMA takes no parameters; SchemaVersion is a constant.
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return s.wrap("setting the schema version", err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap("committing the schema", err)
	}
	return nil
}

// newUID returns a random id that makes replaying the journal idempotent.
func newUID() string {
	return rand.Text()
}

// entry is one thing to write: a record (with intervals) or a lease. It is
// also the journal's line format.
type entry struct {
	UID       string     `json:"uid"`
	Record    *Record    `json:"record,omitempty"`
	Intervals []Interval `json:"intervals,omitempty"`
	Lease     *Lease     `json:"lease,omitempty"`

	size   int       // bytes it counts against the sink's memory bound
	queued time.Time // when it joined the sink's queue: the store's lag
}

// Add stores one record with its intervals in one transaction and returns
// its id (also set in r.ID and each interval's RecordID).
func (s *Store) Add(ctx context.Context, r *Record, ivs []Interval) (int64, error) {
	e := entry{UID: newUID(), Record: r, Intervals: ivs}
	if err := s.addBatch(ctx, []*entry{&e}); err != nil {
		return 0, err
	}
	return r.ID, nil
}

// AddLease stores one lease.
func (s *Store) AddLease(ctx context.Context, l *Lease) error {
	return s.addBatch(ctx, []*entry{{UID: newUID(), Lease: l}})
}

// addBatch writes entries in one transaction. An entry whose uid is already
// stored (a journal replayed twice, a copy run again) is skipped.
func (s *Store) addBatch(ctx context.Context, es []*entry) error {
	if s.readOnly {
		return fmt.Errorf("record store %s is open read-only", s.path)
	}
	return s.be.addBatch(ctx, es)
}

// addBatchSQLite is SQLite's addBatch. Statements are prepared once per
// store (inserts): parsing SQL is most of an insert's cost.
func (s *Store) addBatchSQLite(ctx context.Context, es []*entry) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("starting a write", err)
	}
	defer tx.Rollback()
	var st *stmts
	for _, e := range es {
		switch {
		case e.Record != nil:
			if st == nil {
				ins, err := s.inserts(ctx)
				if err != nil {
					return s.wrap("preparing inserts", err)
				}
				st = ins.in(ctx, tx)
			}
			// Without ctx: the driver watches a statement's context with a
			// goroutine of its own, one per row. The inserts of a
			// transaction that holds the write lock wait for nothing; ctx
			// still ends the transaction (database/sql rolls it back, and
			// the next statement fails) and bounds BEGIN and COMMIT.
			if err := st.insertRecord(context.Background(), e); err != nil {
				return s.wrap("adding a record", err)
			}
		case e.Lease != nil:
			if err := insertLease(ctx, tx, e); err != nil {
				return s.wrap("adding a lease", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return s.wrap("committing", err)
	}
	return nil
}

func us(d time.Duration) int64 { return d.Microseconds() }

// execer is what inserts need of a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// stmts are the prepared inserts: the store's, or those bound to a batch's
// transaction.
type stmts struct {
	s [sIntervals + len(ivRows)]*sql.Stmt

	// Bound to a transaction: the store's statements and the transaction.
	parent *stmts
	ctx    context.Context
	tx     *sql.Tx
}

// Indexes of stmts.s; sIntervals+i inserts ivRows[i] interval rows.
const (
	sRecord = iota
	sUID
	sLabel
	sIntervals
)

// inserts returns the store's prepared inserts, preparing them on first use.
func (s *Store) inserts(ctx context.Context) (*stmts, error) {
	s.insMu.Lock()
	defer s.insMu.Unlock()
	if s.ins == nil {
		st, err := prepare(ctx, s.db)
		if err != nil {
			return nil, err
		}
		s.ins = st
	}
	return s.ins, nil
}

// ivRows are the row counts of the prepared interval inserts, largest
// first: a record's intervals go in as few of them as add up to its count
// (9 = 8 + 1), not one statement per row.
var ivRows = [...]int{16, 8, 4, 2, 1}

// in binds the statements to tx, each on its first use; they are closed
// with tx.
func (st *stmts) in(ctx context.Context, tx *sql.Tx) *stmts {
	return &stmts{parent: st, ctx: ctx, tx: tx}
}

// get is statement i, bound to the transaction on first use.
func (st *stmts) get(i int) *sql.Stmt {
	if st.s[i] == nil {
		st.s[i] = st.tx.StmtContext(st.ctx, st.parent.s[i])
	}
	return st.s[i]
}

func prepare(ctx context.Context, db *sql.DB) (*stmts, error) {
	q := [len(stmts{}.s)]string{
		sRecord: `INSERT OR IGNORE INTO records (` + recordInsertColumns + `) VALUES ` +
			placeholders(1, strings.Count(recordInsertColumns, ",")+1),
		sUID:   `SELECT id FROM records WHERE uid = ?`,
		sLabel: `INSERT INTO labels(record_id, key, value) VALUES (?,?,?)`,
	}
	for i, n := range ivRows {
		q[sIntervals+i] = `INSERT INTO intervals(record_id, seq, start_us, end_us, bytes,
			retransmits, cwnd, snd_wnd, rtt_us) VALUES ` + placeholders(n, intervalCols)
	}
	st := &stmts{}
	for i := range q {
		var err error
		if st.s[i], err = db.PrepareContext(ctx, q[i]); err != nil {
			st.close()
			return nil, err
		}
	}
	return st, nil
}

// intervalCols are the values of one intervals row.
const intervalCols = 9

// placeholders are rows tuples of cols ? each.
func placeholders(rows, cols int) string {
	tuple := "(?" + strings.Repeat(",?", cols-1) + ")"
	return tuple + strings.Repeat(","+tuple, rows-1)
}

func (st *stmts) close() {
	for _, s := range st.s {
		if s != nil {
			s.Close()
		}
	}
}

func (st *stmts) insertRecord(ctx context.Context, e *entry) error {
	r := e.Record
	args, err := recordArgs(e)
	if err != nil {
		return err
	}
	res, err := st.get(sRecord).ExecContext(ctx, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// Already stored (journal replay): report its id.
		return st.get(sUID).QueryRowContext(ctx, e.UID).Scan(&r.ID)
	}
	if r.ID, err = res.LastInsertId(); err != nil {
		return err
	}
	for k, v := range r.Labels {
		if _, err := st.get(sLabel).ExecContext(ctx, r.ID, k, v); err != nil {
			return err
		}
	}
	seq := 0
	for i, n := range ivRows {
		for len(e.Intervals)-seq >= n {
			args = args[:0]
			for k := seq; k < seq+n; k++ {
				iv := &e.Intervals[k]
				iv.RecordID = r.ID
				args = append(args, r.ID, k, us(iv.Start), us(iv.End), iv.Bytes, iv.Retransmits,
					iv.Cwnd, iv.SndWnd, us(iv.RTT))
			}
			if _, err := st.get(sIntervals+i).ExecContext(ctx, args...); err != nil {
				return err
			}
			seq += n
		}
	}
	return nil
}

// recordArgs are the values of an entry's records row, in the order of
// recordInsertColumns. Booleans are 0/1: both backends store integers.
func recordArgs(e *entry) ([]any, error) {
	r := e.Record
	if r.Kind == "" {
		r.Kind = Classify(r) // bench records, journal lines of an older pxeperf
	}
	LiftLabels(r) // journal lines of an older pxeperf: measured figures as labels
	labels := "{}"
	if len(r.Labels) > 0 {
		b, err := json.Marshal(r.Labels)
		if err != nil {
			return nil, err
		}
		labels = string(b)
	}
	m := measuredArgs(r)
	return append([]any{
		e.UID, r.Time.UnixNano(), r.Source, r.Proto, r.Direction, strings.ToLower(r.ClientMAC), r.ClientIP,
		r.Host, r.Arch, r.File, r.Bytes, r.Size, us(r.Duration), r.Mbps, r.Outcome, r.Err, labels,
		int64(r.WndMax), int64(r.WndMedian), int64(r.WndRequested), us(r.RTT), us(r.MinRTT), r.Retransmits,
		int64(r.DeliveryRate), us(r.RwndLimited), us(r.SndbufLimited), int64(r.MSS), int64(r.PMTU),
		int64(r.BlkSize), int64(r.WindowSize), b2i(r.TSize), r.Datagrams, r.Acked, r.Timeouts, r.Iface,
		int64(r.MTU), int64(r.LinkMbps), r.RateLimit, string(r.RxCsum), string(r.TxCsum), string(r.TSO),
		string(r.GSO), string(r.GRO), r.Kernel, r.Kind, r.Server, r.Site,
		int64(r.EffWndMin), int64(r.EffWndMedian), int64(r.EffWndMax), r.LossEvents,
		us(r.DelayAsked), us(r.DelayP50), us(r.DelayP99), us(r.DelayMax), r.DelayFrames, r.DelayLate, b2i(r.DelayBehind),
		r.LinkDriver,
	}, m[:]...), nil
}

// recordInsertColumns are the columns recordArgs fills.
const recordInsertColumns = `uid, time_ns, source, proto, direction, client_mac, client_ip, host, arch, file, bytes, size,
	duration_us, mbps, outcome, err, labels, wnd_max, wnd_median, wnd_requested, rtt_us, min_rtt_us,
	retransmits, delivery_rate, rwnd_limited_us, sndbuf_limited_us, mss, pmtu, blksize, windowsize,
	tsize, datagrams, acked, timeouts, iface, mtu, link_mbps, rate_limit_bps, rx_csum, tx_csum, tso,
	gso, gro, kernel, kind, server, site, eff_wnd_min, eff_wnd_median, eff_wnd_max, loss_events,
	delay_asked_us, delay_p50_us, delay_p99_us, delay_max_us, delay_frames, delay_late, delay_behind, link_driver, ` + measuredColumns

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

const recordColumns = `id, time_ns, source, proto, direction, client_mac, client_ip, host, arch, file, bytes,
	size, duration_us, mbps, outcome, err, labels, wnd_max, wnd_median, wnd_requested, rtt_us, min_rtt_us,
	retransmits, delivery_rate, rwnd_limited_us, sndbuf_limited_us, mss, pmtu, blksize, windowsize, tsize,
	datagrams, acked, timeouts, iface, mtu, link_mbps, rate_limit_bps, rx_csum, tx_csum, tso, gso, gro, kernel, kind,
	server, site, eff_wnd_min, eff_wnd_median, eff_wnd_max, loss_events,
	delay_asked_us, delay_p50_us, delay_p99_us, delay_max_us, delay_frames, delay_late, delay_behind, link_driver, ` + measuredColumns

type scanner interface{ Scan(...any) error }

// scanRecord reads a row of recordColumns, after the columns first names
// (e.g. uid for a copy).
func scanRecord(sc scanner, first ...any) (Record, error) {
	var r Record
	var tns, dur, rtt, minRTT, rwnd, sndbuf, rate, dAsked, d50, d99, dMax int64
	var labels, rx, tx, tso, gso, gro string
	measured, finish := scanMeasured(&r)
	err := sc.Scan(append(append(first, &r.ID, &tns, &r.Source, &r.Proto, &r.Direction, &r.ClientMAC, &r.ClientIP, &r.Host,
		&r.Arch, &r.File, &r.Bytes, &r.Size, &dur, &r.Mbps, &r.Outcome, &r.Err, &labels, &r.WndMax,
		&r.WndMedian, &r.WndRequested, &rtt, &minRTT, &r.Retransmits, &rate, &rwnd, &sndbuf, &r.MSS,
		&r.PMTU, &r.BlkSize, &r.WindowSize, &r.TSize, &r.Datagrams, &r.Acked, &r.Timeouts, &r.Iface,
		&r.MTU, &r.LinkMbps, &r.RateLimit, &rx, &tx, &tso, &gso, &gro, &r.Kernel, &r.Kind, &r.Server, &r.Site,
		&r.EffWndMin, &r.EffWndMedian, &r.EffWndMax, &r.LossEvents,
		&dAsked, &d50, &d99, &dMax, &r.DelayFrames, &r.DelayLate, &r.DelayBehind, &r.LinkDriver), measured...)...)
	if err != nil {
		return r, err
	}
	finish()
	d := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	r.Time = time.Unix(0, tns).UTC()
	r.Duration, r.RTT, r.MinRTT, r.RwndLimited, r.SndbufLimited = d(dur), d(rtt), d(minRTT), d(rwnd), d(sndbuf)
	r.DelayAsked, r.DelayP50, r.DelayP99, r.DelayMax = d(dAsked), d(d50), d(d99), d(dMax)
	r.DeliveryRate = uint64(rate)
	r.RxCsum, r.TxCsum, r.TSO, r.GSO, r.GRO = Offload(rx), Offload(tx), Offload(tso), Offload(gso), Offload(gro)
	if r.Kind == "" || r.Kind == KindError {
		r.Kind = Classify(&r) // written before kinds (or probes) existed
	}
	if labels != "{}" && labels != "" {
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			return r, fmt.Errorf("record %d: labels: %w", r.ID, err)
		}
	}
	return r, nil
}

// selectRecords is the query of the records f selects, in Query's order.
func (s *Store) selectRecords(f Filter) (string, []any) {
	var w whereClause
	if c := strings.TrimSpace(f.Client); c != "" {
		mac := strings.ToLower(c)
		if hw, err := net.ParseMAC(c); err == nil {
			mac = hw.String()
		}
		w.add("(client_mac = ? OR client_ip = ? OR host = ?)", mac, c, c)
	}
	if f.File != "" {
		if strings.ContainsAny(f.File, "*?") {
			w.add(s.be.fileGlob(f.File))
		} else {
			w.add("file = ?", f.File)
		}
	}
	if !f.Since.IsZero() {
		w.add("time_ns >= ?", f.Since.UnixNano())
	}
	for k, v := range f.Labels {
		w.add("EXISTS (SELECT 1 FROM labels l WHERE l.record_id = records.id AND l.key = ? AND l.value = ?)", k, v)
	}
	for _, eq := range []struct{ col, v string }{{"source", f.Source}, {"proto", f.Proto}, {"server", f.Server}, {"site", f.Site}} {
		if eq.v != "" {
			w.add(eq.col+" = ?", eq.v)
		}
	}
	if len(f.Kinds) == 0 {
		w.add("kind <> ?", KindEvent) // events only when named (HasKind)
	}
	if len(f.Kinds) > 0 {
		// Records written before kinds existed have kind '' until a
		// read-write Open classifies them; they are classified below.
		// Probes written before they had a kind say error (Classify,
		// in HasKind below, tells them apart).
		kinds := f.Kinds
		if slices.Contains(kinds, KindProbe) && !slices.Contains(kinds, KindError) {
			kinds = append(slices.Clip(kinds), KindError)
		}
		args := make([]any, len(kinds))
		for i, k := range kinds {
			args[i] = k
		}
		w.add("(kind = '' OR kind IN (?"+strings.Repeat(",?", len(kinds)-1)+"))", args...)
	}
	if f.MinSize > 0 {
		w.add("(CASE WHEN size > bytes THEN size ELSE bytes END) >= ?", f.MinSize)
	}
	if !f.Before.IsZero() {
		ns := f.Before.Time.UnixNano()
		w.add("(time_ns < ? OR (time_ns = ? AND id < ?))", ns, ns, f.Before.ID)
	}
	where, args := w.where, w.args
	q := "SELECT " + recordColumns + " FROM records"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit > 0 {
		q += " ORDER BY time_ns DESC, id DESC LIMIT ?"
		args = append(args, f.Limit)
	} else {
		q += " ORDER BY time_ns, id"
	}
	return s.be.rebind(q), args
}

// whereClause is a query's conditions and their arguments, added together
// so that each placeholder's value stays beside its clause.
type whereClause struct {
	where []string
	args  []any
}

func (w *whereClause) add(clause string, args ...any) {
	w.where = append(w.where, clause)
	w.args = append(w.args, args...)
}

// Query returns the records f selects: oldest first, or the Limit newest,
// newest first.
func (s *Store) Query(ctx context.Context, f Filter) ([]Record, error) {
	var out []Record
	err := s.Each(ctx, f, func(r *Record) error {
		out = append(out, *r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Each calls fn with each record f selects, in Query's order, reading the
// rows one at a time from the database cursor: what it holds is one record,
// however many match. An error from fn stops the reading and is returned
// as it is.
func (s *Store) Each(ctx context.Context, f Filter, fn func(*Record) error) error {
	q, args := s.selectRecords(f)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return s.wrap("querying records", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return s.wrap("reading records", err)
		}
		if !HasKind(&r, f.Kinds) {
			continue
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.wrap("reading records", err)
	}
	return nil
}

// ErrNotFound is returned by Get for an unknown id.
var ErrNotFound = errors.New("no such record")

// Get returns one record.
func (s *Store) Get(ctx context.Context, id int64) (Record, error) {
	r, err := scanRecord(s.db.QueryRowContext(ctx, s.be.rebind("SELECT "+recordColumns+" FROM records WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("record %d: %w (list ids with pxeperf report --format json)", id, ErrNotFound)
	}
	if err != nil {
		return r, s.wrap(fmt.Sprintf("reading record %d", id), err)
	}
	return r, nil
}

// Intervals returns a record's interval samples in order.
func (s *Store) Intervals(ctx context.Context, id int64) ([]Interval, error) {
	rows, err := s.db.QueryContext(ctx, s.be.rebind(`SELECT start_us, end_us, bytes, retransmits, cwnd, snd_wnd, rtt_us
		FROM intervals WHERE record_id = ? ORDER BY seq`), id)
	if err != nil {
		return nil, s.wrap("querying intervals", err)
	}
	defer rows.Close()
	var out []Interval
	for rows.Next() {
		iv := Interval{RecordID: id}
		var start, end, rtt int64
		if err := rows.Scan(&start, &end, &iv.Bytes, &iv.Retransmits, &iv.Cwnd, &iv.SndWnd, &rtt); err != nil {
			return nil, s.wrap("reading intervals", err)
		}
		iv.Start, iv.End, iv.RTT = time.Duration(start)*time.Microsecond, time.Duration(end)*time.Microsecond,
			time.Duration(rtt)*time.Microsecond
		out = append(out, iv)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("reading intervals", err)
	}
	return out, nil
}
