package hosts

import (
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
)

// milestones records what a Store or Watch says.
type milestones struct {
	mu  sync.Mutex
	got []event.Milestone
}

func (m *milestones) Milestone(e event.Milestone) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, e)
}

func (m *milestones) whats() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.got {
		out = append(out, e.What)
	}
	return out
}

func yamlConfig(t testing.TB, yaml string) *configs.Config {
	t.Helper()
	c, err := configs.Parse("lab.yaml", []byte(yaml), configs.Default())
	if err != nil {
		t.Fatal(err)
	}
	c.File = "lab.yaml"
	return c
}

const labYAML = "hosts:\n  - mac: 52:54:00:00:00:01\n    name: yaml1\n    kernel: yk\n    address: 10.0.0.10\n"

func openStore(t *testing.T, dir string, cfg *configs.Config, ms event.MilestoneSink) *Store {
	t.Helper()
	s, err := Open(Options{Path: filepath.Join(dir, FileName), Config: cfg, Milestones: ms})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustMAC(s string) net.HardwareAddr {
	m, err := ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// The merge: the config's hosts are the base, a run-time entry of the same
// MAC replaces the config's whole, and each says where it comes from.
func TestStoreMerge(t *testing.T) {
	s := openStore(t, t.TempDir(), yamlConfig(t, labYAML), nil)
	m1, m2 := mustMAC("52:54:00:00:00:01"), mustMAC("525400000002")
	if _, created, err := s.Put(m2, []byte(`{"name":"api2","kernel":"k2"}`), Cond{}); err != nil || !created {
		t.Fatalf("Put new: created %v, %v", created, err)
	}
	if _, created, err := s.Put(m1, []byte(`{"name":"over1","initrd":"i1"}`), Cond{}); err != nil || !created {
		t.Fatalf("Put over config: created %v, %v", created, err)
	}
	got := map[string]string{}
	for _, e := range s.List() {
		got[e.MAC.String()] = e.Source + " " + e.Host.Name + " " + e.Effective().Kernel
	}
	want := map[string]string{m1.String(): "api-over-config over1 ", m2.String(): "api api2 k2"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if err := s.Delete(m1, Cond{}); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.Get(m1); e.Source != SourceConfig || e.Host.Kernel != "yk" {
		t.Errorf("after delete the config's entry is not back: %+v", e)
	}
	if err := s.Delete(m1, Cond{}); !errors.Is(err, ErrFromConfig) || !strings.Contains(err.Error(), "lab.yaml") {
		t.Errorf("delete of a config-only host: %v, want ErrFromConfig naming lab.yaml", err)
	}
	if err := s.Delete(mustMAC("52:54:00:00:00:09"), Cond{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete of an unknown host: %v, want ErrNotFound", err)
	}
	// A fixed address the config gives another host is refused, as
	// config check refuses it, naming the other host.
	_, _, err := s.Put(m2, []byte(`{"address":"10.0.0.10"}`), Cond{})
	var es configs.Errors
	if !errors.As(err, &es) || es[0].Key != "address" || !strings.Contains(err.Error(), "is also the address of hosts[0]") {
		t.Errorf("duplicate address: %v", err)
	}
}

// Etags: every acknowledged change of an entry or its next boot gives a
// new one (writing the same entry again too); a stale If-Match is
// refused, If-None-Match: * refuses to replace a run-time entry.
func TestStoreETags(t *testing.T) {
	s := openStore(t, t.TempDir(), yamlConfig(t, labYAML), nil)
	m := mustMAC("52:54:00:00:00:02")
	body := []byte(`{"kernel":"k"}`)
	e1, _, err := s.Put(m, body, Cond{IfNoneMatch: true})
	if err != nil {
		t.Fatal(err)
	}
	e2, _, err := s.Put(m, body, Cond{IfMatch: []string{e1.ETag}})
	if err != nil || e2.ETag == e1.ETag {
		t.Fatalf("rewrite: etag %s -> %s, %v; want a new etag", e1.ETag, e2.ETag, err)
	}
	if _, _, err := s.Put(m, body, Cond{IfMatch: []string{e1.ETag}}); !errors.Is(err, ErrPrecondition) {
		t.Errorf("stale If-Match: %v, want ErrPrecondition", err)
	}
	if _, _, err := s.Put(m, body, Cond{IfNoneMatch: true}); !errors.Is(err, ErrPrecondition) {
		t.Errorf("If-None-Match * over an existing entry: %v", err)
	}
	e3, err := s.SetNextBoot(m, []byte(`{"action":"local"}`), Cond{IfMatch: []string{e2.ETag}})
	if err != nil || e3.ETag == e2.ETag {
		t.Fatalf("next boot: etag %s -> %s, %v", e2.ETag, e3.ETag, err)
	}
	e4, err := s.ClearNextBoot(m, Cond{})
	if err != nil || e4.ETag == e3.ETag || e4.ETag == e2.ETag {
		t.Fatalf("cleared next boot: etags %s %s %s, %v", e2.ETag, e3.ETag, e4.ETag, err)
	}
	if err := s.Delete(m, Cond{IfMatch: []string{e3.ETag}}); !errors.Is(err, ErrPrecondition) {
		t.Errorf("delete with a stale etag: %v", err)
	}
	if err := s.Delete(m, Cond{IfMatch: []string{e4.ETag}}); err != nil {
		t.Fatal(err)
	}
	// Created again: the revision goes on, so no old etag comes back.
	e5, _, err := s.Put(m, body, Cond{})
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{e1.ETag, e2.ETag, e3.ETag, e4.ETag} {
		if e5.ETag == old {
			t.Errorf("an etag came back after delete and create: %s", old)
		}
	}
	// A config entry has an etag too, and If-Match guards a next boot on it.
	c, _ := s.Get(mustMAC("52:54:00:00:00:01"))
	if _, err := s.SetNextBoot(c.MAC, []byte(`{"kernel":"x"}`), Cond{IfMatch: []string{`"nope"`}}); !errors.Is(err, ErrPrecondition) {
		t.Errorf("next boot on a config host with a wrong etag: %v", err)
	}
}

// Next boot overlay and validation.
func TestNextBoot(t *testing.T) {
	ms := &milestones{}
	s := openStore(t, t.TempDir(), yamlConfig(t, labYAML), ms)
	m := mustMAC("52:54:00:00:00:01")
	e, err := s.SetNextBoot(m, []byte(`{"action":"boot","kernel":"nk","initrd":"ni","cmdline":"c","once":true}`), Cond{})
	if err != nil {
		t.Fatal(err)
	}
	if h := e.Effective(); h.Kernel != "nk" || h.Initrd != "ni" || h.Cmdline != "c" || e.Host.Kernel != "yk" {
		t.Errorf("boot overlay: effective %+v, base %+v", h, e.Host)
	}
	if eff := s.Effective(); len(eff) != 1 || eff[0].Kernel != "nk" {
		t.Errorf("effective hosts: %+v", eff)
	}
	e, err = s.SetNextBoot(m, []byte(`{"action":"local"}`), Cond{})
	if err != nil {
		t.Fatal(err)
	}
	if h := e.Effective(); h.Kernel != "" || h.DefaultBoot != configs.BootLocal {
		t.Errorf("local overlay: %+v", h)
	}
	for body, want := range map[string]string{
		`{"action":"boot"}`:               "kernel: a next boot of action boot needs a kernel",
		`{"action":"disk"}`:               `action: "disk" is not one of boot, local, shell`,
		`{"action":"local","kernel":"k"}`: "kernel: a next boot of action local boots no kernel",
		`{"kernl":"k"}`:                   `kernl: unknown key "kernl"; known keys here:`,
		`{"kernel":"k\nshell"}`:           "kernel: \"k\\nshell\" has a control character",
		`[1]`:                             "not a next boot",
		`{"action":"boot","kernel":"k","once":"yes"}`: "not a next boot",
	} {
		if _, err := s.SetNextBoot(m, []byte(body), Cond{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("next boot %s: %v, want %q", body, err, want)
		}
	}
	if _, err := s.SetNextBoot(mustMAC("52:54:00:00:00:07"), []byte(`{"kernel":"k"}`), Cond{}); !errors.Is(err, ErrNotFound) ||
		!strings.Contains(err.Error(), "PUT /api/hosts/52:54:00:00:00:07 first") {
		t.Errorf("next boot without a host: %v", err)
	}
	if d := cmp.Diff([]string{event.MilestoneNextBootSet, event.MilestoneNextBootSet}, ms.whats()); d != "" {
		t.Errorf("milestones (-want +got):\n%s", d)
	}
}

// Durability: what was acknowledged is what a reopened store has; a torn
// temp file a crash left is ignored (and removed); a file that does not
// parse is refused with its path and the fix.
func TestStoreDurable(t *testing.T) {
	dir := t.TempDir()
	cfg := yamlConfig(t, labYAML)
	s := openStore(t, dir, cfg, nil)
	m2, m3 := mustMAC("52:54:00:00:00:02"), mustMAC("52:54:00:00:00:03")
	if _, _, err := s.Put(m2, []byte(`{"name":"two","kernel":"k2","labels":{"rack":"a"},"script":"#!ipxe\necho hi\n"}`), Cond{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(m3, []byte(`{"name":"three","address":"10.0.0.33","default_boot":"local"}`), Cond{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetNextBoot(m2, []byte(`{"kernel":"nk","once":true}`), Cond{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetNextBoot(mustMAC("52:54:00:00:00:01"), []byte(`{"action":"shell"}`), Cond{}); err != nil {
		t.Fatal(err)
	}
	before := s.List()
	torn := filepath.Join(dir, FileName+".tmp123")
	if err := os.WriteFile(torn, []byte(`{"version":1,"hosts":[{"mac":"52:54:00:00:00:09"`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := openStore(t, dir, cfg, nil)
	if d := cmp.Diff(render(t, before), render(t, r.List())); d != "" {
		t.Errorf("reopened store differs (-before +after):\n%s", d)
	}
	if _, err := os.Stat(torn); !os.IsNotExist(err) {
		t.Errorf("the torn temp file is still there: %v", err)
	}
	for name, body := range map[string]string{
		"torn":        `{"version":1,"hosts":[`,
		"unknown key": `{"version":1,"hosts":[{"mac":"52:54:00:00:00:02","host":{"kernl":"x"}}]}`,
		"version":     `{"version":7,"hosts":[]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Path: filepath.Join(dir, FileName), Config: cfg})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) || !strings.Contains(err.Error(), "move it away") {
			t.Errorf("%s file: %v, want its path and the fix", name, err)
		}
	}
}

// A change that does not apply (Apply refuses: a template that does not
// parse) is not stored; a write that fails is not in force.
func TestStoreApplyRefused(t *testing.T) {
	dir := t.TempDir()
	var applied [][]configs.Host
	fail := errors.New("iPXE script template hosts[x].script: unexpected EOF")
	s, err := Open(Options{Path: filepath.Join(dir, FileName), Config: yamlConfig(t, labYAML),
		Apply: func(_ *configs.Config, eff []configs.Host, commit func() error) error {
			for _, h := range eff {
				if strings.Contains(h.Script.Text, "{{") {
					return fail
				}
			}
			if err := commit(); err != nil {
				return err
			}
			applied = append(applied, eff)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	m := mustMAC("52:54:00:00:00:02")
	if _, _, err := s.Put(m, []byte(`{"script":"{{.Nope"}`), Cond{}); !errors.Is(err, ErrRefused) || !errors.Is(err, fail) {
		t.Fatalf("Put of a broken script: %v", err)
	}
	if _, ok := s.Get(m); ok {
		t.Error("a refused entry is in the view")
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
		t.Errorf("a refused entry was written: %v", err)
	}
	if _, _, err := s.Put(m, []byte(`{"kernel":"k"}`), Cond{}); err != nil || len(applied) != 1 || len(applied[0]) != 2 {
		t.Fatalf("Put: %v, applied %v", err, applied)
	}
	// The folder gone: the write fails, nothing changes.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(m, []byte(`{"kernel":"k2"}`), Cond{}); err == nil || errors.Is(err, ErrRefused) {
		t.Errorf("Put with the folder gone: %v, want a write error", err)
	}
	if e, _ := s.Get(m); e.Host.Kernel != "k" || len(applied) != 1 {
		t.Errorf("a failed write changed the view (%q) or was applied (%d)", e.Host.Kernel, len(applied))
	}
}

// PATCH merges over the entry as it is (the config's when there is no
// run-time one), null removing keys.
func TestStorePatch(t *testing.T) {
	s := openStore(t, t.TempDir(), yamlConfig(t, labYAML), nil)
	m := mustMAC("52:54:00:00:00:01")
	e, err := s.Patch(m, []byte(`{"cmdline":"quiet","labels":{"rack":"r1"}}`), Cond{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != SourceAPIOverConfig || e.Host.Kernel != "yk" || e.Host.Cmdline != "quiet" || e.Host.Labels["rack"] != "r1" {
		t.Errorf("patched: %+v", e)
	}
	e, err = s.Patch(m, []byte(`{"kernel":null,"labels":{"rack":null,"row":"2"}}`), Cond{IfMatch: []string{e.ETag}})
	if err != nil {
		t.Fatal(err)
	}
	if e.Host.Kernel != "" || e.Host.Address.String() != "10.0.0.10" || cmp.Diff(map[string]string{"row": "2"}, e.Host.Labels) != "" {
		t.Errorf("patched again: %+v", e.Host)
	}
	if _, err := s.Patch(m, []byte(`{"nmae":"x"}`), Cond{}); err == nil || !strings.Contains(err.Error(), `did you mean "name"`) {
		t.Errorf("patch with a typo: %v", err)
	}
	if _, err := s.Patch(mustMAC("52:54:00:00:00:05"), []byte(`{}`), Cond{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("patch of an unknown host: %v", err)
	}
}

// SIGHUP's reload: the config's new hosts merge under the run-time ones;
// a config host that clashes with a run-time one is refused, nothing
// changed.
func TestStoreReload(t *testing.T) {
	s := openStore(t, t.TempDir(), yamlConfig(t, labYAML), nil)
	m2 := mustMAC("52:54:00:00:00:02")
	if _, _, err := s.Put(m2, []byte(`{"address":"10.0.0.20"}`), Cond{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(yamlConfig(t, labYAML+"  - mac: 52:54:00:00:00:03\n    address: 10.0.0.20\n")); err == nil ||
		!strings.Contains(err.Error(), "10.0.0.20") {
		t.Errorf("reload with a clash: %v", err)
	}
	if len(s.List()) != 2 {
		t.Errorf("a refused reload changed the entries: %+v", s.List())
	}
	if err := s.Reload(yamlConfig(t, labYAML+"  - mac: 52:54:00:00:00:03\n    name: three\n")); err != nil {
		t.Fatal(err)
	}
	if e, ok := s.Get(mustMAC("52:54:00:00:00:03")); !ok || e.Source != SourceConfig {
		t.Errorf("reloaded host: %+v %v", e, ok)
	}
}

// The watch: loader-fetched, kernel-fetched, and a once next boot
// consumed by the kernel's fetch (not the script's), durably.
func TestWatchConsumes(t *testing.T) {
	dir := t.TempDir()
	ms := &milestones{}
	cfg := yamlConfig(t, labYAML)
	s := openStore(t, dir, cfg, ms)
	m := mustMAC("52:54:00:00:00:01")
	if _, err := s.SetNextBoot(m, []byte(`{"kernel":"/boot/nk","once":true}`), Cond{}); err != nil {
		t.Fatal(err)
	}
	w := Watch{Store: s, Milestones: ms, IsBoot: func(f *event.Fetch) bool { return strings.HasSuffix(f.File, ".efi") }}
	fetch := func(file, kind, outcome string) {
		w.Fetch(&event.Fetch{MAC: m, Host: "yaml1", File: file, Kind: kind, Outcome: outcome, Proto: event.ProtoTFTP,
			Bytes: 1000, Duration: time.Millisecond})
	}
	fetch("ipxe.efi", "", event.OutcomeOK)
	fetch("boot.ipxe", event.KindConfig, event.OutcomeOK)
	fetch("boot/nk", "", event.OutcomeAborted)
	if e, _ := s.Get(m); e.NextBoot == nil {
		t.Fatal("consumed by the loader, the script or an aborted kernel fetch")
	}
	fetch("/boot/nk", "", event.OutcomeOK)
	if !waitFor(func() bool { e, _ := s.Get(m); return e.NextBoot == nil }) {
		t.Fatal("the once next boot was not consumed by the kernel's fetch")
	}
	want := []string{event.MilestoneNextBootSet, event.MilestoneLoaderFetched, event.MilestoneKernelFetched, event.MilestoneNextBootConsumed}
	if d := cmp.Diff(want, ms.whats()); d != "" {
		t.Errorf("milestones (-want +got):\n%s", d)
	}
	if e, _ := openStore(t, dir, cfg, nil).Get(m); e.NextBoot != nil || e.Effective().Kernel != "yk" {
		t.Errorf("reopened after consumption: %+v", e)
	}
	// local: consumed by the generated config that carried it.
	if _, err := s.SetNextBoot(m, []byte(`{"action":"local","once":true}`), Cond{}); err != nil {
		t.Fatal(err)
	}
	fetch("pxelinux.cfg/01-52-54-00-00-00-01", event.KindConfig, event.OutcomeOK)
	if !waitFor(func() bool { e, _ := s.Get(m); return e.NextBoot == nil }) {
		t.Fatal("a once local next boot was not consumed by its config's fetch")
	}
}

// render is entries as JSON lines, to compare.
func render(t *testing.T, es []Entry) []string {
	t.Helper()
	var out []string
	for _, e := range es {
		m, err := HostMap(e.Host)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{e.MAC.String(), e.Source, e.ETag, m, e.NextBoot, e.Updated})
		out = append(out, string(b))
	}
	return out
}

// waitFor polls cond (the consumption runs off the fetch's goroutine),
// 5 s at most.
func waitFor(cond func() bool) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestParseMAC(t *testing.T) {
	for _, s := range []string{"52:54:00:12:34:56", "52-54-00-12-34-56", "5254.0012.3456", "525400123456", "52:54:00:12:34:56 "} {
		if m, err := ParseMAC(s); err != nil || m.String() != "52:54:00:12:34:56" {
			t.Errorf("ParseMAC(%q) = %v, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "zz", "52:54:00:12:34", "00:00:00:00:00:00:00:01"} {
		if _, err := ParseMAC(s); err == nil {
			t.Errorf("ParseMAC(%q) took it", s)
		}
	}
}

// Replace rebuilds the fixed addresses: a host whose address changed is
// found at the new one, not the old.
func TestReplaceFixed(t *testing.T) {
	h := func(a string) configs.Host {
		c, _ := configs.ParseHost([]byte(`{"address":"`+a+`"}`), configs.Default(), nil, mustMAC("52:54:00:00:00:01"))
		return c
	}
	tab := New([]configs.Host{h("10.0.0.5")})
	tab.Replace([]configs.Host{h("10.0.0.6")})
	if _, ok := tab.ByAddr(mustAddr("10.0.0.5")); ok {
		t.Error("the old fixed address still finds the host")
	}
	if c, ok := tab.ByAddr(mustAddr("10.0.0.6")); !ok || c.Host == nil {
		t.Error("the new fixed address does not find the host")
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
