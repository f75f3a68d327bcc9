// Command warden is the supervisor and its own client: `warden serve` runs
// the HTTP API over the actor system and its Pebble store; the other
// commands talk to a running warden (get, describe, history, the marquee
// actions, env), call it back from a workflow (callback), manage keys, or
// run the deterministic simulator.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/cmd/internal/buildinfo"
	"github.com/wardenhq/warden/cmd/warden/internal/config"
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
	// command" and argument-count errors are: exit 2, one line saying what
	// is wrong, and where the command's usage is.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return statusError{exitUsage, err} })
	cmd, err := root.ExecuteC()
	var exit exitError
	var se statusError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	case errors.As(err, &se) && se.code == exitUsage, isCobraUsage(err):
		fmt.Fprintf(stderr, "warden: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return exitUsage
	default:
		fmt.Fprintln(stderr, "warden:", err)
		return exitStatusOf(err)
	}
}

// isCobraUsage recognizes cobra's usage errors, which it returns as plain
// errors: an unknown command, a wrong number of arguments.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command ", "accepts ", "requires at least ", "requires at most ", "unknown flag", "unknown shorthand flag", "invalid argument "} {
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
	// help of a command that does not exist is a usage error (exit 2), not
	// cobra's "Unknown help topic" and exit 0.
	root.SetHelpCommand(&cobra.Command{Use: "help [command]", Short: "help about any command", Example: "  warden help get",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 || cmd == root && len(args) > 0 {
				return usageError("help: no command %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag() // as X --help shows it
			return cmd.Help()
		}})
	cmd := func(use, short, example string, args cobra.PositionalArgs) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Example: example, Args: args}
	}
	serveCmd := cmd("serve", "run the supervisor: HTTP API, actors, Pebble store",
		"  warden serve --listen 127.0.0.1:8080 --data ./data --dispatch exec --dispatch-command ./bin/example-workflow", cobra.NoArgs)
	serveCmd.Long = "Runs the supervisor: the HTTP API over the actor system and its store.\nEvery flag falls back to WARDEN_<FLAG> (upper case, - as _); secrets come\nfrom the environment or a --*-file, never from a flag."
	gfs := flag.NewFlagSet("serve", flag.ContinueOnError)
	finish := config.Declare(gfs, getenv)
	serveCmd.Flags().AddGoFlagSet(gfs)
	serveCmd.RunE = func(c *cobra.Command, args []string) error {
		conf, err := finish(args, c.Flags().Changed)
		if err != nil {
			return serveConfigError(err)
		}
		return serveConfig(conf, stderr)
	}
	callbackCmd := cmd("callback --verb VERB", "send one callback from a workflow (configured from the environment)",
		"  WARDEN_CALLBACK_URL=... WARDEN_MARQUEE_ID=m-1 WARDEN_GENERATION=1 WARDEN_CALLBACK_TOKEN=... warden callback --verb step --step vm_starting", cobra.NoArgs)
	callbackCmd.Long = callbackLong
	root.AddCommand(
		serveCmd,
		goFlags(callbackCmd, func(fs *flag.FlagSet) func([]string) error { return callbackCommand(fs, getenv, stdout, stderr) }),
		newEnvCommand(getenv, stdout, stderr),
		goFlags(cmd("keygen DIR", "write the keys and token the nodes of a cluster share into DIR (where absent)",
			"  warden keygen data/cluster/shared --node n1 --host 127.0.0.1,localhost", argsNamed("DIR")),
			func(fs *flag.FlagSet) func([]string) error { return keygenCommand(fs, stdout) }),
		&cobra.Command{Use: "version", Short: "print the version, commit and Go version", Args: cobra.NoArgs, Example: "  warden version",
			RunE: func(*cobra.Command, []string) error {
				fmt.Fprintln(stdout, buildinfo.Read())
				return nil
			}},
	)
	for _, d := range dataCommands {
		define := d.define
		root.AddCommand(goFlags(cmd(d.use, d.short, d.example, cobra.NoArgs),
			func(fs *flag.FlagSet) func([]string) error { return define(fs, getenv, stdout, stderr) }))
	}
	addClientCommands(root, getenv, stdout, stderr)
	for _, c := range root.Commands() {
		withExamples(c)
	}
	groupCommands(root)
	return root
}

// commandGroups are warden --help's groups, in order, and the commands in
// each; help and completion go under "Other".
var commandGroups = []struct {
	id, title string
	commands  []string
}{
	{"entities", "Marquees, environments and pools (warden VERB TYPE ID):", []string{"get", "describe", "explain", "dry-run", "history", "wait", "create", "remove", "action", "redeploy", "destroy", "enable", "disable", "run-now"}},
	{"workflow", "The workflow side:", []string{"callback", "mint-callback-token"}},
	{"data", "Data and keys:", []string{"backup", "restore", "verify", "migrate", "rekey", "rotate-callback-key"}},
	{"server", "The server and its cluster:", []string{"serve", "keygen", "version"}},
}

