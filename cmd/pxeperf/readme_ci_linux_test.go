//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestReadmeDriveFromCI runs the README's "Drive it from CI" script with
// sh and the built binary against a server doing what the host API does
// (hostAPI), its power switch a command that makes the board boot there.
// Only the admin URL, the token file and the job id are the test's; the
// rest runs verbatim: set, next boot once, power-cycle, wait, jq.
func TestReadmeDriveFromCI(t *testing.T) {
	nstest.RequireTool(t, "jq", "curl")
	m := regexp.MustCompile("(?s)## Drive it from CI\n.*?```sh\n(.*?)```").FindStringSubmatch(repoFile(t, "README.md"))
	if m == nil {
		t.Fatal(`README.md has no "## Drive it from CI" section with a sh block`)
	}
	script := m[1]
	h, url := newHostAPI(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "admin.token")
	bin := filepath.Join(dir, "bin")
	for name, body := range map[string]string{
		token: "tok\n",
		// The lab's power switch: here the board boots from hostAPI.
		filepath.Join(bin, "pdu-cycle"): "#!/bin/sh\ncurl -fsS -X POST -H 'Authorization: Bearer tok' " + url + "/test/boot/52:54:00:12:34:56\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(nstest.Binary(t), filepath.Join(bin, "pxeperf")); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{"/etc/pxeperf/admin.token": token, "http://pxe.lab:9069": url} {
		if !strings.Contains(script, from) {
			t.Fatalf("the README's script no longer has %q", from)
		}
		script = strings.ReplaceAll(script, from, to)
	}
	cmd := exec.Command("sh", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CI_JOB_ID=4711")
	cmd.WaitDelay = time.Minute
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's CI script failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "kernel: 9437184 bytes at 838.86 Mbit/s over http") {
		t.Errorf("the script printed:\n%s", out)
	}
	e := h.entries["52:54:00:12:34:56"]
	if e == nil || e.host["name"] != "board7" || e.next != nil {
		t.Errorf("after the job the entry is %+v, want board7 with its once next boot consumed", e)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if k := h.recs[len(h.recs)-3]; k.File != "ci/4711/vmlinuz" {
		t.Errorf("the board fetched %q, want the job's kernel", k.File)
	}
}
