package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
)

// config check lists the hosts set at run time beside the file's, with
// where each comes from; a hosts.json serve would refuse fails the check.
func TestConfigCheckRuntimeHosts(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "lab.yaml")
	yaml := "root: " + dir + "\ndata: " + data + "\nhosts:\n  - mac: 52:54:00:00:00:01\n    name: one\n    kernel: k1\n" +
		"  - mac: 52:54:00:00:00:02\n    name: two\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "config", "check", cfgPath)
	if err != nil || strings.Contains(out, "set at run time") {
		t.Fatalf("without hosts.json: %v\n%s", err, out)
	}
	cfg, err := configs.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := hosts.Open(hosts.Options{Path: filepath.Join(data, hosts.FileName), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := hosts.ParseMAC("52:54:00:00:00:02")
	m3, _ := hosts.ParseMAC("52:54:00:00:00:03")
	if _, _, err := st.Put(m2, []byte(`{"name":"two-api","kernel":"k2"}`), hosts.Cond{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(m3, []byte(`{"name":"three"}`), hosts.Cond{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetNextBoot(m3, []byte(`{"kernel":"ci","once":true}`), hosts.Cond{}); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "config", "check", cfgPath)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"# hosts, with those set at run time (" + filepath.Join(data, hosts.FileName) + "):",
		"# 52:54:00:00:00:01 one: config, kernel k1",
		"# 52:54:00:00:00:02 two-api: api-over-config, kernel k2",
		"# 52:54:00:00:00:03 three: api, kernel ci, next boot boot ci (once)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check lacks %q:\n%s", want, out)
		}
	}
	if err := os.WriteFile(filepath.Join(data, hosts.FileName), []byte(`{"version":1,"hosts":[{"mac":"52:54:00:00:00:09","host":{"kernl":"x"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, "config", "check", cfgPath); err == nil || !strings.Contains(err.Error(), `kernl: unknown key "kernl"`) {
		t.Errorf("a bad hosts.json: %v\n%s", err, out)
	}
}
