package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/bench"
	"github.com/pxeperf/pxeperf/metrics"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/spf13/cobra"
)

// benchFlags are the flags of `pxeperf bench`.
type benchFlags struct {
	sweep                bench.Flags
	data, format, config string
	verbose, quiet       bool
	stream               streamFlags // bench_stream.go
	delayCPU             string
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Sweep measured fetches on a testbed of namespaces: window x offload x MTU x rate",
		Long: `Build a testbed (two network namespaces joined by a veth pair), run pxeperf's
HTTP boot server on one side and a client on the other, and fetch an image at
every point of a sweep. Records go to the store under --data (Source "bench"),
so pxeperf report prints them too. Needs root. Ctrl-C tears the testbed down.

  pxeperf bench --preset gpxe           the 2010 gPXE study: window 4096..65532 x RX csum on/off,
                                        1gbit, 500MiB x3
  pxeperf bench --preset gpxe --size 64MiB --repeat 1   the same, quicker
  pxeperf bench --preset gpxe --delay 100us        with a 200 us round trip, where the window limits
  pxeperf bench --window 4K..64K/4K --offload on,off --mtu 1500,9000 --rate 1gbit \
                --size 500MiB --repeat 3
  pxeperf bench --window 4K,16K,64K,auto --rate 100mbit,10mbit --size 16MiB
  pxeperf bench --preset tftp           TFTP blksize 512,1468 x windowsize 1..64, 1gbit, 64MiB x3
  pxeperf bench --proto tftp --blksize 1468 --windowsize 1..64 --rate 100mbit --size 16MiB

--window is the client's SO_RCVBUF, set before connect (auto: not set, the
kernel autotunes); --offload the client's RX checksum offload (the board's
knob in the gPXE study); --rate a tbf on the server's egress, what the board
receives (none: unlimited). --proto tftp fetches with pxeperf's TFTP client
instead and sweeps --blksize x --windowsize (RFC 2348, RFC 7440) in place of
--window; 1..64 doubles, 512..1468/478 steps. One protocol per run.
Presets: ` + strings.Join(bench.PresetNames(), ", ") + `; flags given with a preset
replace its values.` + streamHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.sweep.Preset, "preset", "", "a published study: "+strings.Join(bench.PresetNames(), ", "))
	fl.StringVar(&f.sweep.Proto, "proto", "", "protocol: http, tftp, or tcp, udp, tcp,udp (default http)")
	fl.StringVar(&f.sweep.BlkSize, "blksize", "", "TFTP blksize: 512,1468, 512..1468/478 (default 512,1468)")
	fl.StringVar(&f.sweep.WindowSize, "windowsize", "", "TFTP windowsize in blocks: 1,4,16, 1..64 doubling (default 1,4,8,16,32,64)")
	fl.StringVar(&f.sweep.Window, "window", "", "client SO_RCVBUF: 4K, 4K..64K/4K, 4K,16K,64K, auto (default auto)")
	fl.StringVar(&f.sweep.Offload, "offload", "", "client RX checksum offload: on, off, on,off (default on,off)")
	fl.StringVar(&f.sweep.MTU, "mtu", "", "MTU of the veth pair: 1500, 1500,9000 (default 1500)")
	fl.StringVar(&f.sweep.Rate, "rate", "", "server egress rate: 1gbit, 100mbit, 10mbit, none (default none)")
	fl.StringVar(&f.sweep.Delay, "delay", "", "one-way delay added each way (netem, else netlab's delay line): 100us, 0.1ms,1ms, none (default none)")
	fl.StringVar(&f.delayCPU, "delay-cpu", "", "pin netlab's delay line to these CPUs: 1, 2,3 (keep other work off them, e.g. with taskset; default any)")
	fl.StringVar(&f.sweep.Size, "size", "", "image size per fetch: 64MiB, 500MiB (default 64MiB)")
	fl.IntVar(&f.sweep.Repeat, "repeat", 0, "fetches per point (default 1)")
	fl.Uint64Var(&f.sweep.Seed, "seed", 0, "seed of the generated image's bytes (default 1)")
	addStreamFlags(cmd, &f)
	fl.StringVar(&f.data, "data", "", "state folder holding the record store (default: the config's data, as serve's)")
	addConfigFlag(cmd, &f.config)
	fl.StringVar(&f.format, "format", string(report.Text), "table format: text, markdown, csv or json")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print iperf3-style interval lines for every fetch")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	_ = cmd.RegisterFlagCompletionFunc("preset", cobra.FixedCompletions(bench.PresetNames(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "markdown", "csv", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("data")
	return cmd
}

