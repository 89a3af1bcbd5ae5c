package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "pxeperf",
		Short: "Network-boot server (DHCP, TFTP, HTTP boot) that measures every fetch",
		Long: `pxeperf boots lab boards over the network and measures every image they pull.

  pxeperf serve                 proxyDHCP + TFTP + HTTP from ./images (safe default)
  pxeperf serve --dhcp full --pool 192.168.50.100-192.168.50.200 --iface lab0
  pxeperf config check FILE     validate a config and print the effective one
  pxeperf images list           files served, with sizes and sha256
  pxeperf report --table window-offload   the measured fetches as tables`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newConfigCmd(), newVersionCmd(), newImagesCmd(), newReportCmd(), newBenchCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "pxeperf", versionString())
			return nil
		},
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		return v + " " + bi.GoVersion
	}
	return "(devel)"
}
