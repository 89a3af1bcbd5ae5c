package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/record"
)

// hostAPI is a real HTTP server doing what the spec of issue 31 says the
// host API does, for the calls the CLI makes: entries with etags,
// If-Match / If-None-Match (412), 404, 409 for a config-only entry, 400
// with field and fix, 415, the token; and /api/fetches with kind, mac,
// file, since and limit over records it holds.
type hostAPI struct {
	mu      sync.Mutex
	entries map[string]*apiEntry
	recs    []record.Record
	puts    int
	// beforePut runs (locked) before each PUT of an entry is judged: a
	// concurrent writer.
	beforePut func(h *hostAPI, mac string)
	// onEvents runs (locked) at each read of kind=event: boards boot.
	onEvents func(h *hostAPI, n int)
	events   int
	missing  map[int64]int // GET /api/fetches/{id}: answer 404 this many times first
}

type apiEntry struct {
	host    map[string]any
	source  string
	next    *nextBoot
	version int
}

func (e *apiEntry) etag() string { return fmt.Sprintf(`"v%d"`, e.version) }

func newHostAPI(t *testing.T) (*hostAPI, string) {
	h := &hostAPI{entries: map[string]*apiEntry{}, missing: map[int64]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/hosts", h.list)
	mux.HandleFunc("GET /api/hosts/{mac}", h.get)
	mux.HandleFunc("PUT /api/hosts/{mac}", h.put)
	mux.HandleFunc("DELETE /api/hosts/{mac}", h.del)
	mux.HandleFunc("PUT /api/hosts/{mac}/next-boot", h.putNext)
	mux.HandleFunc("DELETE /api/hosts/{mac}/next-boot", h.delNext)
	mux.HandleFunc("GET /api/fetches", h.fetches)
	mux.HandleFunc("GET /api/fetches/{id}", h.fetch)
	mux.HandleFunc("POST /test/boot/{mac}", h.boot)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			fail(w, http.StatusUnauthorized, "missing or wrong token", "", "")
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func fail(w http.ResponseWriter, code int, msg, field, fix string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "field": field, "fix": fix})
}

func (h *hostAPI) entryJSON(mac string) map[string]any {
	e := h.entries[mac]
	return map[string]any{"mac": mac, "source": e.source, "etag": e.etag(), "host": e.host, "next_boot": e.next,
		"updated": "2026-12-02T14:00:00Z"}
}

func (h *hostAPI) answer(w http.ResponseWriter, code int, mac string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", h.entries[mac].etag())
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(h.entryJSON(mac))
}

func (h *hostAPI) list(w http.ResponseWriter, _ *http.Request) {
	var macs []string
	for m := range h.entries {
		macs = append(macs, m)
	}
	slices.Sort(macs)
	out := []map[string]any{}
	for _, m := range macs {
		out = append(out, h.entryJSON(m))
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"hosts": out})
}

func (h *hostAPI) get(w http.ResponseWriter, r *http.Request) {
	mac := r.PathValue("mac")
	if h.entries[mac] == nil {
		fail(w, http.StatusNotFound, "no host "+mac, "", "PUT /api/hosts/"+mac+" first")
		return
	}
	h.answer(w, http.StatusOK, mac)
}

// precondition applies If-Match and If-None-Match; false: answered 412.
func (h *hostAPI) precondition(w http.ResponseWriter, r *http.Request, e *apiEntry) bool {
	if im := r.Header.Get("If-Match"); im != "" && (e == nil || im != e.etag()) {
		fail(w, http.StatusPreconditionFailed, "the entry changed since it was read", "", "read it again")
		return false
	}
	if r.Header.Get("If-None-Match") == "*" && e != nil && e.source != "config" {
		fail(w, http.StatusPreconditionFailed, "an API entry exists", "", "read it and use If-Match")
		return false
	}
	return true
}

