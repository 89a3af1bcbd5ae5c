package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

// exitStatusText is the exit status line of every command's help.
const exitStatusText = "Exit status: 0 done, 1 the work failed, 2 the command line or config is wrong."

// helpWidth is the widest line help text may have; flag descriptions are
// wrapped to it.
const helpWidth = 100

// run runs pxeperf with args and returns the process exit code (see
// exitError): main only passes it to os.Exit.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "pxeperf:", err)
	return exitCode(err)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "pxeperf",
		Short: "Network-boot server (DHCP, TFTP, HTTP boot) that measures every fetch",
		Long: `pxeperf boots lab boards over the network and measures every image they pull.

  pxeperf serve                 TFTP + HTTP from ./images; no DHCP until an interface is named
  pxeperf serve --iface lab0    proxyDHCP on lab0 too (beside the lab's DHCP server)
  pxeperf serve --dhcp full --pool 192.168.50.100-192.168.50.200 --iface lab0
  pxeperf config check FILE     validate a config and print the effective one
  pxeperf images list           files served, with sizes and sha256
  pxeperf report --table window-offload   the measured fetches as tables

serve, images, report and bench read ` + configSearchText + `
(the first that exists) unless --config names a file.

` + exitStatusText + `

  2 the command line or config is wrong (an unknown flag, a bad value, a
    YAML typo, a setting that does not validate): fix it; restarting cannot
    (the systemd unit's RestartPreventExitStatus=2)
  1 the work failed (a busy port, a missing interface or privilege, a
    server that does not answer): it may work later`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("pxeperf {{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.SetUsageFunc(usage)
	root.AddCommand(newServeCmd(), newConfigCmd(), newVersionCmd(), newImagesCmd(), newReportCmd(), newBenchCmd(),
		newHealthcheckCmd(), newStoreCmd(), newStatusCmd(), newLeasesCmd(), newHostsCmd())
	// cobra adds completion and help when it runs; added now, they get
	// usageArgs's checks too (completion bash x: status 2, not 1).
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	usageArgs(root)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version (also pxeperf --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "pxeperf", versionString())
			return nil
		},
	}
}

func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(version, bi)
}

// versionFrom is the version line from what the build stamped: v (set
// with -ldflags "-X main.version=..."), else the module's version (a tag,
// or Go's pseudo-version of the commit, "+dirty" when the tree had
// changes); then the commit (vcs.revision), "modified" (vcs.modified: the
// tree had uncommitted changes) and its time, and the Go version. go build
// and go install in a git checkout stamp these (unless -buildvcs=false);
// "(devel)" stands only where nothing at all is known.
func versionFrom(v string, bi *debug.BuildInfo) string {
	if bi == nil {
		if v == "" {
			return "(devel)"
		}
		return v
	}
	if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var vcs []string
	if rev != "" {
		vcs = append(vcs, "commit "+rev[:min(12, len(rev))])
	}
	if modified {
		vcs = append(vcs, "modified")
	}
	if at != "" {
		vcs = append(vcs, at)
	}
	var b strings.Builder
	switch {
	case v != "":
		b.WriteString(v)
	case len(vcs) == 0:
		b.WriteString("(devel)")
	}
	if len(vcs) > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("(" + strings.Join(vcs, ", ") + ")")
	}
	if bi.GoVersion != "" {
		b.WriteString(" " + bi.GoVersion)
	}
	return b.String()
}

// usage is cobra's usage text with flag descriptions wrapped to helpWidth.
func usage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:")
	if c.Runnable() {
		fmt.Fprintf(&b, "\n  %s", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\n  %s [command]", c.CommandPath())
	}
	if c.HasExample() {
		fmt.Fprintf(&b, "\n\nExamples:\n%s", c.Example)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\n\nAvailable Commands:")
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() || s.Name() == "help" {
				fmt.Fprintf(&b, "\n  %-*s %s", s.NamePadding(), s.Name(), s.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(&b, "\n\nFlags:\n%s", strings.TrimRight(c.LocalFlags().FlagUsagesWrapped(helpWidth), " \n"))
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(&b, "\n\nGlobal Flags:\n%s", strings.TrimRight(c.InheritedFlags().FlagUsagesWrapped(helpWidth), " \n"))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\n\nUse \"%s [command] --help\" for more information about a command.", c.CommandPath())
	}
	if c.HasParent() {
		b.WriteString("\n\n" + exitStatusText)
	}
	b.WriteString("\n")
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}
