package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/spf13/cobra"
)

// configSearch is where serve, images, report and bench look for a config
// file when --config is not given, in order; without one they run on the
// embedded default. So the quick start's `images generate` writes into the
// root that `serve` serves, and `report` reads serve's data folder.
var configSearch = []string{"pxeperf.yaml", "/etc/pxeperf/pxeperf.yaml"}

const configSearchText = "./pxeperf.yaml, then /etc/pxeperf/pxeperf.yaml,"

// addConfigFlag adds --config to a command that reads the config.
func addConfigFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "config", "", "config file (YAML); default: ./pxeperf.yaml, then "+
		"/etc/pxeperf/pxeperf.yaml, else the embedded default")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
}

// loadConfig is findConfig, its warnings (old key names) written to
// stderr.
func loadConfig(path string) (*configs.Config, error) {
	c, err := findConfig(path)
	if c != nil {
		for _, w := range c.Warnings {
			fmt.Fprintln(os.Stderr, "pxeperf: warning: "+w)
		}
	}
	return c, err
}

// findConfig reads path, or when path is "" the first file of configSearch
// that exists, or else the embedded default (File ""). A file that exists
// but does not load is an error, never silently skipped.
func findConfig(path string) (*configs.Config, error) {
	if path != "" {
		return loadFile(path)
	}
	for _, p := range configSearch {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("config %s: %w (fix its permissions, or pass --config FILE)", p, err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("config %s is a folder; remove it or pass --config FILE", p)
		}
		return loadFile(p)
	}
	return configs.Default(), nil
}

// loadFile is configs.Load with its errors sorted for the exit status: a
// file that does not exist or does not parse or validate is a wrong
// command line or config (2: a restart cannot fix it); a file that exists
// but cannot be read is a failure (1).
func loadFile(path string) (*configs.Config, error) {
	c, err := configs.Load(path)
	return c, configError(err)
}

// configError marks err as a usage error (exit status 2) when it is about
// the config itself: a missing file, YAML that does not parse, a key or
// value that is wrong (configs.Error, configs.Errors).
func configError(err error) error {
	var ce *configs.Error
	var ces configs.Errors
	if err != nil && (errors.As(err, &ce) || errors.As(err, &ces) || errors.Is(err, fs.ErrNotExist)) {
		return usageError(err)
	}
	return err
}

// configName names where the settings came from, for messages.
func configName(c *configs.Config) string {
	if c.File == "" {
		return "the embedded default"
	}
	return c.File
}
