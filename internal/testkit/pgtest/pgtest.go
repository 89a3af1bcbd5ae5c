// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb in
// a temporary folder, a server listening only on a unix socket there (so
// test namespaces reach it through the shared filesystem, and nothing else
// can), stopped and removed in t.Cleanup. Tests skip, naming the package to
// install, where the server binaries are missing.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// Cluster is one running (or stopped) PostgreSQL server.
type Cluster struct {
	t testing.TB
	// Dir holds the cluster (Dir/data), its log (Dir/log) and its socket.
	Dir       string
	bin       string
	asUser    func(*exec.Cmd) // sets the server's user (serverUser); nil: ours
	running   bool
	dbs       atomic.Int32
	Superuser string
}

// Bin finds the PostgreSQL server binaries: $PXEPERF_PG_BIN, else the
// newest /usr/lib/postgresql/*/bin (Debian), else initdb in PATH.
func Bin() string {
	if b := os.Getenv("PXEPERF_PG_BIN"); b != "" {
		return b
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start initializes and starts a cluster, stopped and removed at cleanup.
// As root, the server runs as the postgres user (else nobody): PostgreSQL
// refuses to run as root.
func Start(t testing.TB) *Cluster {
	t.Helper()
	bin := Bin()
	if bin == "" {
		t.Skip("needs the PostgreSQL server binaries (initdb, pg_ctl): apt-get install -y postgresql (.ci/run installs it), or set PXEPERF_PG_BIN")
	}
	dir, err := os.MkdirTemp("", "pxeperf-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, Dir: dir, bin: bin, Superuser: "pxeperf"}
	t.Cleanup(func() {
		if c.running {
			_, _ = c.ctl("stop", "-m", "immediate", "-w", "-t", "30")
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "log")); err == nil {
				t.Logf("postgres log:\n%s", tail(string(b), 4000))
			}
		}
		os.RemoveAll(dir)
	})
	if c.asUser, err = serverUser(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := c.run("initdb", "-D", c.data(), "-U", c.Superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("\nlisten_addresses = ''\nunix_socket_directories = '%s'\nfsync = off\nfull_page_writes = off\n"+
		"max_connections = 40\nshared_buffers = 32MB\nlog_min_messages = warning\n", dir)
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(conf)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.StartAgain()
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.asUser != nil {
		c.asUser(cmd)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *Cluster) ctl(args ...string) (string, error) {
	return c.run("pg_ctl", append([]string{"-D", c.data(), "-l", filepath.Join(c.Dir, "log")}, args...)...)
}

// Stop stops the server (fast: open connections are cut, as when the
// database host goes down).
func (c *Cluster) Stop() {
	c.t.Helper()
	if out, err := c.ctl("stop", "-m", "fast", "-w", "-t", "60"); err != nil {
		c.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
	c.running = false
}

// StartAgain starts the stopped server and waits until it accepts
// connections.
func (c *Cluster) StartAgain() {
	c.t.Helper()
	if out, err := c.ctl("start", "-w", "-t", "60"); err != nil {
		b, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
		c.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, b)
	}
	c.running = true
}

// URL is a connection URL for database db over the unix socket.
func (c *Cluster) URL(db string) string {
	return "postgres://" + c.Superuser + "@/" + db + "?host=" + url.QueryEscape(c.Dir) + "&sslmode=disable"
}

// NewDB creates an empty database and returns its URL.
func (c *Cluster) NewDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", c.dbs.Add(1))
	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return c.URL(name)
}

// Exec runs SQL on database url (test set-up and checks).
func Exec(t testing.TB, dbURL, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", strings.SplitN(q, "\n", 2)[0], err)
	}
}

// Count runs a query returning one integer.
func Count(t testing.TB, dbURL, q string, args ...any) int {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
