package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// hostEntry is one entry of GET /api/hosts: the host (the YAML entry's
// shape, kept as the API sent it so a read-modify-write keeps every
// field), where it comes from, its etag and its next boot.
type hostEntry struct {
	MAC      string         `json:"mac"`
	Source   string         `json:"source"`
	ETag     string         `json:"etag"`
	Host     map[string]any `json:"host"`
	NextBoot *nextBoot      `json:"next_boot"`
	Updated  time.Time      `json:"updated"`
}

// nextBoot is what a board boots next (hosts.NextBoot's JSON).
type nextBoot struct {
	Action  string    `json:"action"`
	Kernel  string    `json:"kernel,omitempty"`
	Initrd  string    `json:"initrd,omitempty"`
	Cmdline string    `json:"cmdline,omitempty"`
	FDT     string    `json:"fdt,omitempty"`
	Script  string    `json:"script,omitempty"`
	Once    bool      `json:"once,omitempty"`
	Set     time.Time `json:"set,omitzero"`
}

// String is the next boot in a table cell: "boot vmlinuz (once)".
func (nb *nextBoot) String() string {
	if nb == nil {
		return "-"
	}
	s := nb.Action
	switch {
	case nb.Kernel != "":
		s += " " + nb.Kernel
	case nb.Script != "":
		s += " script"
	}
	if nb.Once {
		s += " (once)"
	}
	return s
}

