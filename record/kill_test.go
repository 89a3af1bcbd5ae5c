//go:build linux

package record_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/record"
)

// killEnv runs the real binary's serve in a server namespace and fetches
// from a client namespace.
type killEnv struct {
	t          *testing.T
	bin        string
	pair       *nstest.Pair
	root, data string
	client     *http.Client
	base       string
}

func newKillEnv(t *testing.T) *killEnv {
	nstest.RequireRoot(t)
	bin := nstest.Binary(t)
	p := nstest.NewPair(t, nstest.Options{})
	e := &killEnv{t: t, bin: bin, pair: p, root: t.TempDir(), data: t.TempDir(),
		base: "http://" + p.ServerIP.String() + ":8080"}
	if err := os.Chmod(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	e.client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       nstest.DialContext(p.Client),
	}}
	return e
}

// start runs serve and waits until /healthz answers.
func (e *killEnv) start() *nstest.Proc {
	e.t.Helper()
	proc := nstest.Start(e.t, e.pair.Server, e.bin, "serve", "--iface", e.pair.ServerIf,
		"--dhcp", "off", "--tftp-addr", "off", "--http-addr", e.pair.ServerIP.String()+":8080",
		"--root", e.root, "--data", e.data, "--log-level", "debug")
	if !nstest.WaitFor(15*time.Second, nstest.Healthy(e.client, e.base)) {
		e.t.Fatalf("serve did not answer /healthz:\n%s", proc.Out.String())
	}
	return proc
}

// fetch reads a whole file and returns when the last byte is in.
func (e *killEnv) fetch(name string, size int) {
	e.t.Helper()
	resp, err := e.client.Get(e.base + "/" + name)
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != int64(size) {
		e.t.Fatalf("GET %s: %d bytes, %v; want %d", name, n, err, size)
	}
}

// records returns the stored records by file name, read as report does.
func (e *killEnv) records() map[string]int {
	e.t.Helper()
	st, err := record.OpenReadOnly(e.data)
	if err != nil {
		return nil
	}
	defer st.Close()
	rs, err := st.Query(context.Background(), record.Filter{Source: "serve"})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rs {
		out[r.File]++
	}
	return out
}

// TestRecordSurvivesSIGKILL: a fetch is in the store after serve is killed
// with SIGKILL, whether the kill comes after the record was seen committed
// or right after the client read the last byte, without waiting. Each
// restart imports what the journal kept.
func TestRecordSurvivesSIGKILL(t *testing.T) {
	e := newKillEnv(t)
	const size = 1 << 20
	const rounds = 8
	for i := range rounds + 1 {
		nstest.RandomFile(t, filepath.Join(e.root, fmt.Sprintf("f%d.img", i)), size, uint64(i))
	}

	// 1. Wait until the record is visible to a reader, then SIGKILL.
	proc := e.start()
	e.fetch("f0.img", size)
	if !nstest.WaitFor(10*time.Second, func() bool { return e.records()["f0.img"] == 1 }) {
		t.Fatalf("record of f0.img never committed; store has %v\n%s", e.records(), proc.Out.String())
	}
	proc.Kill()
	// A reader opens the store a killed server left behind (WAL not
	// checkpointed) without a restart.
	if got := e.records(); got["f0.img"] != 1 {
		t.Fatalf("after kill -9 a reader sees %v, want /f0.img once", got)
	}

	// 2. SIGKILL as soon as the client has the last byte, several times.
	for i := 1; i <= rounds; i++ {
		proc := e.start()
		e.fetch(fmt.Sprintf("f%d.img", i), size)
		proc.Kill()
	}

	// After a restart every fetch is in the store exactly once.
	proc = e.start()
	want := map[string]int{}
	for i := 0; i <= rounds; i++ {
		want[fmt.Sprintf("f%d.img", i)] = 1
	}
	var got map[string]int
	ok := nstest.WaitFor(10*time.Second, func() bool {
		got = e.records()
		return len(got) == len(want)
	})
	for name := range want {
		if got[name] != 1 {
			ok = false
		}
	}
	if !ok {
		t.Fatalf("after kill -9 and restart the store has %v, want each of %v once\n%s", got, want, proc.Out.String())
	}
	proc.Kill()
}

// TestServeWithBrokenStore: a corrupt store file does not stop serving; the
// log says what is wrong and how to fix it, fetches wait in the journal,
// and once the file is moved aside a restart stores them.
func TestServeWithBrokenStore(t *testing.T) {
	e := newKillEnv(t)
	const size = 256 << 10
	nstest.RandomFile(t, filepath.Join(e.root, "a.img"), size, 1)
	db := filepath.Join(e.data, record.FileName)
	if err := os.WriteFile(db, []byte(strings.Repeat("garbage ", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := e.start()
	e.fetch("a.img", size)
	if !nstest.WaitFor(10*time.Second, func() bool {
		return strings.Contains(proc.Out.String(), "msg=fetch")
	}) {
		t.Fatalf("no fetch logged:\n%s", proc.Out.String())
	}
	out := proc.Out.String()
	for _, want := range []string{"record store unavailable; serving goes on", "mv " + db, "RECORDING TO THE STORE IS OFF"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve log lacks %q:\n%s", want, out)
		}
	}
	proc.Kill()
	if err := os.Rename(db, db+".bad"); err != nil {
		t.Fatal(err)
	}
	proc = e.start()
	if !nstest.WaitFor(10*time.Second, func() bool { return e.records()["a.img"] == 1 }) {
		t.Fatalf("journaled fetch not imported after the fix: %v\n%s", e.records(), proc.Out.String())
	}
}
