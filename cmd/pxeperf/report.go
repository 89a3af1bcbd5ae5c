package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/spf13/cobra"
)

// reportFlags are the flags of `pxeperf report`.
type reportFlags struct {
	table, format, data, chart string
	compare                    string // a published study's key
	intervals, netperf         int64
	filter                     report.FilterArgs
}

func newReportCmd() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Tables of the measured fetches: by window and offload, direction and MTU, client, link speed",
		Long: `Print the measurements pxeperf serve recorded, as the tables labs publish.
It reads the store under --data, also while serve is running.

  pxeperf report                                   fetches per client
  pxeperf report --table window-offload            Mbit/s by client window x RX checksum offload
  pxeperf report --table direction-mtu             TCP/UDP Tx/Rx by MTU
  pxeperf report --table linkspeed                 by link speed (1G/100M/10M), both directions
  pxeperf report --table tftp                      TFTP by blksize x windowsize
  pxeperf report --table fetches --limit 20        the latest fetches, with their IDs
  pxeperf report --intervals 42                    one fetch, iperf3-style interval lines
  pxeperf report --netperf 42                      one fetch, netperf TCP_STREAM summary
  pxeperf report --table window-offload --label fw=gpxe-1.0.1 --since 2h --format markdown
  pxeperf report --chart window.svg                Mbit/s against window, one line per offload (.svg or .png)
  pxeperf report --compare gpxe-2010 --label bench_run=ID   a published study beside the measured run

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
	fl.StringVar(&f.filter.Limit, "limit", "", "only the newest N fetches")
	fl.StringVar(&f.format, "format", string(report.Text), "output format: text, markdown, csv or json")
	fl.StringVar(&f.data, "data", configs.Default().Data, "state folder holding the record store (as for serve)")
	fl.StringVar(&f.chart, "chart", "", "also draw Mbit/s against client window to FILE.svg or FILE.png")
	fl.StringVar(&f.compare, "compare", "", "print a published study beside the measured records: "+strings.Join(report.StudyKeys(), ", "))
	cmd.MarkFlagsMutuallyExclusive("table", "intervals", "netperf", "compare")
	_ = cmd.RegisterFlagCompletionFunc("compare", cobra.FixedCompletions(report.StudyKeys(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("table", cobra.FixedCompletions(report.TableNames, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "markdown", "csv", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("data")
	_ = cmd.MarkFlagFilename("chart", "svg", "png")
	return cmd
}

func runReport(cmd *cobra.Command, f *reportFlags) error {
	// Every argument is checked before the store is opened.
	format, err := report.ParseFormat(f.format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	filter, err := report.ParseFilter(f.filter, time.Now())
	if err != nil {
		return fmt.Errorf("bad filter (--client, --file, --since, --label, --limit): %w", err)
	}
	if _, err := report.Build(f.table, nil); err != nil {
		return fmt.Errorf("--table: %w", err)
	}
	ext := strings.ToLower(filepath.Ext(f.chart))
	if f.chart != "" && ext != ".svg" && ext != ".png" {
		return fmt.Errorf("--chart %s: the file name must end in .svg or .png", f.chart)
	}
	set := cmd.Flags().Changed
	if (set("intervals") && f.intervals <= 0) || (set("netperf") && f.netperf <= 0) {
		return errors.New("--intervals and --netperf take a record ID (a positive number): list them with --table fetches")
	}
	if f.chart != "" && (set("intervals") || set("netperf")) {
		return errors.New("--chart draws the window-offload chart of many fetches: use it without --intervals or --netperf")
	}

	st, err := record.OpenReadOnly(f.data)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := cmd.Context()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()

	var t report.Table
	switch {
	case set("intervals") || set("netperf"):
		id := max(f.intervals, f.netperf)
		rec, err := st.Get(ctx, id)
		if err != nil {
			return err
		}
		if set("netperf") {
			t = report.Netperf(rec)
		} else {
			ivs, err := st.Intervals(ctx, id)
			if err != nil {
				return err
			}
			t = report.Intervals(rec, ivs)
		}
	default:
		recs, err := st.Query(ctx, filter)
		if err != nil {
			return err
		}
		if f.chart != "" {
			if err := writeChart(f.chart, recs); err != nil {
				return err
			}
			fmt.Fprintf(errOut, "wrote %s\n", f.chart)
			if !set("table") {
				return nil
			}
		}
		if f.compare != "" {
			if t, err = report.Compare(f.compare, recs); err != nil {
				return fmt.Errorf("--compare: %w", err)
			}
			break
		}
		t, _ = report.Build(f.table, recs)
	}
	if len(t.Rows) == 0 && t.Layout == "" && (format == report.CSV || format == report.JSON) {
		fmt.Fprintln(errOut, t.Empty)
	}
	return report.Render(out, t, format)
}

// writeChart draws the window-offload chart as SVG or PNG by the file's
// extension, atomically (a reader never sees half a chart).
func writeChart(path string, recs []record.Record) error {
	c, err := report.WindowChart(recs)
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
