package httpboot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/internal/testkit/golden"
)

const varsTemplate = `#!ipxe
mac={{.MAC}} ip={{.IP}} arch={{.Arch}} host={{.Hostname}} server={{.Server}}
url={{.ServerURL}} img={{.ImageURL}} kernel={{.Kernel}} initrd={{.Initrd}} cmdline={{.Cmdline}}
labels={{range $k, $v := .Labels}}{{$k}}={{$v}};{{end}} q={{.Query.x}} x={{.x}} k={{url .Kernel}}
`

func TestScripts(t *testing.T) {
	macA, macB, macC := mustMAC("52:54:00:00:00:0a"), mustMAC("52:54:00:00:00:0b"), mustMAC("52:54:00:00:00:0c")
	lo := netip.MustParseAddr("127.0.0.1")
	// A and C claim their MAC with ?mac= from 127.0.0.1: their entries
	// name that address, so the claim holds (TestMACClaim has the rule).
	hostA := configs.Host{MAC: macA, Name: "board-a", Address: configs.Addr{Addr: lo}, Script: configs.Template{Text: varsTemplate}, Kernel: "a/vmlinuz",
		Initrd: "a/initrd", Cmdline: "console=ttyS0", Labels: map[string]string{"rack": "r1"}}
	hostB := configs.Host{MAC: macB, Name: "board-b", Script: configs.Template{Text: "@tmpl/b.ipxe"}}
	hostC := configs.Host{MAC: macC, Name: "board-c", Address: configs.Addr{Addr: lo}, Kernel: "c/vmlinuz", Initrd: "c/initrd.img",
		Cmdline: "console=ttyS0 quiet"}
	type want struct {
		Status int
		Body   string
		Labels map[string]string
		Host   string
		MAC    string
		Out    string
	}
	tests := map[string]struct {
		hosts   []configs.Host
		observe []hosts.Client
		script  string // http.script
		query   string
		want    want
	}{
		"by mac, inline host template": {
			hosts: []configs.Host{hostA}, query: "?mac=52:54:00:00:00:0a&x=7&label.build=42",
			want: want{Status: 200, Host: "board-a", MAC: "52:54:00:00:00:0a", Out: event.OutcomeOK,
				Labels: map[string]string{"rack": "r1", "build": "42"},
				Body: "#!ipxe\nmac=52:54:00:00:00:0a ip=127.0.0.1 arch= host=board-a server=127.0.0.1\n" +
					"url=URL img=URL/_c/{label.build=42&mac=52:54:00:00:00:0a} kernel=a/vmlinuz initrd=a/initrd cmdline=console=ttyS0\n" +
					"labels=build=42;rack=r1; q=7 x=7 k=URL/_c/{label.build=42&mac=52:54:00:00:00:0a}/a/vmlinuz\n"},
		},
		"by lease, template file from root": {
			hosts:   []configs.Host{hostB},
			observe: []hosts.Client{{MAC: macB.HardwareAddr, Addr: lo, Arch: 7}},
			want: want{Status: 200, Host: "board-b", MAC: "52:54:00:00:00:0b", Out: event.OutcomeOK,
				Body: "#!ipxe\necho board-b efi-x64 52:54:00:00:00:0b\n"},
		},
		"mac wins over lease": {
			hosts:   []configs.Host{hostA, hostB},
			observe: []hosts.Client{{MAC: macB.HardwareAddr, Addr: lo, Arch: 7}},
			query:   "?mac=52-54-00-00-00-0A&x=1",
			want: want{Status: 200, Host: "board-a", MAC: "52:54:00:00:00:0a", Out: event.OutcomeOK,
				Labels: map[string]string{"rack": "r1"},
				Body: "#!ipxe\nmac=52:54:00:00:00:0a ip=127.0.0.1 arch= host=board-a server=127.0.0.1\n" +
					"url=URL img=URL/_c/{mac=52:54:00:00:00:0a} kernel=a/vmlinuz initrd=a/initrd cmdline=console=ttyS0\n" +
					"labels=rack=r1; q=1 x=1 k=URL/_c/{mac=52:54:00:00:00:0a}/a/vmlinuz\n"},
		},
		"built-in boots the host kernel": {
			hosts: []configs.Host{hostC}, query: "?mac=52:54:00:00:00:0c",
			want: want{Status: 200, Host: "board-c", MAC: "52:54:00:00:00:0c", Out: event.OutcomeOK,
				Body: "#!ipxe\n# pxeperf built-in script for board-c 52:54:00:00:00:0c (127.0.0.1)\n" +
					"echo pxeperf: booting c/vmlinuz on board-c\n" +
					"kernel URL/_c/{mac=52:54:00:00:00:0c}/c/vmlinuz initrd=initrd console=ttyS0 quiet\n" +
					"initrd --name initrd URL/_c/{mac=52:54:00:00:00:0c}/c/initrd.img\n" +
					"boot || goto failed\n:failed\necho pxeperf: booting c/vmlinuz failed\nshell\n"},
		},
		"built-in for an unknown client drops to the shell": {
			want: want{Status: 200, Out: event.OutcomeOK,
				Body: "#!ipxe\n# pxeperf built-in script for (127.0.0.1)\n" +
					"echo pxeperf: no kernel is set for 127.0.0.1\n" +
					"echo pxeperf: add a hosts entry with kernel/initrd/cmdline or a script, see URL/healthz\nshell\n"},
		},
		"http.script for hosts without one": {
			hosts: []configs.Host{hostC}, script: "#!ipxe\nchain {{url \"menu.ipxe\"}}?mac={{.MAC}}\n",
			query: "?mac=52:54:00:00:00:0c",
			want: want{Status: 200, Host: "board-c", MAC: "52:54:00:00:00:0c", Out: event.OutcomeOK,
				Body: "#!ipxe\nchain URL/_c/{mac=52:54:00:00:00:0c}/menu.ipxe?mac=52:54:00:00:00:0c\n"},
		},
		"bad mac falls back to the lease": {
			hosts:   []configs.Host{hostB},
			observe: []hosts.Client{{MAC: macB.HardwareAddr, Addr: lo, Arch: 0}},
			query:   "?mac=zz",
			want: want{Status: 200, Host: "board-b", MAC: "52:54:00:00:00:0b", Out: event.OutcomeOK,
				Body: "#!ipxe\necho board-b bios 52:54:00:00:00:0b\n"},
		},
		"unknown variable is a 500 naming it": {
			script: "#!ipxe\necho {{.Hostnam}}\n",
			want:   want{Status: 500, Out: event.OutcomeError, Body: "Hostnam"},
		},
		"template syntax error is a 500": {
			script: "#!ipxe\necho {{.MAC\n",
			want:   want{Status: 500, Out: event.OutcomeError, Body: "http.script"},
		},
		"missing template file is a 500": {
			script: "@nope.tmpl",
			want:   want{Status: 500, Out: event.OutcomeError, Body: "nope.tmpl"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := defaultHTTP()
			h.Script = configs.Template{Text: tc.script}
			e := newTestEnv(t, envOpts{http: h, hosts: tc.hosts, observe: tc.observe, files: map[string][]byte{
				"tmpl/b.ipxe": []byte("#!ipxe\necho {{.Hostname}} {{.Arch}} {{.MAC}}\n"),
			}})
			resp, err := rawClient().Get(e.url + "/boot.ipxe" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			f := e.waitFetches(t, 1)[0]
			got := want{Status: resp.StatusCode, Body: readableCarry(strings.ReplaceAll(string(b), e.url, "URL")),
				Labels: f.Labels, Host: f.Host, Out: f.Outcome}
			if f.MAC != nil {
				got.MAC = f.MAC.String()
			}
			w := tc.want
			if w.Status != 200 {
				// Error bodies are long messages: check they name the culprit.
				if !strings.Contains(got.Body, w.Body) {
					t.Errorf("body %q does not mention %q", got.Body, w.Body)
				}
				got.Body = w.Body
			}
			if d := cmp.Diff(w, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestScriptLabelsOnImageFetch(t *testing.T) {
	mac := mustMAC("52:54:00:00:00:0d")
	e := newTestEnv(t, envOpts{
		hosts:   []configs.Host{{MAC: mac, Name: "d", Labels: map[string]string{"os": "debian"}}},
		observe: []hosts.Client{{MAC: mac.HardwareAddr, Addr: netip.MustParseAddr("127.0.0.1")}},
		files:   map[string][]byte{"k": []byte("kernel")},
	})
	resp, err := rawClient().Get(e.url + "/k?label.run=7")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	f := e.waitFetches(t, 1)[0]
	if d := cmp.Diff(map[string]string{"os": "debian", "run": "7"}, f.Labels); d != "" || f.Host != "d" {
		t.Errorf("host %q labels (-want +got):\n%s", f.Host, d)
	}
}

// TestTextCompression: scripts and JSON honour Accept-Encoding; images don't
// (see TestFiles "image is never compressed").
func TestTextCompression(t *testing.T) {
	h := defaultHTTP()
	h.Script = configs.Template{Text: "#!ipxe\n" + strings.Repeat("echo pxeperf {{.IP}} compresses text responses\n", 20)}
	e := newTestEnv(t, envOpts{http: h})
	plain := func(t *testing.T) []byte {
		resp, err := rawClient().Get(e.url + "/boot.ipxe")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if ce := resp.Header.Get("Content-Encoding"); ce != "" {
			t.Fatalf("Content-Encoding %q without Accept-Encoding", ce)
		}
		return b
	}(t)
	zdec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zdec.Close()
	tests := map[string]struct {
		accept, wantEnc string
		decode          func([]byte) ([]byte, error)
	}{
		"gzip": {"gzip", "gzip", func(b []byte) ([]byte, error) {
			r, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			return io.ReadAll(r)
		}},
		"zstd preferred": {"gzip, deflate, br, zstd", "zstd", func(b []byte) ([]byte, error) { return zdec.DecodeAll(b, nil) }},
		"zstd refused":   {"zstd;q=0, gzip;q=0.5", "gzip", nil},
		"identity":       {"br", "", func(b []byte) ([]byte, error) { return b, nil }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, e.url+"/boot.ipxe", nil)
			req.Header.Set("Accept-Encoding", tc.accept)
			resp, err := rawClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if got := resp.Header.Get("Content-Encoding"); got != tc.wantEnc {
				t.Fatalf("Content-Encoding %q, want %q", got, tc.wantEnc)
			}
			if resp.Header.Get("Content-Length") != strconv.Itoa(len(b)) {
				t.Errorf("Content-Length %q for %d bytes", resp.Header.Get("Content-Length"), len(b))
			}
			if tc.decode == nil {
				return
			}
			if tc.wantEnc != "" && len(b) >= len(plain) {
				t.Errorf("%s body %d bytes, not smaller than plain %d", tc.wantEnc, len(b), len(plain))
			}
			dec, err := tc.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(plain), string(dec)); d != "" {
				t.Errorf("decoded body (-plain +decoded):\n%s", d)
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	e := newTestEnv(t, envOpts{})
	resp, err := http.Get(e.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || h.Status != "ok" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("healthz: %d %q %+v", resp.StatusCode, resp.Header.Get("Content-Type"), h)
	}
}

func TestPickEncoding(t *testing.T) {
	tests := map[string]struct {
		in   []string
		want string
	}{
		"none":         {nil, ""},
		"gzip":         {[]string{"gzip"}, "gzip"},
		"x-gzip":       {[]string{"x-gzip"}, "gzip"},
		"both":         {[]string{"gzip", "zstd"}, "zstd"},
		"q zero":       {[]string{"zstd; q=0", "gzip;q=1.0"}, "gzip"},
		"all refused":  {[]string{"zstd;q=0,gzip;q=0.000"}, ""},
		"case":         {[]string{"GZIP"}, "gzip"},
		"star ignored": {[]string{"*"}, ""},
	}
	for name, tc := range tests {
		if got := pickEncoding(tc.in); got != tc.want {
			t.Errorf("%s: pickEncoding(%q) = %q, want %q", name, tc.in, got, tc.want)
		}
	}
}

func FuzzPickEncoding(f *testing.F) {
	for _, s := range []string{"gzip", "zstd;q=0, gzip", "br;q=0.5,zstd", ";;,,q=", "gzip;q=abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		switch got := pickEncoding([]string{s}); got {
		case "", "gzip", "zstd":
		default:
			t.Fatalf("pickEncoding(%q) = %q", s, got)
		}
	})
}

// TestServerURL: scripts point at the host the client used (NAT, port
// forwards), else at the server address and listen port.
func TestServerURL(t *testing.T) {
	h := defaultHTTP()
	h.Script = configs.Template{Text: "{{.ServerURL}} {{.ImageURL}} {{.Server}}"}
	e := newTestEnv(t, envOpts{http: h})
	_, body := rawGet(t, e.srv.Addr().String(), "/boot.ipxe")
	if got, want := string(body), "http://pxeperf http://pxeperf 127.0.0.1"; got != want {
		t.Errorf("with Host: %q, want %q", got, want)
	}
	c, err := net.Dial("tcp", e.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /boot.ipxe HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if got, want := string(b), strings.Repeat(e.url+" ", 2)+"127.0.0.1"; got != want {
		t.Errorf("without Host: %q, want %q", got, want)
	}
}

// TestDefaultScriptModes renders the built-in script for a host with a
// kernel, without one, and with default_boot local and shell, against
// testdata/script-*.golden (go test ./httpboot/ -run TestDefaultScriptModes
// -update rewrites them); a host's own script sees .DefaultBoot and
// .LocalBoot. Every script must also pass checkIPXE.
func TestDefaultScriptModes(t *testing.T) {
	mac := func(last byte) configs.MAC { return mustMAC(fmt.Sprintf("52:54:00:00:01:%02x", last)) }
	hs := []configs.Host{
		{MAC: mac(1), Name: "kernel", Kernel: "k/vmlinuz", Initrd: "k/initrd", Cmdline: "console=ttyS0", DefaultBoot: configs.BootLocal},
		{MAC: mac(2), Name: "nothing"},
		{MAC: mac(3), Name: "local", DefaultBoot: configs.BootLocal},
		{MAC: mac(4), Name: "shell", DefaultBoot: configs.BootShell},
		{MAC: mac(5), Name: "own-script", DefaultBoot: configs.BootLocal, LocalBoot: "mmc0",
			Script: configs.Template{Text: "#!ipxe\n{{if eq .DefaultBoot \"local\"}}exit 1{{else}}shell{{end}}\necho {{.LocalBoot}}\n"}},
	}
	h := defaultHTTP()
	h.TrustMACParam = true
	e := newTestEnv(t, envOpts{http: h, hosts: hs})
	for i, host := range hs {
		t.Run(host.Name, func(t *testing.T) {
			resp, err := rawClient().Get(e.url + "/boot.ipxe?mac=" + host.MAC.String())
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if f := e.waitFetches(t, i+1)[i]; f.Host != host.Name {
				t.Errorf("fetch put on host %q, want %q", f.Host, host.Name)
			}
			body := readableCarry(strings.ReplaceAll(string(b), e.url, "URL"))
			if err := checkIPXE(body); err != nil {
				t.Errorf("%v in:\n%s", err, body)
			}
			golden.Check(t, filepath.Join("testdata", "script-"+host.Name+".golden"), []byte(body))
		})
	}
}

// ipxeCommands are the iPXE commands pxeperf's scripts may use.
var ipxeCommands = map[string]bool{
	"echo": true, "kernel": true, "initrd": true, "boot": true, "shell": true, "exit": true,
	"sanboot": true, "iseq": true, "goto": true, "chain": true,
}

// checkIPXE checks what iPXE would refuse or trip on in a script: the
// #!ipxe magic, commands it has, a goto to a label that is not there, and
// an unrendered template action.
func checkIPXE(script string) error {
	lines := strings.Split(strings.TrimRight(script, "\n"), "\n")
	if lines[0] != "#!ipxe" {
		return fmt.Errorf("first line %q, want #!ipxe", lines[0])
	}
	labels := map[string]bool{}
	var gotos []string
	for n, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case strings.Contains(l, "{{"):
			return fmt.Errorf("line %d: unrendered template action: %q", n+2, l)
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
			continue
		case strings.HasPrefix(f[0], ":"):
			labels[f[0][1:]] = true
			continue
		}
		for i, w := range f {
			if i == 0 || f[i-1] == "||" || f[i-1] == "&&" {
				if !ipxeCommands[w] {
					return fmt.Errorf("line %d: %q is not an iPXE command pxeperf uses", n+2, w)
				}
			}
			if f[i] == "goto" && i+1 < len(f) {
				gotos = append(gotos, f[i+1])
			}
		}
	}
	for _, g := range gotos {
		if !labels[g] {
			return fmt.Errorf("goto %s: no label :%s", g, g)
		}
	}
	return nil
}

func TestCheckIPXE(t *testing.T) {
	for name, tc := range map[string]struct {
		script string
		ok     bool
	}{
		"good":          {"#!ipxe\niseq a b || goto x\nsanboot --drive 0x80 ||\n:x\nexit 1\n", true},
		"no magic":      {"echo hi\n", false},
		"missing label": {"#!ipxe\ngoto nowhere\n", false},
		"typo":          {"#!ipxe\nsanbot --drive 0x80\n", false},
		"after ||":      {"#!ipxe\nboot || exti\n", false},
		"unrendered":    {"#!ipxe\necho {{.MAC}}\n", false},
	} {
		if err := checkIPXE(tc.script); (err == nil) != tc.ok {
			t.Errorf("%s: checkIPXE = %v, want ok %v", name, err, tc.ok)
		}
	}
}