// hostString is a host field as text ("" when absent).
func hostString(h map[string]any, key string) string {
	switch v := h[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func newHostsListCmd(f *hostsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the host entries: MAC, name, where each comes from, next boot, kernel",
		Args:  cobra.NoArgs,
		RunE: hostsRun(f, func(ctx context.Context, c *hostsAPI, _ string) error {
			var v struct {
				Hosts []hostEntry `json:"hosts"`
			}
			if printed, err := c.read(ctx, "/api/hosts", &v); printed || err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MAC\tNAME\tSOURCE\tNEXT BOOT\tKERNEL")
			for _, e := range v.Hosts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.MAC, orDash(hostString(e.Host, "name")), e.Source, e.NextBoot,
					orDash(hostString(e.Host, "kernel")))
			}
			return tw.Flush()
		}),
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newHostsShowCmd(f *hostsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show MAC",
		Short: "Show one host entry, where it comes from and its next boot",
		Args:  cobra.ExactArgs(1),
		RunE: hostsRun(f, func(ctx context.Context, c *hostsAPI, mac string) error {
			var e hostEntry
			if printed, err := c.read(ctx, hostPath(mac), &e); printed || err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "mac:\t%s\nsource:\t%s\n", e.MAC, e.Source)
			keys := make([]string, 0, len(e.Host))
			for k := range e.Host {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if v := hostString(e.Host, k); k != "mac" && v != "" && v != "{}" && v != "[]" {
					fmt.Fprintf(tw, "%s:\t%s\n", k, v)
				}
			}
			fmt.Fprintf(tw, "next boot:\t%s\n", nextBootLine(e.NextBoot))
			if !e.Updated.IsZero() {
				fmt.Fprintf(tw, "updated:\t%s\n", e.Updated.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		}),
	}
}

// nextBootLine is a next boot in full: "boot kernel=vmlinuz initrd=... once".
func nextBootLine(nb *nextBoot) string {
	if nb == nil {
		return "none (the host's own)"
	}
	parts := []string{nb.Action}
	for _, kv := range [][2]string{{"kernel", nb.Kernel}, {"initrd", nb.Initrd}, {"cmdline", nb.Cmdline},
		{"fdt", nb.FDT}, {"script", nb.Script}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if nb.Once {
		parts = append(parts, "once")
	}
	return strings.Join(parts, " ")
}

func newHostsRmCmd(f *hostsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm MAC",
		Short: "Remove a run-time host entry and its next boot (a config entry is in force again)",
		Args:  cobra.ExactArgs(1),
		RunE: hostsRun(f, func(ctx context.Context, c *hostsAPI, mac string) error {
			if _, _, err := c.do(ctx, http.MethodDelete, hostPath(mac), nil, nil); err != nil {
				return err
			}
			if c.json {
				return c.printJSON([]byte(fmt.Sprintf(`{"mac":%q,"removed":true}`, mac)))
			}
			fmt.Fprintf(c.out, "removed the run-time entry of %s\n", mac)
			return nil
		}),
	}
}

// setFlags are `hosts set`'s changes; a flag not given keeps the field.
type setFlags struct {
	fields       map[string]*string // name, address, kernel, ... -> value
	labels, dhcp []string
	changed      func(name string) bool
	putAttempts  int
}

// setFields are the host keys `hosts set` takes as --KEY VALUE flags.
var setFields = []struct{ flag, key, help string }{
	{"name", "name", "host name (DHCP option 12, records)"},
	{"address", "address", "fixed IPv4 address (full mode)"},
	{"kernel", "kernel", "kernel, a file in the root or a URL"},
	{"initrd", "initrd", "initrd, a file in the root or a URL"},
	{"cmdline", "cmdline", "kernel command line"},
	{"fdt", "fdt", "device tree, a file in the root"},
	{"default-boot", "default_boot", "what the host boots without a kernel: local (its disk) or shell"},
}

func newHostsSetCmd(f *hostsFlags) *cobra.Command {
	sf := &setFlags{fields: map[string]*string{}, putAttempts: 5}
	cmd := &cobra.Command{
		Use:   "set MAC [--name N --kernel K --label k=v --dhcp-option NAME=VALUE ...]",
		Short: "Create or change a host entry at run time; fields not named are kept",
		Long: `Create or change a host entry at run time: the entry is read (with its
ETag), the flags given are merged into it (fields not named are kept; an
empty value, --kernel "" or --label k=, removes the field or label) and it
is written back with If-Match, so a concurrent change is never overwritten:
on 412 (another writer was first) it is read and merged again, up to 5
times. An entry from the config becomes a run-time entry over it.`,
		Args: cobra.ExactArgs(1),
	}
	for _, fl := range setFields {
		sf.fields[fl.key] = cmd.Flags().String(fl.flag, "", fl.help)
	}
	cmd.Flags().StringArrayVar(&sf.labels, "label", nil, "label k=v (repeatable; k= removes k)")
	cmd.Flags().StringArrayVar(&sf.dhcp, "dhcp-option", nil, "DHCP option NAME=VALUE, e.g. root_path=10.0.0.1:/nfs (repeatable; NAME= removes it)")
	sf.changed = func(name string) bool { return cmd.Flags().Changed(name) }
	cmd.RunE = hostsRun(f, func(ctx context.Context, c *hostsAPI, mac string) error { return sf.run(ctx, c, mac) })
	return cmd
}

// run is the read-modify-write of `hosts set`, retried on 412.
func (sf *setFlags) run(ctx context.Context, c *hostsAPI, mac string) error {
	for attempt := 1; ; attempt++ {
		var e hostEntry
		hdr := http.Header{}
		err := c.getJSON(ctx, hostPath(mac), &e)
		switch {
		case statusOf(err) == http.StatusNotFound:
			e.Host = map[string]any{}
			hdr.Set("If-None-Match", "*")
		case err != nil:
			return err
		default:
			hdr.Set("If-Match", e.ETag)
		}
		if e.Host == nil {
			e.Host = map[string]any{}
		}
		if err := sf.merge(e.Host); err != nil {
			return err
		}
		e.Host["mac"] = mac
		b, _, err := c.do(ctx, http.MethodPut, hostPath(mac), hdr, e.Host)
		if statusOf(err) == http.StatusPreconditionFailed && attempt < sf.putAttempts {
			continue
		}
		if statusOf(err) == http.StatusPreconditionFailed {
			return fmt.Errorf("hosts set %s: another writer changed the entry each of %d times it was read (HTTP 412); run it again", mac, attempt)
		}
		if err != nil {
			return err
		}
		return printEntry(c, b, "set")
	}
}

// merge puts the flags given into host (the API entry's JSON).
func (sf *setFlags) merge(host map[string]any) error {
	if a := *sf.fields["address"]; sf.changed("address") && a != "" {
		if ip, err := netip.ParseAddr(a); err != nil || !ip.Is4() {
			return usageErrorf("--address %q: want an IPv4 address, e.g. --address 192.168.50.17", a)
		}
	}
	for _, fl := range setFields {
		if !sf.changed(fl.flag) {
			continue
		}
		if v := *sf.fields[fl.key]; v == "" {
			delete(host, fl.key)
		} else {
			host[fl.key] = v
		}
	}
	if err := mergePairs(host, "labels", "--label", sf.labels); err != nil {
		return err
	}
	return mergePairs(host, "dhcp_options", "--dhcp-option", sf.dhcp)
}

// mergePairs merges K=V flags into the object host[key] ("K=" removes K).
func mergePairs(host map[string]any, key, flag string, pairs []string) error {
	if len(pairs) == 0 {
		return nil
	}
	m, ok := host[key].(map[string]any)
	if host[key] != nil && !ok {
		return fmt.Errorf("%s: the entry's %s is not an object of NAME: VALUE; set it with PUT /api/hosts/MAC", flag, key)
	}
	if m == nil {
		m = map[string]any{}
	}
	for _, p := range pairs {
		k, v, found := strings.Cut(p, "=")
		if !found || k == "" {
			return usageErrorf("%s %q: want NAME=VALUE, e.g. %s rack=3 (NAME= removes it)", flag, p, flag)
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	if len(m) == 0 {
		delete(host, key)
	} else {
		host[key] = m
	}
	return nil
}

// printEntry prints an Entry the API answered: JSON, or a line.
func printEntry(c *hostsAPI, b []byte, what string) error {
	if c.json {
		return c.printJSON(b)
	}
	var e hostEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return fmt.Errorf("the API's answer is not an entry: %w", err)
	}
	fmt.Fprintf(c.out, "%s %s (%s, %s): next boot %s\n", what, e.MAC, orDash(hostString(e.Host, "name")), e.Source,
		nextBootLine(e.NextBoot))
	return nil
}

// nextBootFlags are `hosts next-boot`'s.
type nextBootFlags struct {
	nb                  nextBoot
	local, shell, clear bool
}

func newHostsNextBootCmd(f *hostsFlags) *cobra.Command {
	nf := &nextBootFlags{}
	cmd := &cobra.Command{
		Use:   "next-boot MAC --kernel K --initrd I --cmdline C [--once] | --local",
		Short: "Say what a board boots next: a kernel, its local disk, the loader's shell",
		Long: `Say what a board boots next: a kernel with its initrd, command line and
device tree (or an iPXE script), its local disk (--local: iPXE exit or
sanboot, U-Boot's bootcmd, pxelinux localboot, GRUB exit), or the loader's
shell (--shell). With --once it is cleared once the board has fetched what
it was told to boot (for a kernel: the kernel's fetch ended ok), and the
host's own boot is in force again. --clear removes it now. The host needs
an entry: pxeperf hosts set MAC first.`,
		Args: cobra.ExactArgs(1),
	}
	fl := cmd.Flags()
	fl.StringVar(&nf.nb.Kernel, "kernel", "", "kernel, a file in the root or a URL")
	fl.StringVar(&nf.nb.Initrd, "initrd", "", "initrd")
	fl.StringVar(&nf.nb.Cmdline, "cmdline", "", "kernel command line")
	fl.StringVar(&nf.nb.FDT, "fdt", "", "device tree")
	fl.StringVar(&nf.nb.Script, "script", "", "an iPXE script template (as hosts[].script) instead of a kernel")
	fl.BoolVar(&nf.nb.Once, "once", false, "clear it once the board has fetched what it was told to boot")
	fl.BoolVar(&nf.local, "local", false, "boot the local disk")
	fl.BoolVar(&nf.shell, "shell", false, "stop at the loader's shell")
	fl.BoolVar(&nf.clear, "clear", false, "remove the next boot")
	cmd.RunE = hostsRun(f, func(ctx context.Context, c *hostsAPI, mac string) error {
		body, err := nf.body()
		if err != nil {
			return err
		}
		path := hostPath(mac, "/next-boot")
		if body == nil {
			if _, _, err := c.do(ctx, http.MethodDelete, path, nil, nil); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintf(c.out, "cleared the next boot of %s\n", mac)
				return nil
			}
			return c.printJSON([]byte(fmt.Sprintf(`{"mac":%q,"next_boot":null}`, mac)))
		}
		b, _, err := c.do(ctx, http.MethodPut, path, nil, body)
		if err != nil {
			return err
		}
		return printEntry(c, b, "next boot set for")
	})
	return cmd
}

// body is the next boot to PUT, nil for --clear; a usage error when the
// flags do not say one thing to boot.
func (nf *nextBootFlags) body() (*nextBoot, error) {
	nb := nf.nb
	boots := nb.Kernel != "" || nb.Script != ""
	n := 0
	for _, b := range []bool{boots, nf.local, nf.shell, nf.clear} {
		if b {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, usageErrorf("say what to boot next: --kernel K [--initrd I --cmdline C] [--once], --script S, --local, --shell, or --clear")
	case n > 1:
		return nil, usageErrorf("give one of --kernel/--script, --local, --shell, --clear")
	case !boots && (nb.Initrd != "" || nb.Cmdline != "" || nb.FDT != ""):
		return nil, usageErrorf("--initrd, --cmdline and --fdt go with --kernel")
	case nf.clear:
		if nb.Once {
			return nil, usageErrorf("--once goes with what to boot, not --clear")
		}
		return nil, nil
	case nf.local:
		nb.Action = "local"
	case nf.shell:
		nb.Action = "shell"
	default:
		nb.Action = "boot"
	}
	return &nb, nil
}
