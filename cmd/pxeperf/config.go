package main

import (
	"fmt"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/spf13/cobra"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check and show configuration files",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Validate a config file and print the effective configuration",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := configs.Load(args[0])
			if err != nil {
				return err
			}
			b, err := c.YAML()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "# %s is valid; effective configuration:\n%s", args[0], b)
			return nil
		},
	}, &cobra.Command{
		Use:   "default",
		Short: "Print the embedded default configuration (a starting point for your own)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(configs.DefaultYAML())
			return err
		},
	}, &cobra.Command{
		Use:       "example NAME",
		Short:     "Print an example configuration: lab-proxy or isolated-full",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"lab-proxy", "isolated-full"},
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := configs.Example(args[0])
			if err != nil {
				return fmt.Errorf("no example %q; use lab-proxy or isolated-full", args[0])
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	})
	return cmd
}
