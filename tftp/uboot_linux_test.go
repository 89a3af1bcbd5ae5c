//go:build linux

package tftp

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// TestUBootWindowCap: a client DHCP saw as U-Boot (option 60) asking
// windowsize 32 is agreed 16 (the default cap), on the wire, on its record
// and in the log; a client that is not U-Boot gets the 32 it asked; a
// negative cap turns the rule off; a U-Boot client asking under the cap
// keeps its value.
func TestUBootWindowCap(t *testing.T) {
	uboot, other := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	macU, _ := net.ParseMAC("52:54:00:00:32:01")
	macO, _ := net.ParseMAC("52:54:00:00:32:02")
	table := hosts.New(nil)
	table.Observe(hosts.Client{MAC: macU, Addr: uboot, Arch: 22, UBoot: true})
	table.Observe(hosts.Client{MAC: macO, Addr: other, Arch: configs.ArchUnknown})
	tests := map[string]struct {
		cap    int // Config.UBootMaxWindowSize
		client netip.Addr
		ask    int
		want   int
		logged bool
	}{
		"U-Boot asks 32, default cap":  {client: uboot, ask: 32, want: 16, logged: true},
		"not U-Boot asks 32":           {client: other, ask: 32, want: 32},
		"U-Boot asks 8, under the cap": {client: uboot, ask: 8, want: 8},
		"U-Boot, cap 4":                {cap: 4, client: uboot, ask: 32, want: 4, logged: true},
		"U-Boot, cap off":              {cap: -1, client: uboot, ask: 32, want: 32},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var logs nstest.SyncBuffer
			ts := startServer(t, Config{Hosts: table, UBootMaxWindowSize: tc.cap,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			body := ts.file(t, "Image", 200_000)
			conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tc.client, 0)))
			if err != nil {
				t.Skipf("cannot bind %s on loopback: %v", tc.client, err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var got bytes.Buffer
			st, err := Get(ctx, conn, ts.Addr(), "Image", &got, ClientOptions{BlkSize: 1024, WindowSize: tc.ask})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), body) {
				t.Fatalf("got %d bytes, not the file's %d", got.Len(), len(body))
			}
			if st.WindowSize != tc.want {
				t.Errorf("OACK windowsize %d, want %d", st.WindowSize, tc.want)
			}
			ev := ts.fetches(t, 1)[0]
			if ev.TFTP.WindowSize != tc.want || ev.MAC == nil {
				t.Errorf("record windowsize %d MAC %v, want %d and the client's MAC", ev.TFTP.WindowSize, ev.MAC, tc.want)
			}
			line := "windowsize capped for U-Boot"
			if has := strings.Contains(logs.String(), line); has != tc.logged {
				t.Errorf("log has %q: %v, want %v; log:\n%s", line, has, tc.logged, logs.String())
			}
		})
	}
}