func (h *hostAPI) put(w http.ResponseWriter, r *http.Request) {
	mac := r.PathValue("mac")
	h.puts++
	if h.beforePut != nil {
		h.beforePut(h, mac)
	}
	if r.Header.Get("Content-Type") != "application/json" {
		fail(w, http.StatusUnsupportedMediaType, "want application/json", "", "")
		return
	}
	var host map[string]any
	if err := json.NewDecoder(r.Body).Decode(&host); err != nil {
		fail(w, http.StatusBadRequest, "bad JSON: "+err.Error(), "", "")
		return
	}
	if k, _ := host["kernel"].(string); strings.Contains(k, "..") {
		fail(w, http.StatusBadRequest, "hosts[0].kernel: "+k+" leaves the root", "kernel", "name a file in the root")
		return
	}
	e := h.entries[mac]
	if !h.precondition(w, r, e) {
		return
	}
	code := http.StatusOK
	switch {
	case e == nil:
		e, code = &apiEntry{source: "api"}, http.StatusCreated
		h.entries[mac] = e
	case e.source == "config":
		e.source = "api-over-config"
	}
	e.host = host
	e.version++
	h.answer(w, code, mac)
}

func (h *hostAPI) del(w http.ResponseWriter, r *http.Request) {
	mac := r.PathValue("mac")
	switch e := h.entries[mac]; {
	case e == nil:
		fail(w, http.StatusNotFound, "no API entry "+mac, "", "")
	case e.source == "config":
		fail(w, http.StatusConflict, "the host comes from the config", "", "the host comes from lab.yaml; edit it there")
	default:
		delete(h.entries, mac)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h *hostAPI) putNext(w http.ResponseWriter, r *http.Request) {
	mac := r.PathValue("mac")
	e := h.entries[mac]
	if e == nil {
		fail(w, http.StatusNotFound, "no host "+mac, "", "PUT /api/hosts/MAC first, or `pxeperf hosts set MAC`")
		return
	}
	var nb nextBoot
	if err := json.NewDecoder(r.Body).Decode(&nb); err != nil || nb.Action == "" {
		fail(w, http.StatusBadRequest, "bad next boot", "action", "action one of boot, local, shell")
		return
	}
	nb.Set = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	e.next = &nb
	e.version++
	h.addRecord(milestoneRecord(h.clock(), event.MilestoneNextBootSet, map[string]string{"kernel": nb.Kernel}))
	h.answer(w, http.StatusOK, mac)
}

// clock is a time after every record's: the store's order.
func (h *hostAPI) clock() time.Time {
	t := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	if n := len(h.recs); n > 0 {
		t = h.recs[n-1].Time
	}
	return t.Add(time.Second)
}

// boot is what a board does when it is power-cycled (a test's pdu-cycle):
// DHCP, then its next boot's kernel over HTTP, as records and milestones.
func (h *hostAPI) boot(w http.ResponseWriter, r *http.Request) {
	mac := r.PathValue("mac")
	e := h.entries[mac]
	if e == nil || e.next == nil || e.next.Kernel == "" {
		fail(w, http.StatusConflict, "nothing to boot", "", "")
		return
	}
	h.addRecord(milestoneRecord(h.clock(), event.MilestoneDHCPAck, map[string]string{"addr": "10.0.0.9"}))
	id := h.addRecord(record.Record{Time: h.clock(), Proto: "http", ClientMAC: mac, File: e.next.Kernel, Outcome: "ok",
		Bytes: 9 << 20, Size: 9 << 20, Duration: 90 * time.Millisecond, Mbps: 838.86, Kind: record.KindImage})
	h.addRecord(milestoneRecord(h.clock(), event.MilestoneKernelFetched, map[string]string{"file": e.next.Kernel,
		"record": strconv.FormatInt(id, 10), "mbps": "838.86", "proto": "http"}))
	if e.next.Once {
		e.next = nil
		e.version++
		h.addRecord(milestoneRecord(h.clock(), event.MilestoneNextBootConsumed, nil))
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hostAPI) delNext(w http.ResponseWriter, r *http.Request) {
	e := h.entries[r.PathValue("mac")]
	if e == nil || e.next == nil {
		fail(w, http.StatusNotFound, "no next boot", "", "")
		return
	}
	e.next = nil
	e.version++
	w.WriteHeader(http.StatusNoContent)
}

// fetches answers /api/fetches as the record API does: newest first,
// events only with kind=event.
func (h *hostAPI) fetches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kinds := q.Get("kind")
	if kinds == record.KindEvent {
		h.events++
		if h.onEvents != nil {
			h.onEvents(h, h.events)
		}
	}
	var since time.Time
	if s := q.Get("since"); s != "" {
		since, _ = time.Parse(time.RFC3339, s)
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	out := []record.Record{}
	for _, rec := range slices.Backward(h.recs) {
		if (rec.Kind == record.KindEvent) != (kinds == record.KindEvent) || q.Has("mac") && rec.ClientMAC != q.Get("mac") ||
			q.Has("file") && rec.File != q.Get("file") || rec.Time.Before(since) {
			continue
		}
		if out = append(out, rec); limit > 0 && len(out) == limit {
			break
		}
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (h *hostAPI) fetch(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if h.missing[id] > 0 {
		h.missing[id]--
		fail(w, http.StatusNotFound, "no such record", "", "")
		return
	}
	for _, rec := range h.recs {
		if rec.ID == id {
			_ = json.NewEncoder(w).Encode(rec)
			return
		}
	}
	fail(w, http.StatusNotFound, "no such record", "", "")
}

// addRecord appends a record (oldest first), giving it the next id.
func (h *hostAPI) addRecord(r record.Record) int64 {
	r.ID = int64(len(h.recs) + 1)
	h.recs = append(h.recs, r)
	return r.ID
}

// hostsCLI runs the CLI against url with the token and returns its exit
// code, stdout and stderr.
func hostsCLI(url string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append(args, "--admin", url, "--token", "tok"), &out, &errb)
	return code, out.String(), errb.String()
}

const mac7 = "52:54:00:12:34:56"

// TestHostsSet: set creates an entry (If-None-Match: *), then merges
// later flags into it, keeping the fields not named; --label k= removes a
// label.
func TestHostsSet(t *testing.T) {
	h, url := newHostAPI(t)
	code, out, errs := hostsCLI(url, "hosts", "set", "52-54-00-12-34-56", "--name", "board7", "--kernel", "vmlinuz",
		"--label", "rack=3", "--label", "lab=a", "--dhcp-option", "root_path=10.0.0.1:/nfs")
	if code != 0 || !strings.Contains(out, "set "+mac7+" (board7, api)") {
		t.Fatalf("create: %d %q %q", code, out, errs)
	}
	code, _, errs = hostsCLI(url, "hosts", "set", mac7, "--cmdline", "console=ttyS0", "--label", "rack=", "--label", "owner=ci")
	if code != 0 {
		t.Fatalf("update: %d %q", code, errs)
	}
	want := map[string]any{"mac": mac7, "name": "board7", "kernel": "vmlinuz", "cmdline": "console=ttyS0",
		"labels": map[string]any{"lab": "a", "owner": "ci"}, "dhcp_options": map[string]any{"root_path": "10.0.0.1:/nfs"}}
	if d := cmp.Diff(want, h.entries[mac7].host); d != "" {
		t.Errorf("entry (-want +got):\n%s", d)
	}
	// A config entry becomes a run-time entry over it, its fields kept.
	h.entries["52:54:00:00:00:02"] = &apiEntry{host: map[string]any{"mac": "52:54:00:00:00:02", "name": "b2"}, source: "config", version: 1}
	if code, _, errs := hostsCLI(url, "hosts", "set", "52:54:00:00:00:02", "--kernel", "k2"); code != 0 {
		t.Fatalf("over config: %d %q", code, errs)
	}
	if e := h.entries["52:54:00:00:00:02"]; e.source != "api-over-config" || e.host["name"] != "b2" || e.host["kernel"] != "k2" {
		t.Errorf("over config: %+v", e)
	}
}

// TestHostsSetStale: a concurrent writer between set's read and its
// write makes the If-Match stale (412): set reads again and merges over
// the other writer's change, losing neither; a writer that always wins
// makes set give up with exit status 1.
func TestHostsSetStale(t *testing.T) {
	h, url := newHostAPI(t)
	h.entries[mac7] = &apiEntry{host: map[string]any{"mac": mac7, "name": "board7"}, source: "api", version: 1}
	h.beforePut = func(h *hostAPI, mac string) {
		if h.puts == 1 {
			e := h.entries[mac]
			e.host = map[string]any{"mac": mac, "name": "board7", "initrd": "other-writer.img"}
			e.version++
		}
	}
	if code, _, errs := hostsCLI(url, "hosts", "set", mac7, "--kernel", "vmlinuz"); code != 0 {
		t.Fatalf("%d %q", code, errs)
	}
	want := map[string]any{"mac": mac7, "name": "board7", "initrd": "other-writer.img", "kernel": "vmlinuz"}
	if d := cmp.Diff(want, h.entries[mac7].host); d != "" || h.puts != 2 {
		t.Errorf("after a 412 and a retry (%d PUTs), entry (-want +got):\n%s", h.puts, d)
	}
	h.puts = 0
	h.beforePut = func(h *hostAPI, mac string) { h.entries[mac].version++ }
	code, _, errs := hostsCLI(url, "hosts", "set", mac7, "--kernel", "other")
	if code != 1 || !strings.Contains(errs, "412") || h.puts != 5 || h.entries[mac7].host["kernel"] != "vmlinuz" {
		t.Errorf("always stale: exit %d after %d PUTs, %q; kernel %v", code, h.puts, errs, h.entries[mac7].host["kernel"])
	}
}

// TestHostsErrors: exit status 2 for what the command line got wrong (a
// bad MAC, a value the API refuses with its field and fix, bad flags), 1
// for what may work later or elsewhere (no entry, a config-only entry to
// remove, a wrong token, no server).
func TestHostsErrors(t *testing.T) {
	h, url := newHostAPI(t)
	h.entries["52:54:00:00:00:02"] = &apiEntry{host: map[string]any{"mac": "52:54:00:00:00:02"}, source: "config", version: 1}
	for name, tt := range map[string]struct {
		args []string
		code int
		want []string
	}{
		"bad mac":       {[]string{"hosts", "show", "board7"}, 2, []string{`MAC "board7"`, "52:54:00:12:34:56"}},
		"no entry":      {[]string{"hosts", "show", mac7}, 1, []string{"HTTP 404", "PUT /api/hosts/" + mac7 + " first"}},
		"refused value": {[]string{"hosts", "set", mac7, "--kernel", "../etc/passwd"}, 2, []string{"HTTP 400", "kernel", "name a file in the root"}},
		"bad label":     {[]string{"hosts", "set", mac7, "--label", "rack"}, 2, []string{`--label "rack"`, "NAME=VALUE"}},
		"config only":   {[]string{"hosts", "rm", "52:54:00:00:00:02"}, 1, []string{"HTTP 409", "edit it there"}},
		"rm none":       {[]string{"hosts", "rm", mac7}, 1, []string{"HTTP 404"}},
		"no next host":  {[]string{"hosts", "next-boot", mac7, "--local"}, 1, []string{"HTTP 404", "pxeperf hosts set MAC"}},
		"nothing":       {[]string{"hosts", "next-boot", mac7}, 2, []string{"say what to boot next"}},
		"two things":    {[]string{"hosts", "next-boot", mac7, "--local", "--kernel", "k"}, 2, []string{"give one of"}},
		"initrd alone":  {[]string{"hosts", "next-boot", mac7, "--local", "--initrd", "i"}, 2, []string{"go with --kernel"}},
		"wait what":     {[]string{"hosts", "wait", mac7}, 2, []string{"--booted"}},
	} {
		code, _, errs := hostsCLI(url, tt.args...)
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d (%s)", name, code, tt.code, errs)
		}
		for _, w := range tt.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: %q lacks %q", name, errs, w)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"hosts", "list", "--admin", url, "--token", "wrong"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "HTTP 401") || !strings.Contains(errb.String(), "--token") {
		t.Errorf("wrong token: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"hosts", "list", "--admin", "ftp://x", "--token", "tok"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "http://HOST:PORT") {
		t.Errorf("bad --admin: %d %q", code, errb.String())
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	if code, _, errs := hostsCLI(srv.URL, "hosts", "list"); code != 1 || !strings.Contains(errs, "is pxeperf serve running") {
		t.Errorf("no server: %d %q", code, errs)
	}
}

// TestHostsListShowRm: list's table and --json, show's lines, rm.
func TestHostsListShowRm(t *testing.T) {
	h, url := newHostAPI(t)
	h.entries[mac7] = &apiEntry{host: map[string]any{"mac": mac7, "name": "board7", "kernel": "vmlinuz",
		"labels": map[string]any{"rack": "3"}}, source: "api", version: 1,
		next: &nextBoot{Action: "boot", Kernel: "test.img", Once: true}}
	h.entries["52:54:00:00:00:02"] = &apiEntry{host: map[string]any{"mac": "52:54:00:00:00:02"}, source: "config", version: 1}
	code, out, _ := hostsCLI(url, "hosts", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "MAC NAME SOURCE NEXT BOOT KERNEL" ||
		strings.Join(strings.Fields(lines[1]), " ") != "52:54:00:00:00:02 - config - -" ||
		strings.Join(strings.Fields(lines[2]), " ") != mac7+" board7 api boot test.img (once) vmlinuz" {
		t.Errorf("list: %d\n%s", code, out)
	}
	code, out, _ = hostsCLI(url, "hosts", "list", "--json")
	var v struct{ Hosts []hostEntry }
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v.Hosts) != 2 || v.Hosts[1].NextBoot.Kernel != "test.img" {
		t.Errorf("list --json: %d %v %s", code, err, out)
	}
	code, out, _ = hostsCLI(url, "hosts", "show", mac7)
	if code != 0 {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	for _, w := range []string{"source:     api", "name:       board7", `labels:     {"rack":"3"}`, "next boot:  boot kernel=test.img once"} {
		if !strings.Contains(out, w) {
			t.Errorf("show lacks %q:\n%s", w, out)
		}
	}
	if code, out, _ := hostsCLI(url, "hosts", "rm", mac7); code != 0 || h.entries[mac7] != nil || !strings.Contains(out, "removed") {
		t.Errorf("rm: %d %q", code, out)
	}
}

// TestHostsNextBoot: the flags become the next boot's JSON; --clear
// removes it.
func TestHostsNextBoot(t *testing.T) {
	h, url := newHostAPI(t)
	h.entries[mac7] = &apiEntry{host: map[string]any{"mac": mac7}, source: "api", version: 1}
	code, out, errs := hostsCLI(url, "hosts", "next-boot", mac7, "--kernel", "vmlinuz", "--initrd", "initrd.img",
		"--cmdline", "console=ttyS0 quiet", "--once")
	want := &nextBoot{Action: "boot", Kernel: "vmlinuz", Initrd: "initrd.img", Cmdline: "console=ttyS0 quiet", Once: true,
		Set: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)}
	if d := cmp.Diff(want, h.entries[mac7].next); code != 0 || d != "" {
		t.Errorf("kernel once: %d %q %q (-want +got):\n%s", code, out, errs, d)
	}
	if !strings.Contains(out, "next boot set for "+mac7) || !strings.Contains(out, "initrd=initrd.img") {
		t.Errorf("output %q", out)
	}
	if code, _, errs := hostsCLI(url, "hosts", "next-boot", mac7, "--local"); code != 0 || h.entries[mac7].next.Action != "local" ||
		h.entries[mac7].next.Kernel != "" {
		t.Errorf("local: %d %q %+v", code, errs, h.entries[mac7].next)
	}
	if code, _, errs := hostsCLI(url, "hosts", "next-boot", mac7, "--clear"); code != 0 || h.entries[mac7].next != nil {
		t.Errorf("clear: %d %q", code, errs)
	}
}

// milestoneRecord is a record of kind event as the store keeps one.
func milestoneRecord(at time.Time, what string, detail map[string]string) record.Record {
	hw, _ := net.ParseMAC(mac7)
	return record.FromMilestone(event.Milestone{Time: at, MAC: hw, What: what, Detail: detail}, "serve")
}

// TestHostsWaitBooted: wait counts from the board's latest next-boot-set
// (an older kernel fetch is not the one), keeps asking until the
// kernel-fetched milestone and its record are there, and prints that
// record; by the record's id when the milestone names it (a record not yet
// stored is waited for).
func TestHostsWaitBooted(t *testing.T) {
	for _, byID := range []bool{false, true} {
		h, url := newHostAPI(t)
		h.entries[mac7] = &apiEntry{host: map[string]any{"mac": mac7}, source: "api", version: 1}
		t0 := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
		old := record.Record{Time: t0.Add(-time.Hour), Proto: "http", ClientMAC: mac7, File: "vmlinuz", Outcome: "ok", Mbps: 1}
		h.addRecord(old)
		h.addRecord(milestoneRecord(t0.Add(-time.Hour), event.MilestoneKernelFetched, map[string]string{"file": "vmlinuz"}))
		h.addRecord(milestoneRecord(t0, event.MilestoneNextBootSet, map[string]string{"kernel": "vmlinuz"}))
		h.onEvents = func(h *hostAPI, n int) {
			if n != 3 {
				return // the board boots while wait asks
			}
			h.addRecord(milestoneRecord(t0.Add(2*time.Second), event.MilestoneDHCPAck, nil))
			id := h.addRecord(record.Record{Time: t0.Add(4 * time.Second), Proto: "http", ClientMAC: mac7, File: "vmlinuz",
				Outcome: "ok", Bytes: 8 << 20, Mbps: 812.5, Kind: record.KindImage})
			d := map[string]string{"file": "vmlinuz", "record": ""}
			if byID {
				d["record"] = strconv.FormatInt(id, 10)
				h.missing[id] = 2
			}
			h.addRecord(milestoneRecord(t0.Add(5*time.Second), event.MilestoneKernelFetched, d))
			// The board boots again at once: that later fetch is not the one.
			h.addRecord(record.Record{Time: t0.Add(20 * time.Second), Proto: "http", ClientMAC: mac7, File: "vmlinuz",
				Outcome: "ok", Mbps: 2})
		}
		code, out, errs := hostsCLI(url, "hosts", "wait", mac7, "--booted", "--timeout", "1m", "--poll", "5ms")
		var got record.Record
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Mbps != 812.5 || got.File != "vmlinuz" {
			t.Errorf("by id %v: exit %d, %v, record %+v (stderr %q)", byID, code, err, got, errs)
		}
	}
}

// TestHostsWaitTimeout: with no kernel fetch, wait gives up after
// --timeout with exit status 1, naming the board and what it waited for.
func TestHostsWaitTimeout(t *testing.T) {
	h, url := newHostAPI(t)
	h.entries[mac7] = &apiEntry{host: map[string]any{"mac": mac7}, source: "api", version: 1}
	h.addRecord(milestoneRecord(time.Now(), event.MilestoneNextBootSet, nil))
	code, _, errs := hostsCLI(url, "hosts", "wait", mac7, "--booted", "--timeout", "100ms", "--poll", "5ms")
	for _, w := range []string{mac7, "no kernel fetch within 100ms", "kernel-fetched", "next boot was set at"} {
		if !strings.Contains(errs, w) {
			t.Errorf("%q lacks %q", errs, w)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if code, _, errs := hostsCLI(url, "hosts", "wait", "52:54:00:00:00:09", "--booted", "--timeout", "1s"); code != 1 ||
		!strings.Contains(errs, "HTTP 404") {
		t.Errorf("no such host: %d %q", code, errs)
	}
}
