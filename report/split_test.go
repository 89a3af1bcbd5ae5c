package report

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/internal/testkit/golden"
	"github.com/pxeperf/pxeperf/record"
)

// TestSplitGolden: every table of issue 28's lab, in every format. Served
// iPXE fetches through a bridge, curl and iperf3 over a veth, the bench at
// two MTUs and rates each get rows of their own; veth's nominal 10G is
// "speed unknown (veth)".
func TestSplitGolden(t *testing.T) {
	for _, name := range TableNames {
		tb, err := Build(name, issue28())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range Formats {
			t.Run(name+"."+string(f), func(t *testing.T) {
				var b bytes.Buffer
				if err := Render(&b, tb, f); err != nil {
					t.Fatal(err)
				}
				golden.Check(t, filepath.Join("testdata", "split-"+name+"."+ext[f]), b.Bytes())
			})
		}
	}
}

// TestMergeGolden: --merge all puts them back in one row, when asked.
func TestMergeGolden(t *testing.T) {
	for _, name := range []string{TableWindowOffload, TableDirectionMTU, TableLinkSpeed} {
		t.Run(name, func(t *testing.T) {
			merge, err := ParseMerge("all")
			if err != nil {
				t.Fatal(err)
			}
			tb, err := BuildWith(name, issue28(), Options{Merge: merge})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Render(&b, tb, Text); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "merged-"+name+".txt"), b.Bytes())
		})
	}
}

// csvRows renders tb as CSV and reads it back as maps by column key.
func csvRows(t *testing.T, tb Table) ([]string, []map[string]string) {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, tb, CSV); err != nil {
		t.Fatal(err)
	}
	all, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("%s: CSV does not parse: %v", tb.Name, err)
	}
	var rows []map[string]string
	for _, r := range all[1:] {
		m := map[string]string{}
		for i, k := range all[0] {
			m[k] = r[i]
		}
		rows = append(rows, m)
	}
	return all[0], rows
}

// TestSplitCells: the cells of the issue's rows, each over one source and
// link, with its count.
func TestSplitCells(t *testing.T) {
	pick := func(name string, keys ...string) map[string]string {
		tb, err := Build(name, issue28())
		if err != nil {
			t.Fatal(err)
		}
		_, rows := csvRows(t, tb)
		out := map[string]string{}
		for _, r := range rows {
			var k []string
			for _, c := range keys[:len(keys)-2] {
				k = append(k, r[c])
			}
			out[strings.Join(k, " ")] = r[keys[len(keys)-2]] + " n=" + r[keys[len(keys)-1]]
		}
		return out
	}
	// direction-mtu TCP Rx at MTU 1500 was 7927.6, the median of iPXE's
	// 331 and iperf3 -R's 13657 (and curl's and the bench's).
	if d := cmp.Diff(map[string]string{
		"serve pxbr0 none reported TCP Rx": "331.0 n=3", "serve vs28 veth TCP Rx": "16585.0 n=2",
		"bench pxl-client tbf TCP Rx": "942.0 n=2", "bench pxl-client veth TCP Rx": "12000.0 n=2",
		"iperf3 vs28 veth TCP Rx": "13679.5 n=2", "iperf3 vs28 veth TCP Tx": "14210.0 n=1",
		"bench pxl-client tbf UDP Rx": "650.0 n=1", "serve pxbr0 none reported UDP Rx": "82.3 n=3",
	}, pickLink(t, pick(TableDirectionMTU, "source", "iface", "link_note", "traffic", "mtu_1500_mbps", "mtu_1500_count"))); d != "" {
		t.Errorf("direction-mtu at MTU 1500 (-want +got):\n%s", d)
	}
	// window-offload's 256K row mixed curl's 16760 with iPXE's 331.
	wo := pick(TableWindowOffload, "source", "iface", "mtu", "link_note", "window", "rx_csum_on_mbps", "rx_csum_on_count")
	if d := cmp.Diff(map[string]string{
		"serve pxbr0 1500 none reported 262144": "331.0 n=3", "serve vs28 1500 veth 262144": "16585.0 n=2",
		"bench pxl-client 1500 veth 262144": "12000.0 n=2", "bench pxl-client 9000 veth 262144": "24300.0 n=1",
		"bench pxl-client 1500 tbf 262144": "942.0 n=2",
	}, wo); d != "" {
		t.Errorf("window-offload (-want +got):\n%s", d)
	}
	// linkspeed printed 10G and "2%" on veth: its speed is unknown.
	tb, _ := Build(TableLinkSpeed, issue28())
	var text bytes.Buffer
	if err := Render(&text, tb, Text); err != nil {
		t.Fatal(err)
	}
	grid, _, _ := strings.Cut(text.String(), "\n\n"+tb.Notes[0])
	if strings.Contains(grid, "10G") || !strings.Contains(grid, "speed unknown (veth)") {
		t.Errorf("linkspeed shows veth's nominal 10G, or not that its speed is unknown:\n%s", text.String())
	}
	_, rows := csvRows(t, tb)
	for _, r := range rows {
		if r["link_note"] == "veth" && (r["rx_percent_of_link"] != "" || r["link_mbps"] != "") {
			t.Errorf("veth row with a link speed or a percentage of one: %v", r)
		}
		if r["link_note"] == "tbf" && r["traffic"] == "TCP" && r["rx_percent_of_link"] != "94" {
			t.Errorf("1gbit tbf row: rx %s%% of link, want 94 (942 of 1000 Mbit/s): %v", r["rx_percent_of_link"], r)
		}
	}
}

