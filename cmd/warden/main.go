// Command warden is the supervisor and its own client: `warden serve` runs
// the HTTP API over the actor system and its Pebble store; the other
// commands talk to a running warden (get, describe, history, the marquee
// actions, env), call it back from a workflow (callback), manage keys, or
// run the deterministic simulator.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/cmd/internal/buildinfo"
	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/sim"
)

func main() {
	// Every time warden prints or stores is UTC; clock.Real keeps the
	// monotonic reading, which .UTC() would drop.
	time.Local = time.UTC
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// exitError carries a command's exit status through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes one command line and returns its exit status.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	root := newRoot(getenv, stdout, stderr)
	root.SetArgs(args)
	// A flag that does not parse is a usage error, as cobra's own "unknown
	// command" and argument-count errors are (issue 22: exit 2, and say
	// where the usage is).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return statusError{exitUsage, err} })
	err := root.Execute()
	var exit exitError
	var se statusError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	case errors.As(err, &se) && se.code == exitUsage, isCobraUsage(err):
		fmt.Fprintln(stderr, "warden:", err)
		fmt.Fprintln(stderr, "Run 'warden --help' for usage.")
		return exitUsage
	default:
		fmt.Fprintln(stderr, "warden:", err)
		return 1
	}
}

// isCobraUsage recognizes cobra's usage errors, which it returns as plain
// errors: an unknown command, a wrong number of arguments.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command ", "accepts ", "requires at least ", "requires at most ", "unknown flag", "unknown shorthand flag"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func newRoot(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "warden",
		Short:         "warden supervises durable lifecycles driven by untrusted, asynchronous infrastructure",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Commands that parse their own flags (they predate the command
	// library and their flag sets are tested as they are).
	own := func(use, short string, f func(args []string) int) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				if code := f(args); code != 0 {
					return exitError{code}
				}
				return nil
			}}
	}
	errCode := func(err error) int {
		if err != nil {
			fmt.Fprintln(stderr, "warden:", err)
			return exitStatusOf(err)
		}
		return 0
	}
	root.AddCommand(
		own("serve", "run the supervisor: HTTP API, actors, Pebble store (warden serve -h for flags)", func(a []string) int {
			err := serve(a, getenv, stderr)
			if err != nil {
				fmt.Fprintln(stderr, "warden:", err)
				return exitStatusOf(err)
			}
			return 0
		}),
		own("callback", "send one callback from a workflow (configured from the environment; warden callback -h)", func(a []string) int {
			return runCallback(a, getenv, stdout, stderr)
		}),
		own("env", "ask warden for a preview environment, its removal or an action: env create|remove|action|get", func(a []string) int {
			return runEnv(a, getenv, stdout, stderr)
		}),
		own("rekey", "re-encrypt every sealed secret under a new seal key (warden stopped; resumes after a crash)", func(a []string) int {
			return errCode(rekey(a, getenv, stdout, stderr))
		}),
		own("backup", "copy a running warden's store, consistently, while it serves: --to DIR (D4)", func(a []string) int {
			return errCode(backupCmd(a, getenv, stdout, stderr))
		}),
		own("restore", "restore a checked backup into a new data directory: --from DIR --data NEW (D5)", func(a []string) int {
			return errCode(restoreCmd(a, getenv, stdout, stderr))
		}),
		own("verify", "check every record and the invariants across them: --data DIR (stopped) or --live (D6)", func(a []string) int {
			return errCode(verifyCmd(a, getenv, stdout, stderr))
		}),
		own("migrate", "copy a stopped store to an empty one, Pebble to etcd or back, and verify both: --from pebble:DIR --to etcd:URLS (D7)", func(a []string) int {
			return errCode(migrateCmd(a, getenv, stdout, stderr))
		}),
		own("rotate-callback-key", "start a new scoped-credential signing key; the old one verifies for --callback-token-ttl", func(a []string) int {
			return errCode(rotateCallbackKey(a, getenv, stdout, stderr))
		}),
		own("mint-callback-token", "print a scoped callback credential: --marquee ID --generation N [--ttl 1h]", func(a []string) int {
			return errCode(mintCallbackToken(a, getenv, stdout, stderr))
		}),
		own("keygen", "write the keys and token the nodes of a cluster share into DIR (where absent): warden keygen DIR", func(a []string) int {
			return errCode(keygen(a, stdout))
		}),
		own("sim", "deterministic simulation: --seed N | --seeds K [--from N] [--check-determinism]", func(a []string) int {
			return sim.Main(a, stdout, stderr, mdreport.Replace)
		}),
		&cobra.Command{Use: "version", Short: "print the version, commit and Go version", Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				fmt.Fprintln(stdout, buildinfo.Read())
				return nil
			}},
	)
	addClientCommands(root, getenv, stdout, stderr)
	return root
}
