package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/admin"
	"github.com/pxeperf/pxeperf/dashboard"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/tftp"
)

type stubTFTP struct{ st tftp.Stats }

func (s stubTFTP) Stats() tftp.Stats { return s.st }

// startStatusAdmin runs an admin listener on loopback with a token and the
// dashboard mounted as serve mounts it (mountLive), reading tftp (nil: no
// TFTP server); it returns its address and the flags that reach it.
func startStatusAdmin(t *testing.T, src dashboard.TFTPSource) (addr string, flags []string) {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "pxeperf.yaml")
	if err := os.WriteFile(cfgFile, []byte("admin:\n  token_file: "+tokenFile+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := admin.New(admin.Options{Listen: "127.0.0.1:0", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	d := dashboard.New(dashboard.Options{Active: event.NewActive()})
	d.SetSources(nil, nil, src)
	d.Register(s)
	servetest.Run(t, "admin", 10*time.Second, s.Serve)
	return s.Addr().String(), []string{"--config", cfgFile, "--admin-addr", s.Addr().String()}
}

func runStatusCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCmdSplit(t, append([]string{"status"}, args...)...)
	if err != nil {
		t.Fatalf("status %v: %v\n%s", args, err, errOut)
	}
	return out
}

// TestStatusTFTPCounters: `pxeperf status` shows the TFTP server's counters
// as the dashboard's /api/active carries them: the same object in JSON, and
// every counter (each a value of its own here) and every refusal reason in
// the text's TFTP part; with no TFTP server, neither has a TFTP part.
func TestStatusTFTPCounters(t *testing.T) {
	src := stubTFTP{tftp.Stats{Requests: 1001, Malformed: 1002, Duplicates: 1003, Busy: 1004, Replaced: 1005, Stray: 1006,
		Threaded: 1007, Polled: 1008, ThreadRecvs: 1009, ThreadsBusy: 1010, ThreadsCap: 1011, Pinned: 1013, PassedOn: 1014, Unsent: 1015,
		Refused: map[string]uint64{tftp.RefuseBusy: 1000, tftp.RefuseClientBusy: 4, tftp.RefuseUnproven: 1012}}}
	addr, flags := startStatusAdmin(t, src)

	// What the dashboard serves, read as the page reads it.
	var active struct {
		TFTP *dashboard.TFTPCounters `json:"tftp"`
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/active", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&active)
	resp.Body.Close()
	if err != nil || active.TFTP == nil {
		t.Fatalf("/api/active: tftp %v, %v", active.TFTP, err)
	}

	var v statusView
	out := runStatusCmd(t, append(flags, "--format", "json")...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}
	if diff := cmp.Diff(active.TFTP, v.TFTP); diff != "" {
		t.Errorf("status --format json tftp differs from /api/active's (-dashboard +status):\n%s", diff)
	}

	text := runStatusCmd(t, flags...)
	t.Logf("status:\n%s", text)
	_, part, ok := strings.Cut(text, "\nTFTP\n")
	if !ok {
		t.Fatalf("status has no TFTP part:\n%s", text)
	}
	cv := reflect.ValueOf(*active.TFTP)
	for i := range cv.NumField() {
		f, name := cv.Field(i), cv.Type().Field(i).Name
		var n string
		switch f.Kind() {
		case reflect.Int64:
			n = strconv.FormatInt(f.Int(), 10)
		case reflect.Uint64:
			n = strconv.FormatUint(f.Uint(), 10)
		default:
			continue
		}
		if !regexp.MustCompile(`\b` + n + `\b`).MatchString(part) {
			t.Errorf("status's TFTP part does not show %s (%s):\n%s", name, n, part)
		}
	}
	for reason, n := range src.st.Refused {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(reason) + `\s+` + strconv.FormatUint(n, 10) + `$`).MatchString(part) {
			t.Errorf("status's TFTP part has no line %q %d:\n%s", reason, n, part)
		}
	}

	_, none := startStatusAdmin(t, nil)
	if text := runStatusCmd(t, none...); strings.Contains(text, "\nTFTP\n") {
		t.Errorf("no TFTP server, yet status shows a TFTP part:\n%s", text)
	}
	if out := runStatusCmd(t, append(none, "--format", "json")...); strings.Contains(out, `"tftp"`) {
		t.Errorf("no TFTP server, yet status --format json has tftp:\n%s", out)
	}
}

// TestPrintHealth: a degraded serve's problems and record state are
// printed, escaped, and a healthy one's in one line.
func TestPrintHealth(t *testing.T) {
	var h map[string]any
	body := `{"status":"degraded","problems":["record store failing for 4s: disk full","\u001b[2J1 records dropped"],
		"records":{"store":"failing","pending":3,"lag_s":4.2,"journal_backlog":7,"journal_bytes":1048576,"journal_max_bytes":4194304,
		"dropped":12,"dropped_by":{"record: journal full":12},"disk_full":true,"data_free_bytes":0}}`
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printHealth(&b, h)
	want := `health: DEGRADED
  - record store failing for 4s: disk full
  - \x1b[2J1 records dropped
records: store failing, 3 waiting in memory (4.2s behind), 7 in the journal only; journal 1.0 of 4 MiB; 12 dropped (12 record: journal full); data folder 0 MiB free; DISK FULL
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("printHealth (-want +got):\n%s", d)
	}
	b.Reset()
	printHealth(&b, map[string]any{"status": "ok"})
	if b.String() != "health: ok\n" {
		t.Errorf("healthy: %q", b.String())
	}
}
