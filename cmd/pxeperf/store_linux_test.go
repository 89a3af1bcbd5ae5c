//go:build linux

package main

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/internal/testkit/pgtest"
	"golang.org/x/sys/unix"
)

// lab is one pxeperf serve in a namespace pair, recording into a shared
// PostgreSQL, and a client fetching from the other side.
type lab struct {
	t                 *testing.T
	name, site        string
	bin, cfg          string
	pair              *nstest.Pair
	root, data, store string
	base              string
	client            *http.Client
	proc              *nstest.Proc

	mu sync.Mutex
	ok []int // seq of every fetch the client read whole
}

func newLab(t *testing.T, name, site, store string) *lab {
	p := nstest.NewPair(t, nstest.Options{})
	dir := t.TempDir()
	l := &lab{t: t, name: name, site: site, bin: nstest.Binary(t), pair: p, store: store,
		root: filepath.Join(dir, "images"), data: filepath.Join(dir, "data"), cfg: filepath.Join(dir, "pxeperf.yaml"),
		base: "http://" + p.ServerIP.String() + ":8080"}
	if err := os.MkdirAll(l.root, 0o755); err != nil {
		t.Fatal(err)
	}
	nstest.RandomFile(t, filepath.Join(l.root, "f.img"), 32<<10, 1)
	cfg := fmt.Sprintf("server:\n  name: %s\n  site: %s\nstore:\n  url: %q\n  batch: 1000\n", name, site, store)
	if err := os.WriteFile(l.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       nstest.DialContext(p.Client),
	}}
	return l
}

// start runs serve and waits until it answers /healthz.
func (l *lab) start() {
	l.t.Helper()
	l.proc = nstest.Start(l.t, l.pair.Server, l.bin, "serve", "--config", l.cfg, "--iface", l.pair.ServerIf,
		"--dhcp", "off", "--tftp-addr", "off", "--admin-addr", "off", "--http-addr", l.pair.ServerIP.String()+":8080",
		"--root", l.root, "--data", l.data)
	if !nstest.WaitFor(20*time.Second, nstest.Healthy(l.client, l.base)) {
		l.t.Fatalf("%s: serve did not answer /healthz:\n%s", l.name, l.proc.Out.String())
	}
}

// kill SIGKILLs serve (the journal is all it leaves) and starts it again.
func (l *lab) killAndRestart() {
	l.t.Helper()
	_ = l.proc.Signal(unix.SIGKILL)
	l.proc.Kill()
	l.start()
}

// traffic fetches f.img with a sequence label until stop closes; the seqs
// of fetches read whole are kept.
func (l *lab) traffic(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		resp, err := l.client.Get(fmt.Sprintf("%s/f.img?label.seq=%d", l.base, seq))
		if err != nil {
			time.Sleep(20 * time.Millisecond) // serve is being restarted
			continue
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK && n == 32<<10 {
			l.mu.Lock()
			l.ok = append(l.ok, seq)
			l.mu.Unlock()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stored counts the records of this lab in PostgreSQL by seq label.
func (l *lab) stored(db *sql.DB) (map[int]int, error) {
	rows, err := db.Query(`SELECT l.value, count(*) FROM records r JOIN labels l ON l.record_id = r.id AND l.key = 'seq'
		WHERE r.server = $1 AND r.site = $2 GROUP BY l.value`, l.name, l.site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var v string
		var n int
		if err := rows.Scan(&v, &n); err != nil {
			return nil, err
		}
		var seq int
		fmt.Sscan(v, &seq)
		out[seq] = n
	}
	return out, rows.Err()
}

// TestTwoLabsOnePostgres is the acceptance test: a PostgreSQL
// cluster the test started (unix socket in a temp folder, reached from
// both server namespaces through the shared filesystem), two `pxeperf
// serve` (the real binary) in two namespace pairs recording into it under
// their own server.name and server.site. Mid-traffic the database stops;
// lab-a is SIGKILLed while it is down (its records only in its journal) and
// comes back, the database starts again and lab-b is SIGKILLed while it
// ships its backlog. Afterwards every fetch a client read whole is in
// PostgreSQL exactly once, and no fetch twice; report --store groups them
// by server and site.
func TestTwoLabsOnePostgres(t *testing.T) {
	nstest.RequireRoot(t)
	pg := pgtest.Start(t)
	url := pg.NewDB(t)
	a, b := newLab(t, "lab-a", "north", url), newLab(t, "lab-b", "south", url)
	a.start()
	b.start()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go a.traffic(stop, &wg)
	go b.traffic(stop, &wg)
	var stopped atomic.Bool
	defer func() {
		if !stopped.Load() {
			close(stop)
			wg.Wait()
		}
	}()

	for _, step := range []struct {
		after time.Duration // of traffic before the step
		what  string
		do    func()
	}{
		{2 * time.Second, "stopping PostgreSQL", pg.Stop},
		{1500 * time.Millisecond, "SIGKILL lab-a while the database is down", a.killAndRestart},
		{1500 * time.Millisecond, "starting PostgreSQL", pg.StartAgain},
		{300 * time.Millisecond, "SIGKILL lab-b while it ships its backlog", b.killAndRestart},
	} {
		time.Sleep(step.after)
		t.Log(step.what)
		step.do()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	stopped.Store(true)

	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, l := range []*lab{a, b} {
		if len(l.ok) < 50 {
			t.Fatalf("%s: only %d fetches completed", l.name, len(l.ok))
		}
		var got map[int]int
		if !nstest.WaitFor(60*time.Second, func() bool {
			got, err = l.stored(db)
			if err != nil {
				return false
			}
			for _, seq := range l.ok {
				if got[seq] == 0 {
					return false
				}
			}
			return true
		}) {
			missing := 0
			for _, seq := range l.ok {
				if got[seq] == 0 {
					missing++
				}
			}
			t.Errorf("%s: %d of %d fetches never reached PostgreSQL (err %v)\n%s", l.name, missing, len(l.ok), err, l.proc.Out.String())
		}
		doubled := 0
		for _, n := range got {
			if n > 1 {
				doubled++
			}
		}
		if doubled > 0 {
			t.Errorf("%s: %d fetches stored more than once", l.name, doubled)
		}
		t.Logf("%s: %d fetches read whole, %d stored (each once)", l.name, len(l.ok), len(got))
	}
	if !strings.Contains(a.proc.Out.String(), "record journal: importing entries from the last run") &&
		!strings.Contains(b.proc.Out.String(), "record journal: importing entries from the last run") {
		t.Errorf("no restart imported a journal: the kills did not hit unshipped records")
	}

	out, err := exec.Command(a.bin, "report", "--store", url, "--table", "servers").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "lab-a") || !strings.Contains(string(out), "lab-b") ||
		!strings.Contains(string(out), "north") || !strings.Contains(string(out), "south") {
		t.Errorf("report --store --table servers: %v\n%s", err, out)
	}
	t.Logf("pxeperf report --table servers:\n%s", out)
}
