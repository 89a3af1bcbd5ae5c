package main

import (
	"errors"
	"fmt"

	"github.com/pxeperf/pxeperf/bench"
	"github.com/pxeperf/pxeperf/report"
	"github.com/spf13/cobra"
)

// streamFlags are bench's TCP/UDP and remote-mode flags (the sweep's
// --direction, --duration, --udp-rate live in bench.Flags).
type streamFlags struct {
	crossCheck string
	server     string
	httpPort   int
	file       string
}

const streamHelp = `
TCP and UDP streams (pxeperf's own iperf3-like test, package stream):
  pxeperf bench --preset xilinx       TCP/UDP x tx/rx x MTU 1500,9000 on 1gbit, 10s x3:
                                      the direction-mtu table
  pxeperf bench --preset linkspeed    TCP tx/rx x 1gbit,100mbit,10mbit, 10s x3: the linkspeed table
  pxeperf bench --proto tcp,udp --direction tx,rx --duration 10s --udp-rate 100mbit \
                --cross-check iperf3
  pxeperf bench --proto tcp --window 16K,64K,auto --rate 1gbit --cross-check iperf3
--direction is seen from the board: tx = the client sends, rx = it receives.
--rate is a tbf on both veth ends for streams. --window sets SO_RCVBUF and
SO_SNDBUF on both ends (as iperf3 -w). --udp-rate line sends at the link
rate less the headers. --cross-check iperf3 runs iperf3 after every run on
the same testbed and settings and prints the pairs, marking those over 5%.

Remote mode (no testbed, no root): the client side against a pxeperf serve
elsewhere, records labelled remote=HOST:
  pxeperf bench --server 192.168.50.1 --proto http --window 16K,auto --file bench.img
  pxeperf bench --server 192.168.50.1:5211 --proto tcp,udp --duration 5s
The server needs the image in its root (pxeperf images generate bench.img
--size 64MiB) and its stream server on (config stream.enabled: true, or
pxeperf serve --stream-addr :5211).`

func addStreamFlags(cmd *cobra.Command, f *benchFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.sweep.Direction, "direction", "", "streams: tx (the board sends), rx, tx,rx (default tx,rx)")
	fl.StringVar(&f.sweep.Duration, "duration", "", "streams: seconds per run, 1s..60s (default 10s)")
	fl.StringVar(&f.sweep.UDPRate, "udp-rate", "", "UDP payload rate: 100mbit, 1gbit,100mbit, line (default line: the link rate less headers)")
	fl.StringVar(&f.stream.crossCheck, "cross-check", "", "streams: iperf3 runs every point too and the pairs are printed")
	fl.StringVar(&f.stream.server, "server", "", "remote mode: HOST[:PORT] of a pxeperf serve (PORT: its stream server, default 5211)")
	fl.IntVar(&f.stream.httpPort, "http-port", 80, "remote mode: the HTTP port of the pxeperf serve")
	fl.StringVar(&f.stream.file, "file", bench.DefaultRemoteFile, "remote mode, HTTP: the image to fetch from the server's root")
	_ = cmd.RegisterFlagCompletionFunc("cross-check", cobra.FixedCompletions([]string{"iperf3"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("direction", cobra.FixedCompletions([]string{"tx", "rx", "tx,rx"}, cobra.ShellCompDirectiveNoFileComp))
}

// checkStreamFlags refuses flag combinations that cannot run.
func checkStreamFlags(cmd *cobra.Command, f *benchFlags, spec bench.Spec) error {
	switch f.stream.crossCheck {
	case "":
	case "iperf3":
		if spec.Proto != bench.ProtoStream {
			return errors.New("--cross-check iperf3 compares TCP/UDP streams: add --proto tcp,udp (or a stream preset)")
		}
		if f.stream.server != "" {
			return errors.New("--cross-check needs the testbed (iperf3 runs on both ends); drop --server")
		}
	default:
		return fmt.Errorf("--cross-check %q: the tool to compare with is iperf3", f.stream.crossCheck)
	}
	if f.stream.server == "" {
		for _, name := range []string{"http-port", "file"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s applies to remote mode: add --server HOST", name)
			}
		}
		return nil
	}
	for _, name := range []string{"mtu", "rate", "offload"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s: remote mode runs over the real link, which the bench cannot change; drop --%s or --server", name, name)
		}
	}
	if f.stream.httpPort < 1 || f.stream.httpPort > 65535 {
		return fmt.Errorf("--http-port %d: a port is 1..65535", f.stream.httpPort)
	}
	return nil
}

// runRemoteBench is `pxeperf bench --server HOST`: the sweep against a
// pxeperf serve elsewhere, no testbed, records into the local store.
func runRemoteBench(cmd *cobra.Command, f *benchFlags, spec bench.Spec, format report.Format) error {
	spec, err := bench.RemoteSpec(spec)
	if err != nil {
		return err
	}
	s, err := startBench(cmd, f)
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Fprintf(s.errOut, "pxeperf bench %s against %s: %d runs\n", s.runID, f.stream.server, spec.Count())
	prog := newProgress(s.errOut, f.quiet)
	opt := bench.RemoteOptions{Spec: spec, Server: f.stream.server, HTTPPort: f.stream.httpPort, File: f.stream.file,
		Store: s.store, RunID: s.runID, Logger: s.logger, Progress: prog.update, MeasuredBy: s.by}
	if f.verbose {
		opt.Verbose = s.out
	}
	results, runErr := bench.RunRemote(s.ctx, opt)
	prog.finish()
	if err := renderTables(s.out, bench.RemoteTables(results, spec, s.runID, f.stream.server, format == report.Text || format == report.Markdown), format); err != nil {
		return err
	}
	return runErr
}
