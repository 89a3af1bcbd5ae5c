package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pxeperf/pxeperf/admin"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/dashboard"
	"github.com/pxeperf/pxeperf/dhcp"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
)

// adminFlags locate a running serve's admin listener.
type adminFlags struct {
	config, addr, tokenFile, format string
}

func addAdminFlags(cmd *cobra.Command, f *adminFlags) {
	addConfigFlag(cmd, &f.config)
	cmd.Flags().StringVar(&f.addr, "admin-addr", "", "serve's admin listener HOST:PORT (default: admin.listen of the config)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the admin token (default: admin.token_file of the config)")
	cmd.Flags().StringVar(&f.format, "format", "text", "text or json")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// adminClient reads a running serve's admin API (admin.Client), its
// unreachable errors saying what to check.
type adminClient struct{ *admin.Client }

func newAdminClient(f *adminFlags) (*adminClient, *configs.Config, error) {
	if f.format != "text" && f.format != "json" {
		return nil, nil, usageErrorf("--format %q: use text or json", f.format)
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return nil, nil, err
	}
	addr, tf := cfg.Admin.Listen, cfg.Admin.TokenFile
	if f.addr != "" {
		if _, _, err := net.SplitHostPort(f.addr); err != nil && f.addr != configs.AdminOff {
			return nil, nil, usageErrorf("--admin-addr %q: want HOST:PORT, e.g. --admin-addr 127.0.0.1:9069", f.addr)
		}
		addr = f.addr
	}
	if f.tokenFile != "" {
		tf = f.tokenFile
	}
	if addr == configs.AdminOff {
		return nil, cfg, errors.New("the admin listener is off (admin.listen: off): set --admin-addr")
	}
	tok, err := readToken(tf)
	if err != nil {
		return nil, cfg, err
	}
	return &adminClient{admin.NewClient(addr, tok)}, cfg, nil
}

// get is admin.Client.Get, an unreachable listener's error with a hint.
func (c *adminClient) get(ctx context.Context, path string, v any) error {
	err := c.Get(ctx, path, v)
	var ue *admin.UnreachableError
	if errors.As(err, &ue) {
		return fmt.Errorf("%w (is pxeperf serve running? set --admin-addr)", err)
	}
	return err
}

// statusView is what `pxeperf status` shows.
type statusView struct {
	Health map[string]any       `json:"health"`
	Active []dashboard.Transfer `json:"transfers"`
	Recent []dashboard.Fetch    `json:"recent"`
	Leases []dashboard.Lease    `json:"leases"`
	// TFTP is the TFTP server's counters as the dashboard shows them
	// (/api/active); nil when serve runs no TFTP server.
	TFTP *dashboard.TFTPCounters `json:"tftp,omitempty"`
}

func newStatusCmd() *cobra.Command {
	var f adminFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what a running serve is doing: transfers, latest fetches, leases, TFTP counters",
		Long: `Ask a running pxeperf serve, through its admin listener, what it is doing:
transfers in progress with the bytes the board acknowledged so far and
its live Mbit/s (over the last 3 s, or its bursts), the latest
fetches, the leases in use, and the TFTP server's counters (requests,
transfer threads, drops, replaced transfers, refusals by reason), as the
dashboard shows them. --format json prints the same as one object.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := newAdminClient(&f)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var v statusView
			var active struct {
				Transfers []dashboard.Transfer    `json:"transfers"`
				TFTP      *dashboard.TFTPCounters `json:"tftp"`
			}
			var recent struct {
				Fetches []dashboard.Fetch `json:"fetches"`
			}
			var leases struct {
				Leases []dashboard.Lease `json:"leases"`
			}
			for _, q := range []struct {
				path string
				v    any
			}{{"/healthz", &v.Health}, {"/api/active", &active}, {"/api/recent", &recent}, {"/api/leases", &leases}} {
				if err := c.get(ctx, q.path, q.v); err != nil {
					return err
				}
			}
			v.Active, v.Recent, v.Leases, v.TFTP = active.Transfers, recent.Fetches, leases.Leases, active.TFTP
			if len(v.Recent) > 10 {
				v.Recent = v.Recent[:10]
			}
			out := cmd.OutOrStdout()
			if f.format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			return printStatus(out, v)
		},
	}
	addAdminFlags(cmd, &f)
	return cmd
}

func printStatus(w io.Writer, v statusView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if up, ok := v.Health["uptime_s"].(float64); ok {
		fmt.Fprintf(tw, "serving for %s\n", time.Duration(up*float64(time.Second)).Round(time.Second))
	}
	printHealth(tw, v.Health)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "In progress (%d)\n", len(v.Active))
	if len(v.Active) > 0 {
		fmt.Fprintln(tw, "PROTO\tCLIENT\tHOST\tFILE\tBYTES\tSIZE\tMBIT/S")
		for _, t := range v.Active {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.1f\n", safe(t.Proto), safe(or(t.ClientMAC, t.ClientIP)), safe(dashIfEmpty(t.Host)), safe(t.File), t.Bytes, t.Size, t.Mbps)
		}
	}
	fmt.Fprintf(tw, "\nLatest fetches\n")
	if len(v.Recent) > 0 {
		fmt.Fprintln(tw, "TIME\tPROTO\tCLIENT\tFILE\tBYTES\tMBIT/S\tOUTCOME")
		for _, r := range v.Recent {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%s\n", r.Time.Local().Format("15:04:05"), safe(r.Proto), safe(or(r.ClientMAC, r.ClientIP)), safe(r.File), r.Bytes, r.Mbps, safe(r.Outcome))
		}
	}
	fmt.Fprintf(tw, "\nLeases (%d)\n", len(v.Leases))
	if err := printLeases(tw, v.Leases); err != nil {
		return err
	}
	if c := v.TFTP; c != nil {
		fmt.Fprintln(tw, "\nTFTP")
		fmt.Fprintf(tw, "requests\t%d\n", c.Requests)
		fmt.Fprintf(tw, "transfer threads\t%d of %d busy\n", c.ThreadsBusy, c.ThreadsCap)
		fmt.Fprintf(tw, "transfers\t%d on threads (%d datagrams read there; %d rode their client's CPU), %d in the poller\n",
			c.Threaded, c.ThreadRecvs, c.Pinned, c.Polled)
		fmt.Fprintf(tw, "dropped\t%d malformed, %d repeated requests, %d stray, %d errors unsent\n", c.Malformed, c.Repeated, c.Stray, c.Unsent)
		fmt.Fprintf(tw, "replaced transfers\t%d\n", c.Replaced)
		fmt.Fprintf(tw, "passed on (single-port)\t%d\n", c.PassedOn)
		fmt.Fprintf(tw, "refused\t%d\n", c.Refused)
		for _, reason := range slices.Sorted(maps.Keys(c.RefusedBy)) {
			fmt.Fprintf(tw, "  %s\t%d\n", safe(reason), c.RefusedBy[reason])
		}
	}
	if ref, ok := v.Health["refused"].(map[string]any); ok && len(ref) > 0 {
		keys := make([]string, 0, len(ref))
		for k := range ref {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintln(tw, "\nRefused (admin)")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%v\n", safe(k), ref[k])
		}
	}
	return tw.Flush()
}

// printHealth says whether serve is healthy, naming each problem, and
// what the record store holds: lag, journal against its cap, drops.
func printHealth(tw io.Writer, h map[string]any) {
	status, _ := h["status"].(string)
	if status == "" {
		return
	}
	if status != "ok" {
		status = strings.ToUpper(status)
	}
	fmt.Fprintf(tw, "health: %s\n", status)
	if ps, ok := h["problems"].([]any); ok {
		for _, p := range ps {
			fmt.Fprintf(tw, "  - %s\n", safe(fmt.Sprint(p)))
		}
	}
	r, ok := h["records"].(map[string]any)
	if !ok {
		return
	}
	num := func(k string) float64 { f, _ := r[k].(float64); return f }
	fmt.Fprintf(tw, "records: store %v, %.0f waiting in memory (%.1fs behind), %.0f in the journal only; journal %.1f of %.0f MiB; %.0f dropped",
		r["store"], num("pending"), num("lag_s"), num("journal_backlog"), num("journal_bytes")/(1<<20), num("journal_max_bytes")/(1<<20), num("dropped"))
	if by, ok := r["dropped_by"].(map[string]any); ok && len(by) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(by)) {
			parts = append(parts, fmt.Sprintf("%v %s", by[k], k))
		}
		fmt.Fprintf(tw, " (%s)", strings.Join(parts, ", "))
	}
	if free, ok := r["data_free_bytes"].(float64); ok && free >= 0 {
		fmt.Fprintf(tw, "; data folder %.0f MiB free", free/(1<<20))
	}
	if full, _ := r["disk_full"].(bool); full {
		fmt.Fprint(tw, "; DISK FULL")
	}
	fmt.Fprintln(tw)
}

func printLeases(tw *tabwriter.Writer, ls []dashboard.Lease) error {
	if len(ls) == 0 {
		return nil
	}
	fmt.Fprintln(tw, "MAC\tADDRESS\tHOST\tBOOT FILE\tEXPIRY")
	for _, l := range ls {
		exp := "-"
		if !l.Expiry.IsZero() {
			exp = l.Expiry.Local().Format(time.DateTime)
		}
		addr := l.Addr
		if l.Proxy {
			addr = "(proxy)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", safe(l.MAC), safe(dashIfEmpty(addr)), safe(dashIfEmpty(l.Host)), safe(dashIfEmpty(l.BootFile)), exp)
	}
	return nil
}

// safe escapes what a terminal would act on (report.Printable): file
// and host names come from the network, and tabs would break the columns.
func safe(s string) string { return report.Printable(s) }

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func dashIfEmpty(s string) string { return or(s, "-") }

func newLeasesCmd() *cobra.Command {
	var f adminFlags
	var offline bool
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "List the DHCP leases in use (from a running serve, else from the record store)",
		Long: `List the leases in use: from a running serve's admin listener (/api/leases),
or, when none answers or with --offline, from the leases recorded in the
data folder's record store (the latest lease per MAC that has not expired;
proxy-mode answers of the last day).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := newAdminClient(&f)
			var ls []dashboard.Lease
			source := ""
			if err == nil && !offline {
				var v struct {
					Leases []dashboard.Lease `json:"leases"`
				}
				if err = c.get(cmd.Context(), "/api/leases", &v); err == nil {
					ls, source = v.Leases, "serve"
				}
			}
			if source == "" {
				if cfg == nil {
					return err
				}
				ls, err = storedLeases(cmd.Context(), cfg, time.Now())
				if err != nil {
					return err
				}
				source = "store"
			}
			out := cmd.OutOrStdout()
			if f.format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"source": source, "leases": ls})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			if len(ls) == 0 {
				fmt.Fprintln(tw, "no leases in use")
			}
			if err := printLeases(tw, ls); err != nil {
				return err
			}
			return tw.Flush()
		},
	}
	addAdminFlags(cmd, &f)
	cmd.Flags().BoolVar(&offline, "offline", false, "read the record store even when serve is running")
	return cmd
}

// storedLeases is the latest recorded lease of each MAC that is still in
// force at now (dhcp.InForce).
func storedLeases(ctx context.Context, cfg *configs.Config, now time.Time) ([]dashboard.Lease, error) {
	st, err := record.OpenReadOnly(cfg.Data)
	if err != nil {
		return nil, fmt.Errorf("no running serve answered and the record store cannot be read: %w", err)
	}
	defer st.Close()
	all, err := st.Leases(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	latest := map[string]record.Lease{}
	for _, l := range all { // oldest first
		latest[l.MAC] = l
	}
	var out []dashboard.Lease
	for _, l := range latest {
		if !dhcp.InForce(l.Proxy, l.Time, l.Expiry, now) {
			continue
		}
		out = append(out, dashboard.Lease{MAC: l.MAC, Addr: l.Addr, Arch: l.Arch, Host: l.Host, BootFile: l.BootFile,
			Time: l.Time, Expiry: l.Expiry, Proxy: l.Proxy})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr+out[i].MAC < out[j].Addr+out[j].MAC })
	return out, nil
}