// pickLink drops the rows without a cell at MTU 1500.
func pickLink(_ *testing.T, m map[string]string) map[string]string {
	for k, v := range m {
		if v == " n=" {
			delete(m, k)
		}
	}
	return m
}

// textKeys are the CSV columns that hold words; every other column of
// every table must parse as a number (or be empty: no data).
var textKeys = []string{"source", "iface", "link_note", "window_auto", "traffic", "client", "host", "ip", "last_utc",
	"site", "server", "time_utc", "proto", "file", "kind", "outcome"}

// TestCSVNumbers renders every table's CSV from both labs and parses
// every number column as a number: no "82.3 (w 11/16/16, ...)" or "53%"
// text in them, and a count column after each median.
func TestCSVNumbers(t *testing.T) {
	recs := append(lab(), issue28()...)
	var tables []Table
	for _, name := range TableNames {
		tb, err := Build(name, recs)
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tb)
	}
	r, ivs := fetchWithIntervals()
	tables = append(tables, Intervals(r, ivs), Netperf(r))
	for _, tb := range tables {
		t.Run(tb.Name, func(t *testing.T) {
			head, rows := csvRows(t, tb)
			if len(rows) == 0 {
				t.Fatal("no rows")
			}
			for _, row := range rows {
				for _, k := range head {
					if v := row[k]; v != "" && !slices.Contains(textKeys, k) {
						if _, err := strconv.ParseFloat(v, 64); err != nil {
							t.Errorf("column %s: %q is not a number", k, v)
						}
					}
				}
			}
			if tb.Name == TableFetches || tb.Name == "intervals" || tb.Name == "netperf" {
				return // one record a row: no medians
			}
			counted := true
			for i, k := range head {
				if !strings.HasSuffix(k, "_mbps") || k == "link_mbps" || k == "best_mbps" {
					continue
				}
				counted = false
				for _, k2 := range head[i+1:] {
					if strings.HasSuffix(k2, "count") {
						counted = true
						break
					}
					if strings.HasSuffix(k2, "_mbps") && k2 != "best_mbps" {
						break
					}
				}
				if !counted {
					t.Errorf("median column %s has no count column after it: %v", k, head)
				}
			}
		})
	}
}

