package httpboot

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
)

func getText(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := rawClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// TestGeneratedConfigs: pxelinux.cfg, grub.cfg and boot.scr.uimg are
// generated for the client over HTTP, recorded as configs with the host's
// MAC and name; a root file of the same name wins.
func TestGeneratedConfigs(t *testing.T) {
	mac := mustMAC("52:54:00:00:0c:01")
	e := newTestEnv(t, envOpts{
		generate: true,
		hosts:    []configs.Host{{MAC: mac, Name: "zynq1", Kernel: "zImage", Cmdline: "console=ttyPS0,115200"}},
		observe:  []hosts.Client{{MAC: mac.HardwareAddr, Addr: netip.MustParseAddr("127.0.0.1")}},
		files:    map[string][]byte{"grub.cfg": []byte("# lab's own grub.cfg\n")},
	})
	code, body, h := getText(t, e.url+"/pxelinux.cfg/01-52-54-00-00-0c-01")
	if code != 200 || !strings.Contains(body, "kernel zImage") || !strings.Contains(body, "append console=ttyPS0,115200") {
		t.Fatalf("pxelinux.cfg: %d\n%s", code, body)
	}
	if h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", h)
	}
	code, body, _ = getText(t, e.url+"/boot.scr.uimg")
	if code != 200 {
		t.Fatalf("boot.scr.uimg: %d", code)
	}
	if _, script, err := bootcfg.ParseScriptImage([]byte(body)); err != nil || !strings.Contains(string(script), "tftpboot ${kernel_addr_r} zImage") {
		t.Errorf("boot.scr.uimg: %v\n%s", err, script)
	}
	if code, body, _ = getText(t, e.url+"/grub.cfg"); code != 200 || body != "# lab's own grub.cfg\n" {
		t.Errorf("root grub.cfg not served as is: %d %q", code, body)
	}
	if code, _, _ = getText(t, e.url+"/pxelinux.cfg/01-52-54-00-00-0c-99"); code != 404 {
		t.Errorf("unknown MAC's pxelinux.cfg: %d, want 404", code)
	}
	fs := e.waitFetches(t, 4)
	want := []struct{ file, kind, host string }{
		{"pxelinux.cfg/01-52-54-00-00-0c-01", event.KindConfig, "zynq1"},
		{"boot.scr.uimg", event.KindConfig, "zynq1"},
		{"grub.cfg", "", "zynq1"},
		{"pxelinux.cfg/01-52-54-00-00-0c-99", "", "zynq1"}, // asked from zynq1's address
	}
	for i, w := range want {
		f := fs[i]
		if f.File != w.file || f.Kind != w.kind || f.Host != w.host {
			t.Errorf("fetch %d: file %q kind %q host %q, want %+v", i, f.File, f.Kind, f.Host, w)
		}
	}
	if fs[0].Outcome != event.OutcomeOK || fs[0].Bytes == 0 || fs[0].MAC.String() != "52:54:00:00:0c:01" {
		t.Errorf("pxelinux fetch: %+v", fs[0])
	}
}

// TestRootScriptWins: a boot.ipxe in the root is served as the file it is,
// not the built-in script, and is not marked generated.
func TestRootScriptWins(t *testing.T) {
	e := newTestEnv(t, envOpts{files: map[string][]byte{"boot.ipxe": []byte("#!ipxe\necho lab's own\n")}})
	code, body, _ := getText(t, e.url+"/boot.ipxe")
	if code != 200 || body != "#!ipxe\necho lab's own\n" {
		t.Fatalf("boot.ipxe: %d %q", code, body)
	}
	if f := e.waitFetches(t, 1)[0]; f.Kind != "" || f.File != "boot.ipxe" {
		t.Errorf("root script recorded as kind %q file %q", f.Kind, f.File)
	}
	e2 := newTestEnv(t, envOpts{})
	if code, body, _ = getText(t, e2.url+"/boot.ipxe"); code != 200 || !strings.Contains(body, "pxeperf built-in script") {
		t.Fatalf("built-in boot.ipxe: %d %q", code, body)
	}
	if f := e2.waitFetches(t, 1)[0]; f.Kind != event.KindConfig {
		t.Errorf("built-in script recorded as kind %q", f.Kind)
	}
}

// TestCheckScripts: a broken iPXE template is found before any board asks,
// with the config file, the line and the fix.
func TestCheckScripts(t *testing.T) {
	e := newTestEnv(t, envOpts{files: map[string][]byte{"tmpl/b.ipxe": []byte("#!ipxe\n\necho {{.Nope\n")}})
	cfg := &configs.Config{File: "lab.yaml"}
	cfg.HTTP.Script = configs.Template{Text: "#!ipxe\necho {{.MAC}\n", Line: 30}
	cfg.Hosts = []configs.Host{{MAC: mustMAC("52:54:00:00:00:0b"), Name: "b", Script: configs.Template{Text: "@tmpl/b.ipxe"}}}
	err := CheckScripts(cfg, e.srv.opt.Images)
	if err == nil {
		t.Fatal("broken templates accepted")
	}
	for _, want := range []string{"http.script: lab.yaml:31: ", "hosts[b].script (@tmpl/b.ipxe): tmpl/b.ipxe:4: unclosed action", "fix the template"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	cfg.HTTP.Script = configs.Template{Text: "#!ipxe\necho {{.MAC}}\n"}
	cfg.Hosts = nil
	if err := CheckScripts(cfg, e.srv.opt.Images); err != nil {
		t.Errorf("good template refused: %v", err)
	}
}
