package report

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/record"
)

// TestClientsServersPerProtocol: a board's TFTP boot binary (80 Mbit/s)
// and its HTTP kernel (300 Mbit/s) over one link are two rows, each with
// its own median and n; no median of 190 that neither protocol ran at.
func TestClientsServersPerProtocol(t *testing.T) {
	var recs []record.Record
	add := func(proto, file string, mbps float64) {
		recs = append(recs, record.Record{ID: int64(len(recs) + 1), Time: t0.Add(time.Duration(len(recs)) * time.Second),
			Source: "serve", Proto: proto, Direction: "rx", ClientMAC: "52:54:00:12:34:01", ClientIP: "10.28.0.11",
			File: file, Kind: record.KindImage, Outcome: "ok", Bytes: 16 << 20, Size: 16 << 20, Mbps: mbps,
			Server: "pxe1", Iface: "pxbr0", MTU: 1500, LinkDriver: "bridge"})
	}
	add("tftp", "ipxe.efi", 79)
	add("tftp", "ipxe.efi", 81)
	add("http", "vmlinuz", 290)
	add("http", "vmlinuz", 310)
	add("http", "initrd.img", 300)
	want := []map[string]string{
		{"proto": "http", "median_mbps": "300.0", "count": "3", "fetches": "3"},
		{"proto": "tftp", "median_mbps": "80.0", "count": "2", "fetches": "2"},
	}
	for _, tb := range []Table{Clients(recs), Servers(recs)} {
		_, rows := csvRows(t, tb)
		var got []map[string]string
		for _, r := range rows {
			got = append(got, map[string]string{"proto": r["proto"], "median_mbps": r["median_mbps"], "count": r["count"], "fetches": r["fetches"]})
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: a row per protocol (-want +got):\n%s", tb.Name, d)
		}
		b, err := json.Marshal(tb.Data)
		if err != nil {
			t.Fatal(err)
		}
		var js []struct {
			Proto  string  `json:"proto"`
			Median float64 `json:"median_mbps"`
			Count  int     `json:"count"`
		}
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatal(err)
		}
		if len(js) != 2 || js[0].Proto != "http" || js[0].Median != 300 || js[1].Proto != "tftp" || js[1].Median != 80 || js[1].Count != 2 {
			t.Errorf("%s JSON rows: %+v", tb.Name, js)
		}
	}
}