// ubootLookups reads what U-Boot 2023.01 (Debian's qemu_arm64 build)
// asked for, from its console: distro boot's boot.scr.uimg (twice at
// autoboot), `pxe get` with no pxeuuid and no host entry (01-MAC, the hex
// IP and its prefixes, default-arm, default), then `run bootcmd_dhcp`
// (boot.scr.uimg, dtb/ with no fdtfile set). The capture ran against QEMU's
// user-net TFTP with an empty root; its "Access violation" for dtb/ is
// what slirp says for a folder, pxeperf says not found.
func ubootLookups(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "uboot-arm64-pxe-get.console"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^Filename '(.*)'\.$`)
	var names []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := re.FindStringSubmatch(s.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// TestClientsUBootLookups: U-Boot's normal lookups of a board with no host
// entry are probes, not failures; a missing kernel still is one.
func TestClientsUBootLookups(t *testing.T) {
	names := ubootLookups(t)
	mac := "52:54:00:e2:b0:01"
	hw, _ := net.ParseMAC(mac)
	chain := bootcfg.UBootPXEChain(hw, netip.MustParseAddr("10.0.2.15"), "arm", "", "qemu-arm")
	if i := slices.Index(names, chain[0]); i < 0 || !slices.Equal(names[i:i+len(chain)], chain) {
		t.Fatalf("the console's lookups %q do not hold bootcfg's U-Boot chain %q", names, chain)
	}
	var recs []record.Record
	add := func(file, outcome string, bytes int64) {
		recs = append(recs, record.Record{ID: int64(len(recs) + 1), Time: t0.Add(time.Duration(len(recs)) * time.Second),
			Source: "serve", Proto: "tftp", Direction: "rx", ClientMAC: mac, ClientIP: "10.0.2.15", File: file,
			Outcome: outcome, Bytes: bytes, Size: bytes, Mbps: 80, Iface: "pxbr0", MTU: 1500, LinkDriver: "bridge"})
	}
	for _, n := range names {
		add(n, "not-found", 0)
	}
	add("img16m", "ok", 16<<20)
	_, rows := csvRows(t, Clients(recs))
	want := []map[string]string{{"client": mac, "fetches": strconv.Itoa(len(names) + 1), "failed": "0", "probes": strconv.Itoa(len(names))}}
	got := []map[string]string{{"client": rows[0]["client"], "fetches": rows[0]["fetches"], "failed": rows[0]["failed"], "probes": rows[0]["probes"]}}
	if d := cmp.Diff(want, got); d != "" || len(rows) != 1 {
		t.Errorf("clients after U-Boot's %d lookups (-want +got):\n%s\nrows: %v", len(names), d, rows)
	}
	// A kernel that is not there is a failure, beside the probes.
	add("vmlinuz-missing", "not-found", 0)
	_, rows = csvRows(t, Clients(recs))
	if rows[0]["failed"] != "1" || rows[0]["probes"] != strconv.Itoa(len(names)) {
		t.Errorf("a missing kernel: failed %s probes %s, want 1 and %d", rows[0]["failed"], rows[0]["probes"], len(names))
	}
	// Records of a pxeperf before probes had a kind say error: the same.
	for i := range recs {
		if recs[i].Outcome != "ok" {
			recs[i].Kind = record.KindError
		}
	}
	_, rows = csvRows(t, Servers(recs))
	if rows[0]["failed"] != "1" || rows[0]["probes"] != strconv.Itoa(len(names)) {
		t.Errorf("servers, old records: failed %s probes %s, want 1 and %d", rows[0]["failed"], rows[0]["probes"], len(names))
	}
}

// TestLinkOf: what counts as a known link speed.
func TestLinkOf(t *testing.T) {
	for name, c := range map[string]struct {
		r    record.Record
		want string
		pct  bool
	}{
		"tbf":                {record.Record{RateLimit: 100e6, LinkMbps: 10000, LinkDriver: "veth"}, "100M tbf", true},
		"nic":                {record.Record{LinkMbps: 1000, LinkDriver: "igb"}, "1G", true},
		"veth":               {record.Record{LinkMbps: 10000, LinkDriver: "veth"}, "speed unknown (veth)", false},
		"tun":                {record.Record{LinkMbps: 10, LinkDriver: "tun"}, "speed unknown (tun)", false},
		"loopback":           {record.Record{Iface: "lo"}, "speed unknown (none reported)", false},
		"old bench":          {record.Record{Source: "bench", LinkMbps: 10000}, "speed unknown (veth)", false},
		"old remote bench":   {record.Record{Source: "bench", LinkMbps: 1000, Labels: map[string]string{"remote": "lab1"}}, "1G unverified", false},
		"old veth by name":   {record.Record{Source: "serve", Iface: "veth3a2b", LinkMbps: 10000}, "speed unknown (veth)", false},
		"old, driver unread": {record.Record{Source: "serve", Iface: "vs28", LinkMbps: 10000}, "10G unverified", false},
	} {
		l := LinkOf(&c.r)
		if l.String() != c.want || l.Known() != c.pct {
			t.Errorf("%s: %q known %v, want %q known %v", name, l.String(), l.Known(), c.want, c.pct)
		}
	}
}