func runBench(cmd *cobra.Command, f *benchFlags) error {
	if cmd.Flags().Changed("repeat") && f.sweep.Repeat < 1 {
		return usageErrorf("--repeat %d: every point needs at least one fetch; use --repeat 1 (up to %d)",
			f.sweep.Repeat, bench.MaxRepeat)
	}
	spec, err := bench.ParseSpec(f.sweep)
	if err != nil {
		return usageError(err)
	}
	format, err := report.ParseFormat(f.format)
	if err != nil {
		return usageErrorf("--format: %w", err)
	}
	delayCPUs, err := bench.ParseCPUs(f.delayCPU)
	if err != nil {
		return usageErrorf("--delay-cpu: %w", err)
	}
	if err := checkStreamFlags(cmd, f, spec); err != nil {
		return usageError(err)
	}
	if f.stream.server != "" {
		return runRemoteBench(cmd, f, spec, format)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("bench builds network namespaces and needs root: run it with sudo")
	}
	s, err := startBench(cmd, f)
	if err != nil {
		return err
	}
	defer s.close()
	// Ctrl-C: the context ends the sweep, and the registry tears the
	// testbed down at once, even mid-fetch.
	reg := netlab.NewRegistry()
	stopTeardown := context.AfterFunc(s.ctx, func() { _ = reg.CloseAll() })
	defer stopTeardown()

	fmt.Fprintln(s.errOut, bench.Header(s.runID, spec))
	prog := newProgress(s.errOut, f.quiet)
	opt := bench.Options{Spec: spec, Store: s.store, RunID: s.runID, Registry: reg, Logger: s.logger, Progress: prog.update,
		CrossCheck: f.stream.crossCheck != "", MeasuredBy: s.by, DelayCPUs: delayCPUs}
	if f.verbose {
		opt.Verbose = s.out
	}
	results, runErr := bench.Run(s.ctx, opt)
	prog.finish()
	if err := renderTables(s.out, bench.Tables(results, spec, s.runID, format == report.Text || format == report.Markdown), format); err != nil {
		return err
	}
	return runErr
}

// benchStart is what every bench run (testbed or remote) opens before its
// sweep: its outputs, the warn-level logger on stderr, the record store and
// who measured, a context Ctrl-C ends, and the run ID.
type benchStart struct {
	out, errOut io.Writer
	logger      *slog.Logger
	store       *record.Store
	by          bench.Origin
	ctx         context.Context
	runID       string
	close       func()
}

func startBench(cmd *cobra.Command, f *benchFlags) (*benchStart, error) {
	s := &benchStart{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
	s.logger = slog.New(slog.NewTextHandler(s.errOut, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: metrics.PlainAttr}))
	var err error
	if s.store, s.by, err = openBenchStore(cmd, f); err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	s.ctx, s.runID = ctx, bench.NewRunID()
	s.close = func() { stop(); s.store.Close() }
	return s, nil
}

// openBenchStore opens the store bench records go to, and who measured
// them: with --data, the SQLite store in that folder; else the config's
// store (store.url, else its data folder's SQLite), as serve and report
// use it. Either way every record carries the config's server.name and
// server.site, as served fetches do.
func openBenchStore(cmd *cobra.Command, f *benchFlags) (*record.Store, bench.Origin, error) {
	cfg, err := loadConfig(f.config)
	if err != nil {
		return nil, bench.Origin{}, err
	}
	by := bench.Origin{Server: cfg.ServerName(), Site: cfg.Server.Site}
	if f.data, err = dataFolder(cmd, f.config, f.data); err != nil {
		return nil, by, err
	}
	if cmd.Flags().Changed("data") {
		cfg.Store.URL = ""
	}
	cfg.Data = f.data
	st, err := openStore(cfg)
	return st, by, err
}

// renderTables prints each table after a blank line.
func renderTables(out io.Writer, tables []report.Table, format report.Format) error {
	for _, t := range tables {
		fmt.Fprintln(out)
		if err := report.Render(out, t, format); err != nil {
			return err
		}
	}
	return nil
}

// progress draws a bar with ETA on a terminal, plain lines otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool
}

func newProgress(w io.Writer, quiet bool) *progress {
	p := &progress{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(pr bench.Progress) {
	if p.quiet {
		return
	}
	var last string
	if r := pr.Last; r != nil {
		last = bench.ProgressLine(r)
	}
	eta := "-"
	if pr.ETA > 0 {
		eta = pr.ETA.Round(time.Second).String()
	}
	if !p.tty {
		if pr.Last != nil {
			fmt.Fprintf(p.w, "[%d/%d] %s (elapsed %s, ETA %s)\n", pr.Done, pr.Total, last, pr.Elapsed.Round(time.Second), eta)
		}
		return
	}
	const width = 30
	fill := 0
	if pr.Total > 0 {
		fill = pr.Done * width / pr.Total
	}
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	line := fmt.Sprintf("[%s] %d/%d ETA %s  %s", bar, pr.Done, pr.Total, eta, last)
	if len(line) > 150 {
		line = line[:150]
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

func (p *progress) finish() {
	if p.tty && !p.quiet {
		fmt.Fprintln(p.w)
	}
}
