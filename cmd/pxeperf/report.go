package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/spf13/cobra"
)

// reportFlags are the flags of `pxeperf report`.
type reportFlags struct {
	table, format, data, chart, config, store string
	compare                                   string // a published study's key
	intervals, netperf                        int64
	limit                                     int
	merge                                     string // split keys rows may share
	filter                                    report.FilterArgs
}

func newReportCmd() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Tables of the measured fetches: window x offload, direction x MTU, clients, link speed",
		Long: `Print the measurements pxeperf serve recorded, as the tables labs publish.
It reads the store under --data (default: the data folder of the config serve
reads: --config, ./pxeperf.yaml, /etc/pxeperf/pxeperf.yaml; the default's is
./pxeperf-data), also while serve is running, or the PostgreSQL database
many servers share (--store postgres://..., default the config's store.url).

  pxeperf report                                   fetches per client
  pxeperf report --table window-offload            Mbit/s by client window x RX checksum offload
  pxeperf report --table direction-mtu             TCP/UDP Tx/Rx by MTU
  pxeperf report --table linkspeed                 by link speed (1G/100M/10M), both directions
  pxeperf report --table tftp                      TFTP by blksize x windowsize
  pxeperf report --table fetches --limit 20        the latest fetches, with their IDs
  pxeperf report --intervals 42                    one fetch, iperf3-style interval lines
  pxeperf report --netperf 42                      one fetch, netperf TCP_STREAM summary
  pxeperf report --table window-offload --label fw=gpxe-1.0.1 --since 2h --format markdown
  pxeperf report --chart window.svg                Mbit/s by window, a line per offload (.svg, .png)
  pxeperf report --compare gpxe-2010 --label bench_run=ID   a published study beside a bench run
  pxeperf report --store postgres://pxeperf@db.lab/pxeperf --table servers  per server and site
  pxeperf report --store postgres://pxeperf@db.lab/pxeperf --site north      one site only

Every fetch has a kind: image, boot (boot binaries), config (scripts and loader
configs), api (/, health probes), error (not completed), probe (a loader config
lookup the loader expects to miss: the pxelinux.cfg chain, GRUB's grub.cfg-* and
.lst files, U-Boot's boot.scr and dtb/ probes; not a failure), stream (iperf and
bench streams). Throughput tables count images and streams (TFTP: images and
boot binaries); --kind chooses others, --min-size leaves small files out.

A row never mixes sources (serve: served boot fetches, bench, iperf3, iperf2)
or links (interface, MTU, link speed: the bench's tbf rate, a NIC's speed, or
"speed unknown (veth)" for a virtual NIC, whose speed is nominal): each gets
rows of its own, every cell with its count n (--compare's measured cells too).
--merge lets rows share them: --merge iface, --merge source,mtu, --merge link
(iface, mtu and speed), --merge all. The clients and servers tables also keep
protocols apart (a row per tftp, http, tcp, udp).

A board's RX checksum offload is invisible to the server: give it as the label
rx_offload=on|off on the host entry or the script URL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReport(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.table, "table", report.TableClients, "table: "+strings.Join(report.TableNames, ", "))
	fl.Int64Var(&f.intervals, "intervals", 0, "print one fetch's interval samples like iperf3 (ID from --table fetches)")
	fl.Int64Var(&f.netperf, "netperf", 0, "print one fetch like netperf's TCP_STREAM summary")
	fl.StringVar(&f.filter.Client, "client", "", "only this client: MAC, IP or host name")
	fl.StringVar(&f.filter.File, "file", "", "only this file: a name, or a glob with * and ?")
	fl.StringVar(&f.filter.Since, "since", "", "only fetches since: a duration back (90m, 2h, 7d) or a time (RFC 3339 or 2006-01-02)")
	fl.StringArrayVar(&f.filter.Labels, "label", nil, "only fetches with label key=value (repeatable, all must match)")
	fl.StringVar(&f.filter.Kind, "kind", "", "only these kinds: "+strings.Join(record.KindNames, ", ")+
		" or all, comma-separated (default: throughput tables use images and streams)")
	fl.StringVar(&f.filter.MinSize, "min-size", "", "only fetches of at least this size: bytes, or 64K, 1M, 1G")
	fl.IntVar(&f.limit, "limit", 0, "only the newest N fetches (0: all)")
	fl.StringVar(&f.merge, "merge", "", "let rows share these split keys: source, iface, mtu, speed, link (iface, mtu, speed) or all, comma-separated (default: a row never mixes them)")
	fl.StringVar(&f.format, "format", string(report.Text), "output format: text, markdown, csv or json")
	fl.StringVar(&f.data, "data", "", "state folder holding the record store (default: the config's data, as serve's)")
	fl.StringVar(&f.store, "store", "", "record store: postgres://USER@HOST/DB or sqlite:PATH (default: the config's store.url, else --data)")
	fl.StringVar(&f.filter.Server, "server", "", "only fetches measured by this server (server.name)")
	fl.StringVar(&f.filter.Site, "site", "", "only fetches of this site (server.site)")
	addConfigFlag(cmd, &f.config)
	fl.StringVar(&f.chart, "chart", "", "draw Mbit/s against client window (the window-offload table) to FILE.svg or FILE.png")
	fl.StringVar(&f.compare, "compare", "", "print a published study beside the measured records: "+
		strings.Join(report.StudyKeys(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("compare", cobra.FixedCompletions(report.StudyKeys(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("table", cobra.FixedCompletions(report.TableNames, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "markdown", "csv", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("data")
	_ = cmd.MarkFlagFilename("chart", "svg", "png")
	return cmd
}

func runReport(cmd *cobra.Command, f *reportFlags) error {
	// Every argument is checked before the store is opened.
	args, err := parseReportArgs(cmd, f)
	if err != nil {
		return err
	}
	st, data, err := openReportStore(cmd, f)
	if err != nil {
		return err
	}
	defer st.Close()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var t report.Table
	if args.oneRecord() {
		t, err = recordTable(cmd.Context(), st, f, args)
	} else {
		var done bool
		t, done, err = queryTable(cmd.Context(), st, f, args, data, errOut)
		if done {
			return err
		}
	}
	if err != nil {
		return err
	}
	if len(t.Rows) == 0 && t.Layout == "" && (args.format == report.CSV || args.format == report.JSON) {
		fmt.Fprintln(errOut, t.Empty)
	}
	return report.Render(out, t, args.format)
}

// reportArgs are report's flags, parsed and checked against each other.
type reportArgs struct {
	set    func(string) bool
	format report.Format
	filter record.Filter
	opt    report.Options
}

// oneRecord: --intervals or --netperf print one record, not a table of many.
func (a reportArgs) oneRecord() bool { return a.set("intervals") || a.set("netperf") }

// parseReportArgs parses the format, filter and merge flags and refuses
// flags that ask for two outputs at once; every refusal is a usage error.
func parseReportArgs(cmd *cobra.Command, f *reportFlags) (reportArgs, error) {
	set := cmd.Flags().Changed
	var picked []string
	for _, n := range []string{"table", "intervals", "netperf", "compare"} {
		if set(n) {
			picked = append(picked, "--"+n)
		}
	}
	if len(picked) > 1 {
		return reportArgs{}, usageErrorf("%s: give one of --table, --intervals, --netperf and --compare (each prints something else)",
			strings.Join(picked, " and "))
	}
	format, err := report.ParseFormat(f.format)
	if err != nil {
		return reportArgs{}, usageErrorf("--format: %w", err)
	}
	if set("limit") {
		if f.limit < 0 {
			return reportArgs{}, usageErrorf("--limit %d: want a count of fetches, e.g. --limit 20", f.limit)
		}
		if f.limit > 0 {
			f.filter.Limit = strconv.Itoa(f.limit)
		}
	}
	filter, err := report.ParseFilter(f.filter, time.Now())
	if err != nil {
		return reportArgs{}, usageErrorf("bad filter (--client, --file, --since, --label, --kind, --min-size, --limit): %w", err)
	}
	if _, err := report.Build(f.table, nil); err != nil {
		return reportArgs{}, usageErrorf("--table: %w", err)
	}
	merge, err := report.ParseMerge(f.merge)
	if err != nil {
		return reportArgs{}, usageErrorf("--merge: %w", err)
	}
	if err := checkReportOutputs(f, set); err != nil {
		return reportArgs{}, err
	}
	return reportArgs{set: set, format: format, filter: filter, opt: report.Options{Kinds: filter.Kinds, Merge: merge}}, nil
}

// checkReportOutputs refuses a chart file that is neither .svg nor .png,
// a record ID that is not positive, and --chart beside an output it does
// not draw.
func checkReportOutputs(f *reportFlags, set func(string) bool) error {
	ext := strings.ToLower(filepath.Ext(f.chart))
	if f.chart != "" && ext != ".svg" && ext != ".png" {
		return usageErrorf("--chart %s: the file name must end in .svg or .png", f.chart)
	}
	if (set("intervals") && f.intervals <= 0) || (set("netperf") && f.netperf <= 0) {
		return usageError(errors.New("--intervals and --netperf take a record ID (a positive number): list them with --table fetches"))
	}
	if f.chart != "" && set("table") && f.table != report.TableWindowOffload {
		return usageErrorf("--chart draws the window-offload chart (Mbit/s by client window), not one of --table %s: "+
			"drop --table, or give --table window-offload to print the table it draws", f.table)
	}
	if f.chart != "" && (set("intervals") || set("netperf")) {
		return usageError(errors.New("--chart draws the window-offload chart of many fetches: use it without --intervals or --netperf"))
	}
	return nil
}

// openReportStore opens --store, else the config's store over the data
// folder, read-only. data is that folder ("" for --store: a shared
// database's journals are its servers').
func openReportStore(cmd *cobra.Command, f *reportFlags) (st *record.Store, data string, err error) {
	var loc record.Location
	if cmd.Flags().Changed("store") {
		if loc, err = record.ParseLocation(f.store, ""); err != nil {
			return nil, "", usageErrorf("--store: %w", err)
		}
	} else {
		data, err = dataFolder(cmd, f.config, f.data)
		if err != nil {
			return nil, "", err
		}
		if loc, err = storeLocation(cmd, f.config, "", data); err != nil {
			return nil, "", err
		}
	}
	st, err = record.OpenURLReadOnly(cmd.Context(), loc)
	return st, data, err
}

// recordTable is one record's --intervals or --netperf table.
func recordTable(ctx context.Context, st *record.Store, f *reportFlags, args reportArgs) (report.Table, error) {
	id := max(f.intervals, f.netperf)
	rec, err := st.Get(ctx, id)
	if err != nil {
		return report.Table{}, err
	}
	if args.set("netperf") {
		return report.Netperf(rec), nil
	}
	ivs, err := st.Intervals(ctx, id)
	if err != nil {
		return report.Table{}, err
	}
	return report.Intervals(rec, ivs), nil
}

// queryTable queries the records the filter picks and builds --table (or
// --compare's) from them, drawing --chart first; done is true when the
// chart was all that was asked for (or err is set).
func queryTable(ctx context.Context, st *record.Store, f *reportFlags, args reportArgs, data string, errOut io.Writer) (t report.Table, done bool, err error) {
	recs, err := st.Query(ctx, args.filter)
	if err != nil {
		return t, true, err
	}
	noteWaiting(ctx, st, data, errOut)
	if f.chart != "" {
		if err := writeChart(f.chart, recs, args.opt); err != nil {
			return t, true, err
		}
		fmt.Fprintf(errOut, "wrote %s\n", f.chart)
		if !args.set("table") {
			return t, true, nil
		}
	}
	if f.compare != "" {
		if t, err = report.CompareWith(f.compare, recs, args.opt); err != nil {
			return t, true, fmt.Errorf("--compare: %w", err)
		}
		return t, false, nil
	}
	t, _ = report.BuildWith(f.table, recs, args.opt)
	return t, false, nil
}

// noteWaiting says how many records a crash left in data's journal: they
// are not in the store until the next serve imports them, and a table
// never silently prints short. Without a data folder (--store names a
// shared database) there is nothing to check.
func noteWaiting(ctx context.Context, st *record.Store, data string, errOut io.Writer) {
	if data == "" {
		return
	}
	if n, path, err := st.Waiting(ctx, data); err != nil {
		fmt.Fprintf(errOut, "note: could not check %s for records not yet in the store: %v\n", path, err)
	} else if n > 0 {
		fmt.Fprintf(errOut, "note: %d fetch record(s) wait in %s and are not in these tables; "+
			"serve imports them (a running serve within seconds, else at its next start)\n", n, path)
	}
}

// dataFolder is --data when given, else the config's data folder; a file
// given as --data is refused with the folder to pass instead.
func dataFolder(cmd *cobra.Command, config, data string) (string, error) {
	if !cmd.Flags().Changed("data") {
		cfg, err := loadConfig(config)
		if err != nil {
			return "", err
		}
		data = cfg.Data
	}
	if st, err := os.Stat(data); err == nil && !st.IsDir() {
		return "", usageErrorf("--data %s is a file; pass the folder that holds it: --data %s "+
			"(the state folder serve writes, with pxeperf.db in it)", data, filepath.Dir(data))
	}
	return data, nil
}

// writeChart draws the window-offload chart as SVG or PNG by the file's
// extension, atomically (a reader never sees half a chart).
func writeChart(path string, recs []record.Record, o report.Options) error {
	c, err := report.WindowChartWith(recs, o)
	if err != nil {
		return fmt.Errorf("--chart: %w", err)
	}
	var b bytes.Buffer
	if strings.EqualFold(filepath.Ext(path), ".png") {
		err = c.PNG(&b)
	} else {
		err = c.SVG(&b)
	}
	if err != nil {
		return fmt.Errorf("--chart: drawing: %w", err)
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--chart: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--chart: %w", err)
	}
	return nil
}
