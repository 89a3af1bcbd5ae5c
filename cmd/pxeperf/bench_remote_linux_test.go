//go:build linux

package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pxeperf/pxeperf/bench"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
	"github.com/pxeperf/pxeperf/record"
)

// TestBenchRemote runs the real `pxeperf serve` binary on loopback with HTTP
// and the stream server on, then `pxeperf bench --server 127.0.0.1`
// against it: HTTP fetches of a generated image by window, and TCP/UDP
// streams both ways; the records land in the bench's own store.
func TestBenchRemote(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "images")
	if _, err := images.GenerateFile(root, bench.DefaultRemoteFile, 4<<20, 1); err != nil {
		t.Fatal(err)
	}
	httpPort, streamPort := testenv.FreePort(t, "tcp"), testenv.FreePort(t, "tcp")
	srv := startServe(t, "", "", "--iface", "lo", "--addr", "127.0.0.1", "--dhcp", "off", "--tftp-addr", "off", "--admin-addr", "off",
		"--http-addr", "127.0.0.1:"+strconv.Itoa(httpPort), "--stream-addr", "127.0.0.1:"+strconv.Itoa(streamPort),
		"--root", root, "--data", filepath.Join(dir, "serve-data"))
	if !strings.Contains(srv.out.String(), "stream server listening") {
		t.Errorf("serve did not start the stream server:\n%s", srv.out.String())
	}

	data := t.TempDir()
	server := "127.0.0.1:" + strconv.Itoa(streamPort)
	stdout, errOut, err := runBenchCmd(t, "--server", server, "--http-port", strconv.Itoa(httpPort),
		"--window", "64K,auto", "--repeat", "2", "--data", data, "-q")
	if err != nil {
		t.Fatalf("bench --server (http): %v\n%s", err, errOut)
	}
	for _, want := range []string{"Throughput by client window", "65536", "Remote run"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("HTTP output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, errOut, err = runBenchCmd(t, "--server", server, "--proto", "tcp,udp", "--duration", "1s", "--udp-rate", "20mbit",
		"--data", data, "-q", "--verbose")
	if err != nil {
		t.Fatalf("bench --server (streams): %v\n%s", err, errOut)
	}
	for _, want := range []string{"TCP Tx", "UDP Rx", "udp_rate=20mbit", "receiver"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stream output lacks %q:\n%s", want, stdout)
		}
	}

	st, err := record.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Query(context.Background(), record.Filter{Labels: map[string]string{bench.LabelRemote: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range recs {
		count[r.Proto+" "+r.Direction]++
		if r.Outcome != "ok" || r.Mbps <= 0 || r.Source != bench.Source {
			t.Errorf("record %d (%s %s): outcome %s (%s), %.1f Mbit/s, source %q", r.ID, r.Proto, r.Direction, r.Outcome, r.Err, r.Mbps, r.Source)
		}
		if r.Proto == bench.ProtoHTTP && (r.Bytes != 4<<20 || r.File != bench.DefaultRemoteFile) {
			t.Errorf("HTTP record %d: %d bytes of %q", r.ID, r.Bytes, r.File)
		}
	}
	want := map[string]int{"http rx": 4, "tcp tx": 1, "tcp rx": 1, "udp tx": 1, "udp rx": 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d %s records, want %d (all: %v)", count[k], k, n, count)
		}
	}

	// A missing image says how to make one.
	_, _, err = runBenchCmd(t, "--server", server, "--http-port", strconv.Itoa(httpPort), "--file", "nosuch.img", "--data", data, "-q")
	if err != nil {
		t.Fatalf("a failed fetch is a record, not an error: %v", err)
	}
	recs, _ = st.Query(context.Background(), record.Filter{File: "nosuch.img"})
	if len(recs) != 1 || recs[0].Outcome == "ok" || !strings.Contains(recs[0].Err, "pxeperf images generate") {
		t.Errorf("fetch of a missing image: %+v", recs)
	}
}

// TestBenchStreamFlagErrors: stream and remote flags that cannot run.
func TestBenchStreamFlagErrors(t *testing.T) {
	checkBadFlags(t, map[string]badFlags{
		"cross-check on http":     {args: []string{"--cross-check", "iperf3"}, want: []string{"add --proto tcp,udp"}},
		"cross-check other tool":  {args: []string{"--proto", "tcp", "--cross-check", "netperf"}, want: []string{"iperf3"}},
		"cross-check remote":      {args: []string{"--proto", "tcp", "--cross-check", "iperf3", "--server", "127.0.0.1"}, want: []string{"drop --server"}},
		"mtu remote":              {args: []string{"--proto", "tcp", "--mtu", "9000", "--server", "127.0.0.1"}, want: []string{"real link"}},
		"file without server":     {args: []string{"--file", "x.img"}, want: []string{"add --server HOST"}},
		"direction on http":       {args: []string{"--direction", "tx"}, want: []string{"apply to --proto tcp and udp"}},
		"tftp remote":             {args: []string{"--proto", "tftp", "--server", "127.0.0.1"}, want: []string{"needs the testbed"}},
		"bad http port":           {args: []string{"--server", "127.0.0.1", "--http-port", "0"}, want: []string{"1..65535"}},
		"udp rate without a unit": {args: []string{"--proto", "udp", "--udp-rate", "fast"}, want: []string{"--udp-rate"}},
	})
}