// groupCommands puts every command of root in its group of warden --help.
func groupCommands(root *cobra.Command) {
	group := map[string]string{}
	for _, g := range commandGroups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, name := range g.commands {
			group[name] = g.id
		}
	}
	root.AddGroup(&cobra.Group{ID: "other", Title: "Other:"})
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
	for _, c := range root.Commands() {
		if id, ok := group[c.Name()]; ok {
			c.GroupID = id
		} else if !c.Hidden && c.Name() != "help" && c.Name() != "completion" {
			c.GroupID = "other"
		}
	}
}

// commandFunc declares a command's flags on fs and returns what runs with
// its positional arguments (defineFunc, with the process's environment and
// output).
type commandFunc func(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func([]string) error

// dataCommands are the commands on data and keys: no positional arguments,
// flags only.
var dataCommands = []struct {
	use, short, example string
	define              commandFunc
}{
	{"rekey", "re-encrypt every sealed secret under a new seal key (warden stopped; resumes after a crash)",
		"  warden rekey --data ./data\n  warden rekey --online stage --server https://n1:8080", rekeyCommand},
	{"backup --to DIR", "copy a running warden's store, consistently, while it serves",
		"  warden backup --to ./backup-$(date +%F)", backupCommand},
	{"restore --from DIR --data NEW", "restore a checked backup into a new data directory",
		"  warden restore --from ./backup --data ./restored", restoreCommand},
	{"verify", "check every record and the invariants across them: --data DIR (stopped), --backup DIR or --live",
		"  warden verify --data ./data\n  warden verify --backup ./backup\n  warden verify --live", verifyCommand},
	{"migrate --from A --to B", "copy a stopped store to an empty one, Pebble to etcd or back, and verify both",
		"  warden migrate --from pebble:./data --to etcd:https://127.0.0.1:2379", migrateCommand},
	{"rotate-callback-key", "start a new scoped-credential signing key; the old one verifies for --callback-token-ttl",
		"  warden rotate-callback-key --data ./data", rotateCallbackKeyCommand},
	{"mint-callback-token --marquee ID --generation N", "print a scoped callback credential",
		"  warden mint-callback-token --marquee m-1 --generation 1 --ttl 1h", mintCallbackTokenCommand},
}

// clientExamples are the client commands' examples, by command path.
var clientExamples = map[string]string{
	"warden get":                  "  warden get marquees --lifecycle provisioned\n  warden get env pr-7 -o json",
	"warden get marquees":         "  warden get marquees --serving active -o wide\n  warden get mq m-1 -o yaml",
	"warden get environments":     "  warden get envs --state ready\n  warden get env pr-7 -o json",
	"warden get pools":            "  warden get pools",
	"warden get actors":           "  warden get actors -o json",
	"warden describe":             "  warden describe m-1\n  warden describe env pr-7",
	"warden describe marquee":     "  warden describe marquee m-1",
	"warden describe environment": "  warden describe env pr-7",
	"warden explain":              "  warden explain marquee m-1\n  warden explain mq m-1 -o json",
	"warden explain marquee":      "  warden explain marquee m-1",
	"warden explain pool":         "  warden explain pool default",
	"warden explain environment":  "  warden explain environment pr-7-3f2c9e1",
	"warden history":              "  warden history marquee m-1 --limit 20",
	"warden history marquee":      "  warden history marquee m-1 --limit 20",
	"warden redeploy":             "  warden redeploy marquee m-1",
	"warden redeploy marquee":     "  warden redeploy marquee m-1",
	"warden destroy":              "  warden destroy marquee m-1 --reap",
	"warden destroy marquee":      "  warden destroy marquee m-1 --reap",
	"warden disable":              "  warden disable marquee m-1",
	"warden disable marquee":      "  warden disable marquee m-1",
	"warden enable":               "  warden enable marquee m-1",
	"warden enable marquee":       "  warden enable marquee m-1",
	"warden run-now":              "  warden run-now marquee m-1",
	"warden run-now marquee":      "  warden run-now marquee m-1",
	"warden create marquee":       "  warden create marquee m-1 --kind tutorial",
	"warden create environment":   "  warden create environment pr-7-3f2c9e1 --branch feature-search --revision 3f2c9e1 --ttl 72h --if-absent",
	"warden remove environment":   "  warden remove environment pr-7-3f2c9e1 --reason 'pull request closed' --if-present",
	"warden create seed":          "  warden create seed demo --from demo-seed.sql",
	"warden get seeds":            "  warden get seeds\n  warden get seeds -o json",
	"warden remove seed":          "  warden remove seed demo",
	"warden action environment":   "  warden action environment pr-7-3f2c9e1 repair --reason 'container killed by hand'",
}

// withExamples gives c and the commands under it their examples where
// they have none.
func withExamples(c *cobra.Command) {
	if c.Example == "" {
		c.Example = clientExamples[c.CommandPath()]
	}
	for _, sub := range c.Commands() {
		withExamples(sub)
	}
}
