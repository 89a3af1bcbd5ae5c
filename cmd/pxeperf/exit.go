package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes: 0 done, 1 the work failed (a port is busy, a file is
// unreadable, an interface or a privilege is missing: it may work later),
// 2 the command line or config is wrong (an unknown flag or command, a
// bad value, a missing argument, a YAML typo, a setting that does not
// validate): fix it and run it again; restarting cannot help, so the
// systemd unit has RestartPreventExitStatus=2.
const (
	exitRuntime = 1
	exitUsage   = 2
)

// exitError carries the process exit code with an error (caddy's
// cmd.exitError): commands return it, only main calls os.Exit.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a mistake on the command line (exit code 2).
func usageError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitUsage, err: err}
}

// usageErrorf is usageError(fmt.Errorf(...)).
func usageErrorf(format string, a ...any) error {
	return usageError(fmt.Errorf(format, a...))
}

// exitCode is the process exit code for err: its exitError's, else 1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitRuntime
}

// flagError rewrites pflag's parse errors into what to type instead (no
// strconv wording) and marks them as usage errors.
func flagError(_ *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		f := iv.GetFlag()
		return usageErrorf("--%s %q: %s", f.Name, iv.GetValue(), wantFor(f))
	}
	return usageError(err)
}

// wantFor says what a flag takes, from its type.
func wantFor(f *pflag.Flag) string {
	switch t := f.Value.Type(); {
	case strings.HasPrefix(t, "uint"):
		return fmt.Sprintf("want a whole number 0 or more, e.g. --%s 3", f.Name)
	case strings.HasPrefix(t, "int"):
		return fmt.Sprintf("want a whole number, e.g. --%s 3", f.Name)
	case strings.HasPrefix(t, "float"):
		return fmt.Sprintf("want a number, e.g. --%s 1.5", f.Name)
	case t == "bool":
		return fmt.Sprintf("want true or false, e.g. --%s=false", f.Name)
	case t == "duration":
		return fmt.Sprintf("want a duration, e.g. --%s 30s", f.Name)
	default:
		return "not a valid value; see --help"
	}
}

// usageArgs wraps every command's argument check so that a wrong number of
// arguments (or an unknown command) is a usage error, and gives commands
// that only group others (pxeperf, config, images) a check that refuses an
// unknown subcommand instead of printing help with status 0.
func usageArgs(c *cobra.Command) {
	if !c.Runnable() && c.HasSubCommands() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			return fmt.Errorf("unknown command %q for %q; the commands are: %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error { return usageError(check(cmd, args)) }
	}
	for _, s := range c.Commands() {
		usageArgs(s)
	}
}
