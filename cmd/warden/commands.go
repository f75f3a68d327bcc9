package main

import (
	"flag"
	"strings"

	"github.com/spf13/cobra"
)

// defineFunc declares a command's flags on fs, with the standard library's
// flag package (serve's many, the data and key commands'), and returns what
// runs once the command line is parsed, given the positional arguments.
// The flags are handed to cobra, so every command parses alike: --long
// flags anywhere on the line, --help on stdout, completion.
type defineFunc func(fs *flag.FlagSet) func(args []string) error

// goFlags makes c run define's command, with define's flags as c's own.
func goFlags(c *cobra.Command, define defineFunc) *cobra.Command {
	fs := flag.NewFlagSet(c.Name(), flag.ContinueOnError)
	run := define(fs)
	c.Flags().AddGoFlagSet(fs)
	c.RunE = func(_ *cobra.Command, args []string) error { return run(args) }
	return c
}

// argsNamed is a command's positional arguments, by name: a wrong count is
// a usage error that says which are wanted (cobra's own says only how
// many).
// commandName is a command's path without the program's name, which the
// error line's own "warden:" already says.
func commandName(c *cobra.Command) string {
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}

func argsNamed(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usageError("%s needs %s", commandName(c), strings.Join(names[len(args):], " "))
		case len(args) > len(names):
			return usageError("%s: unexpected argument(s) %q", commandName(c), args[len(names):])
		}
		return nil
	}
}
