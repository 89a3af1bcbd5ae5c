package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pxeperf/pxeperf/hosts"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/httpboot"
	"github.com/pxeperf/pxeperf/images"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/spf13/cobra"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check and show configuration files",
	}
	var root string
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a config file, its templates and boot files; print the effective config",
		Long: `Validate a config file and print the effective configuration.

Every boot config template (templates.*, hosts[].templates.*, iPXE scripts)
is parsed; one that does not parse fails the check with its key, line and fix.
Every architecture's boot file is resolved against the root (--root, default
the config's root) and Debian's iPXE fallback: what nothing serves is listed
with the config key to set or the package to install.
Every file a host entry names (kernel, initrd, fdt, fdtdir, script "@file")
that the root lacks is listed with the host, the key and the root's nearest
name; URLs are not checked.

When <data>/hosts.json holds hosts set at run time (the admin API), they
are read and checked as serve reads them, and every host is listed with
where it comes from: config, api, or api-over-config (a run-time entry in
place of the file's).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := loadFile(args[0])
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("root") {
				c.Root = root
			}
			notes, err := checkBoot(c)
			if err != nil {
				return err
			}
			b, err := c.YAML()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "# %s is valid; effective configuration:\n%s", args[0], b)
			if len(c.Warnings) > 0 {
				fmt.Fprintf(out, "\n# old names, read as the new ones:\n")
				for _, w := range c.Warnings {
					fmt.Fprintf(out, "# WARNING %s\n", w)
				}
			}
			if len(notes) > 0 {
				fmt.Fprintf(out, "\n# boot files and configs (root %s):\n", c.Root)
				for _, n := range notes {
					fmt.Fprintf(out, "# %s\n", n)
				}
			}
			return printRuntimeHosts(out, c)
		},
	}
	check.Flags().StringVar(&root, "root", "", "folder to resolve boot files and @file templates in (default: the config's root)")
	_ = check.MarkFlagDirname("root")
	cmd.AddCommand(check, &cobra.Command{
		Use:   "default",
		Short: "Print the embedded default configuration (a starting point for your own)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(configs.DefaultYAML())
			return err
		},
	}, newConfigExampleCmd())
	return cmd
}

// checkBoot parses every boot config template against the root and
// resolves every architecture's boot file and every host entry's files. A
// template error is an error; missing boot and host files and root files
// that replace generated configs are notes.
func checkBoot(c *configs.Config) ([]string, error) {
	var notes []string
	root := c.Root
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		notes = append(notes, fmt.Sprintf("WARNING root %s is not a folder: boot files and @file templates are not checked (pass --root DIR)", root))
		root = ""
	}
	cache, err := os.MkdirTemp("", "pxeperf-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(cache)
	if root == "" {
		root = cache
	}
	store, err := images.Open(root, cache, nil)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	src, err := bootcfg.New(bootcfg.Options{Config: c, Images: store})
	if err != nil {
		return nil, usageErrorf("boot config templates:\n%w", err)
	}
	if err := httpboot.CheckScripts(c, store); err != nil {
		return nil, usageError(err)
	}
	if root == cache {
		return notes, nil
	}
	for _, r := range src.CheckBootFiles(c) {
		switch {
		case r.Missing() && mustBoot(c, r.Key):
			notes = append(notes, "WARNING "+r.Warning(c.Root))
		case r.Missing(): // an architecture most labs do not have: serve's INFO line names it
			notes = append(notes, "no boot file: "+r.Warning(c.Root))
		default:
			notes = append(notes, fmt.Sprintf("dhcp.boot_files.%s: %s (%s)", r.Key, r.File, r.From))
		}
	}
	for _, h := range src.CheckHostFiles(c) {
		notes = append(notes, "WARNING "+h.Problem(c.Root))
	}
	return append(notes, bootSummary(c, src)...), nil
}

// printRuntimeHosts lists, when <data>/hosts.json exists, every host with
// its source and next boot, merged as serve merges them; a file serve
// would refuse is an error here too.
func printRuntimeHosts(out io.Writer, c *configs.Config) error {
	path := filepath.Join(c.Data, hosts.FileName)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	st, err := hosts.Open(hosts.Options{Path: path, Config: c, ReadOnly: true})
	if err != nil {
		return usageError(err)
	}
	fmt.Fprintf(out, "\n# hosts, with those set at run time (%s):\n", path)
	for _, e := range st.List() {
		line := fmt.Sprintf("# %s %s: %s", e.MAC, e.Host.Name, e.Source)
		if eff := e.Effective(); eff.Kernel != "" {
			line += ", kernel " + eff.Kernel
		}
		if nb := e.NextBoot; nb != nil {
			line += fmt.Sprintf(", next boot %s %s", nb.Action, nb.Kernel)
			if nb.Once {
				line += " (once)"
			}
		}
		fmt.Fprintln(out, strings.TrimRight(line, " "))
	}
	return nil
}

func newConfigExampleCmd() *cobra.Command {
	names, _ := configs.ExampleNames()
	return &cobra.Command{
		Use:       "example NAME",
		Short:     "Print an example configuration: " + strings.Join(names, ", "),
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("name an example, e.g. pxeperf config example %s > pxeperf.yaml; the examples:\n%s",
					names[0], exampleList())
			}
			b, err := configs.Example(args[0])
			if err != nil {
				return usageErrorf("no example %q; the examples:\n%s", args[0], exampleList())
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

// exampleList is one "  NAME  what it is for" line per example.
func exampleList() string {
	names, about := configs.ExampleNames()
	var b strings.Builder
	for i, n := range names {
		fmt.Fprintf(&b, "  %-14s %s\n", n, about[i])
	}
	return strings.TrimRight(b.String(), "\n")
}
