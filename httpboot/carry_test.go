package httpboot

import (
	"encoding/base64"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
)

var carryToken = regexp.MustCompile(`/_c/([A-Za-z0-9_-]+)`)

// readableCarry shows carried segments decoded, as /_c/{mac=...&label.k=v}.
func readableCarry(s string) string {
	return carryToken.ReplaceAllStringFunc(s, func(m string) string {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(m, carryPrefix))
		if err != nil {
			return m
		}
		q, _ := url.QueryUnescape(string(raw))
		return carryPrefix + "{" + q + "}"
	})
}

// TestLabelsFollowTheBoard: ?label.rx_offload=off and the MAC on the
// script URL reach the fetches of every URL the script hands out (the
// built-in script's kernel and initrd, url "name", .ImageURL), so the
// image fetches are labelled as the script's was.
func TestLabelsFollowTheBoard(t *testing.T) {
	mac := mustMAC("52:54:00:00:00:0d")
	lo := netip.MustParseAddr("127.0.0.1")
	for name, script := range map[string]string{
		"built-in": "",
		"ImageURL": "#!ipxe\nkernel {{.ImageURL}}/d/vmlinuz\ninitrd {{.ImageURL}}/d/initrd.img\nboot\n",
		"url":      "#!ipxe\nkernel {{url \"d/vmlinuz\"}}\ninitrd {{url \"/d/initrd.img\"}}\nboot\n",
	} {
		t.Run(name, func(t *testing.T) {
			h := defaultHTTP()
			h.Script = configs.Template{Text: script}
			host := configs.Host{MAC: mac, Name: "board-d", Address: configs.Addr{Addr: lo}, Kernel: "d/vmlinuz", Initrd: "d/initrd.img", Labels: map[string]string{"rack": "r4"}}
			e := newTestEnv(t, envOpts{http: h, hosts: []configs.Host{host},
				observe: []hosts.Client{{MAC: mac.HardwareAddr, Addr: lo}},
				files:   map[string][]byte{"d/vmlinuz": []byte("kernel"), "d/initrd.img": []byte("initrd")}})
			_, body, _ := getText(t, e.url+"/boot.ipxe?label.rx_offload=off&label.run=7")
			urls := regexp.MustCompile(`http://\S+`).FindAllString(body, -1)
			var files []string
			for _, u := range urls {
				if strings.Contains(u, "/healthz") {
					continue
				}
				if code, got, _ := getText(t, u); code != http.StatusOK {
					t.Fatalf("%s: %d %s", u, code, got)
				}
				files = append(files, u)
			}
			if len(files) != 2 {
				t.Fatalf("script hands out %d image URLs, want 2:\n%s", len(files), body)
			}
			fs := e.waitFetches(t, 3)
			for _, f := range fs {
				want := map[string]string{"rack": "r4", "rx_offload": "off", "run": "7"}
				if d := cmp.Diff(want, f.Labels); d != "" {
					t.Errorf("%s labels (-want +got):\n%s", f.File, d)
				}
				if f.MAC.String() != "52:54:00:00:00:0d" || f.Host != "board-d" {
					t.Errorf("%s: mac %v host %q", f.File, f.MAC, f.Host)
				}
			}
			if fs[1].File != "d/vmlinuz" || fs[2].File != "d/initrd.img" {
				t.Errorf("image fetches recorded as %q, %q: the carried segment must not be in the name", fs[1].File, fs[2].File)
			}
		})
	}
}

// TestRecordLabelsOneHome: the server's own record of a fetch carries
// the request's ?label. parameters alone, and the host entry's labels
// reach it only through hosts.Stamping (serve's wiring, which the other
// tests use): the entry's labels have one home. The script still sees
// both as .Labels.
func TestRecordLabelsOneHome(t *testing.T) {
	mac := mustMAC("52:54:00:00:00:0e")
	lo := netip.MustParseAddr("127.0.0.1")
	host := configs.Host{MAC: mac, Name: "board-e", Address: configs.Addr{Addr: lo}, Labels: map[string]string{"rack": "r5", "run": "entry"}}
	h := defaultHTTP()
	h.Script = configs.Template{Text: "#!ipxe\necho {{range $k, $v := .Labels}}{{$k}}={{$v}};{{end}}\n"}
	for _, unstamped := range []bool{true, false} {
		e := newTestEnv(t, envOpts{http: h, hosts: []configs.Host{host}, unstamped: unstamped})
		_, body, _ := getText(t, e.url+"/boot.ipxe?label.run=7")
		if want := "rack=r5;run=7;"; !strings.Contains(body, want) {
			t.Errorf("unstamped %v: script %q lacks .Labels %s", unstamped, body, want)
		}
		want := map[string]string{"rack": "r5", "run": "7"}
		if unstamped {
			want = map[string]string{"run": "7"}
		}
		f := e.waitFetches(t, 1)[0]
		if d := cmp.Diff(want, f.Labels); d != "" || f.Host != "board-e" {
			t.Errorf("unstamped %v: host %q, labels (-want +got):\n%s", unstamped, f.Host, d)
		}
	}
}

func TestUncarry(t *testing.T) {
	tok, ok := carryQuery("52:54:00:00:00:01", url.Values{"label.a": {"1"}, "other": {"x"}})
	if !ok {
		t.Fatal("short labels not carried whole")
	}
	for name, c := range map[string]struct{ in, path, query string }{
		"carried":          {"/_c/" + tok + "/img/vmlinuz", "/img/vmlinuz", "label.a=1&mac=52%3A54%3A00%3A00%3A00%3A01"},
		"own query wins":   {"/_c/" + tok + "/vmlinuz?label.a=2", "/vmlinuz", "label.a=2&mac=52%3A54%3A00%3A00%3A00%3A01"},
		"not carried":      {"/vmlinuz?x=1", "/vmlinuz", "x=1"},
		"bad token stays":  {"/_c/%%%/vmlinuz", "/_c/%%%/vmlinuz", ""},
		"only mac and lbl": {"/_c/" + base64.RawURLEncoding.EncodeToString([]byte("other=1&mac=x")) + "/f", "/f", "mac=x"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &http.Request{URL: &url.URL{Path: strings.SplitN(c.in, "?", 2)[0]}}
			if _, q, ok := strings.Cut(c.in, "?"); ok {
				r.URL.RawQuery = q
			}
			uncarry(r)
			if r.URL.Path != c.path || r.URL.RawQuery != c.query {
				t.Errorf("uncarry(%s) = %s ? %s, want %s ? %s", c.in, r.URL.Path, r.URL.RawQuery, c.path, c.query)
			}
		})
	}
	long := url.Values{}
	for i := range 32 {
		long.Set("label.k"+strings.Repeat("x", i), strings.Repeat("v", 64))
	}
	if tok, ok := carryQuery("52:54:00:00:00:01", long); ok || len(tok) > maxCarry || tok == "" {
		t.Errorf("labels past maxCarry: ok %v, token of %d bytes", ok, len(tok))
	}
}
