package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/actors/environment"
)

// One grammar, kubectl's: `warden VERB TYPE ID [flags]`. Each verb is a
// command with one child per type it takes (marquee, environment), so
// that `--help`, completion and the usage errors come from one tree. The
// forms before it (`warden redeploy ID`, `warden env create --id ID`)
// still run, hidden, each saying on stderr what to type instead.

// typed is a verb's child for one type: its use ("marquee ID"), aliases
// from typeAliases, and what runs.
func typed(shared func(*cobra.Command) *cobra.Command, kind, use, short string, args cobra.PositionalArgs, run func([]string) error) *cobra.Command {
	name, _, _ := strings.Cut(use, " ")
	aliases := []string{kind}
	for _, a := range typeAliases[kind] {
		if a != name {
			aliases = append(aliases, a)
		}
	}
	return shared(&cobra.Command{Use: use, Aliases: aliases, Short: short, Args: args,
		RunE: func(_ *cobra.Command, a []string) error { return run(a) }})
}

// verbOf is a verb whose children are its types. A verb given an id where
// a type belongs is the old form: when the verb takes one type only, it
// runs as that type's, after one line on stderr naming the new form.
func verbOf(stderr io.Writer, name, short string, children ...*cobra.Command) *cobra.Command {
	v := &cobra.Command{Use: name + " TYPE ID", Short: short, Args: cobra.ArbitraryArgs}
	v.AddCommand(children...)
	types := make([]string, len(children))
	for i, c := range children {
		types[i] = c.Name()
	}
	v.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 || len(children) != 1 || isTypeName(args[0]) {
			return typeNeeded(name, args, types)
		}
		child := children[0]
		fmt.Fprintf(stderr, "warden: %q is now %q\n", "warden "+name+" "+strings.Join(args, " "), "warden "+name+" "+child.Name()+" "+strings.Join(args, " "))
		if err := child.Args(child, args); err != nil {
			return err
		}
		return child.RunE(child, args)
	}
	return v
}

// isTypeName says whether s names a type (or is one of its aliases).
func isTypeName(s string) bool {
	for kind, aliases := range typeAliases {
		if s == kind || slices.Contains(aliases, s) {
			return true
		}
	}
	return false
}

// typeNeeded is the usage error of a verb given no type, or one it does
// not take.
func typeNeeded(verb string, args, types []string) error {
	if len(args) == 0 {
		return usageError("%s needs a type and an id: warden %s %s ID", verb, verb, strings.Join(types, "|"))
	}
	return usageError("%s: unknown type %q; it takes %s", verb, args[0], strings.Join(types, ", "))
}

// addEntityVerbs adds the verbs that change or read one entity by its
// type and id: history, create, remove, action, and the marquee's
// operator commands.
func (o *clientOptions) addEntityVerbs(root *cobra.Command, shared func(*cobra.Command) *cobra.Command) {
	var historyLimit int
	history := typed(shared, "marquees", "marquee ID", "a marquee's history, newest first", argsNamed("ID"), func(args []string) error {
		answer, err := o.call(http.MethodGet, "/v1/marquees/"+url.PathEscape(args[0])+"/history?limit="+fmt.Sprint(historyLimit), nil)
		if err != nil {
			return err
		}
		if done, err := o.print(answer); done {
			return err
		}
		return o.table(historyRows(items(answer)))
	})
	historyVerb := verbOf(o.stderr, "history", "an entity's history, newest first", history)
	for _, c := range []*cobra.Command{history, historyVerb} {
		c.Flags().IntVar(&historyLimit, "limit", 50, "entries, 1..200")
	}
	shared(historyVerb)

	marqueeCommand := func(verb, short, path string, body func() any) *cobra.Command {
		child := typed(shared, "marquees", "marquee ID", short, argsNamed("ID"), func(args []string) error {
			return o.show(o.call(http.MethodPost, "/v1/marquees/"+url.PathEscape(args[0])+path, body()))
		})
		return shared(verbOf(o.stderr, verb, short, child))
	}
	var reap bool
	destroy := marqueeCommand("destroy", "tear a tutorial marquee's host down; --reap makes it a tombstone once destroyed", "/destroy",
		func() any { return map[string]any{"reap": reap} })
	destroy.PersistentFlags().BoolVar(&reap, "reap", false, "make the marquee a tombstone once destroyed")

	root.AddCommand(historyVerb, o.createVerb(shared), o.removeVerb(shared), o.actionVerb(shared), o.dryRunVerb(shared),
		marqueeCommand("redeploy", "supersede the current attempt with a new generation", "/redeploy", func() any { return nil }),
		destroy,
		marqueeCommand("disable", "stop serving", "/disable", func() any { return nil }),
		marqueeCommand("enable", "serve again", "/enable", func() any { return nil }),
		marqueeCommand("run-now", "cut a waiting back-off short and make its transition now", "/actions/run-now", func() any { return nil }),
	)
}

// createVerb is `create marquee ID` and `create environment ID`.
func (o *clientOptions) createVerb(shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	var kind, pool, connectionFile string
	marquee := typed(shared, "marquees", "marquee ID --kind tutorial|byo", "ask for a marquee", argsNamed("ID"), func(args []string) error {
		body := map[string]any{"id": args[0], "kind": kind}
		if pool != "" {
			body["pool"] = pool
		}
		if connectionFile != "" {
			raw, err := os.ReadFile(connectionFile)
			if err != nil {
				return usageError("--connection-file: %v", err)
			}
			var conn map[string]any
			if err := json.Unmarshal(raw, &conn); err != nil {
				return usageError("--connection-file %s: not a JSON object: %v", connectionFile, err)
			}
			body["connection"] = conn
		}
		return o.show(o.call(http.MethodPost, "/v1/marquees", body))
	})
	marquee.Flags().StringVar(&kind, "kind", "tutorial", "tutorial (warden provisions its host) or byo (bring your own: --connection-file)")
	marquee.Flags().StringVar(&pool, "pool", "", "the admission pool of a tutorial marquee (default: default)")
	marquee.Flags().StringVar(&connectionFile, "connection-file", "", "a byo marquee's connection, a JSON object (host, port, user, ssh_private_key)")

	env := o.envCreate(shared)
	var from string
	seed := typed(shared, "seeds", "seed NAME --from FILE.sql", "make a seed previews' data is copied from: the migrations, then the file's SQL", argsNamed("NAME"),
		func(args []string) error { return o.createSeed(args[0], from) })
	seed.Flags().StringVar(&from, "from", "", "the seed's SQL (e.g. a dump of rows); made once: again from the same, nothing")
	v := shared(verbOf(o.stderr, "create", "ask for a marquee, a preview environment or a seed", marquee, env, seed))
	v.Example = "  warden create marquee m-1 --kind tutorial\n  warden create environment pr-7-3f2c9e1 --branch feature-search --revision 3f2c9e1 --ttl 72h\n" +
		"  warden create seed demo --from seed.sql"
	return v
}

// createSeed makes a seed from a SQL file and prints it.
func (o *clientOptions) createSeed(name, from string) error {
	if from == "" {
		return usageError("create seed needs --from FILE.sql: the seed's SQL")
	}
	sql, err := os.ReadFile(from)
	if err != nil {
		return usageError("--from: %v", err)
	}
	answer, err := o.call(http.MethodPost, "/v1/seeds/"+url.PathEscape(name), rawBody{contentType: "application/sql", data: sql})
	if err != nil {
		return err
	}
	if done, err := o.print(answer); done {
		return err
	}
	fmt.Fprintf(o.stdout, "seed %s made (fingerprint %s)\n", str(answer, "name"), str(answer, "fingerprint"))
	return nil
}

// envCreateFlags are create environment's flags, shared with the old
// `env create`.
type envCreateFlags struct {
	branch, revision, ttl, data, dataFrom, sleepAfter string
	ifAbsent                                          bool
}

func (f *envCreateFlags) declare(c *cobra.Command) {
	c.Flags().StringVar(&f.branch, "branch", "", "branch")
	c.Flags().StringVar(&f.revision, "revision", "", "revision, e.g. the commit SHA")
	c.Flags().StringVar(&f.ttl, "ttl", "", "time to live, e.g. 72h")
	c.Flags().StringVar(&f.data, "data", "", "disposable or preserve")
	c.Flags().StringVar(&f.dataFrom, "data-from", "", "the seed its database is copied from")
	c.Flags().StringVar(&f.sleepAfter, "sleep-after", "", "sleep once no one visited it for this long, e.g. 30m, or never (default: the server's --preview-sleep-after)")
	c.Flags().BoolVar(&f.ifAbsent, "if-absent", false, "an environment that already exists is success")
}

// createEnv asks for an environment; with ifAbsent, one that exists is
// read and printed instead.
func (o *clientOptions) createEnv(id string, f envCreateFlags) error {
	body := map[string]any{"id": id, "branch": f.branch, "revision": f.revision}
	if f.ttl != "" {
		body["ttl"] = f.ttl
	}
	if f.data != "" {
		body["data"] = f.data
	}
	if f.dataFrom != "" {
		body["data_from"] = f.dataFrom
	}
	if f.sleepAfter != "" {
		body["sleep_after"] = f.sleepAfter
	}
	answer, err := o.call(http.MethodPost, "/v1/environments", body)
	if ae, ok := err.(answerError); ok && f.ifAbsent && ae.status == http.StatusConflict && ae.code == "conflict" {
		answer, err = o.call(http.MethodGet, "/v1/environments/"+url.PathEscape(id), nil)
	}
	return o.showEnv(answer, err)
}

func (o *clientOptions) envCreate(shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	var f envCreateFlags
	c := typed(shared, "environments", "environment ID --branch B --revision R", "ask for a preview environment", argsNamed("ID"),
		func(args []string) error { return o.createEnv(args[0], f) })
	f.declare(c)
	return c
}

// removeEnv asks for an environment's removal; with ifPresent, one that
// does not exist is success.
func (o *clientOptions) removeEnv(id, reason string, ifPresent bool) error {
	answer, err := o.call(http.MethodPost, "/v1/environments/"+url.PathEscape(id)+"/remove", map[string]any{"reason": reason})
	if ae, ok := err.(answerError); ok && ifPresent && ae.status == http.StatusNotFound {
		answer, err = map[string]any{"id": id, "removed": "absent"}, nil
	}
	return o.showEnv(answer, err)
}

// removeVerb is `remove environment ID`.
func (o *clientOptions) removeVerb(shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	var reason string
	var ifPresent bool
	env := typed(shared, "environments", "environment ID", "ask for an environment's removal", argsNamed("ID"),
		func(args []string) error { return o.removeEnv(args[0], reason, ifPresent) })
	env.Flags().StringVar(&reason, "reason", "", "why (recorded in its audit)")
	env.Flags().BoolVar(&ifPresent, "if-present", false, "an environment that does not exist is success")
	seed := typed(shared, "seeds", "seed NAME", "remove a seed; the previews copied from it keep their data", argsNamed("NAME"),
		func(args []string) error {
			answer, err := o.call(http.MethodPost, "/v1/seeds/"+url.PathEscape(args[0])+"/remove", nil)
			if err != nil {
				return err
			}
			if done, err := o.print(answer); done {
				return err
			}
			fmt.Fprintf(o.stdout, "seed %s removed\n", args[0])
			return nil
		})
	v := shared(verbOf(o.stderr, "remove", "ask for an environment's removal, or remove a seed", env, seed))
	v.Example = "  warden remove environment pr-7-3f2c9e1 --reason 'pull request closed' --if-present\n  warden remove seed demo"
	return v
}

// envAction takes a manual action on an environment.
func (o *clientOptions) envAction(id, action, reason string) error {
	if !slices.Contains(environment.ActionNames, action) {
		return usageError("%q is not an action: one of %s", action, strings.Join(environment.ActionNames, ", "))
	}
	if reason == "" {
		return usageError("an action records why: give --reason")
	}
	return o.showEnv(o.call(http.MethodPost, "/v1/environments/"+url.PathEscape(id)+"/actions/"+url.PathEscape(action), map[string]any{"reason": reason}))
}

// actionVerb is `action environment ID ACTION --reason R`.
func (o *clientOptions) actionVerb(shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	var reason string
	env := typed(shared, "environments", "environment ID ACTION --reason R", "take a manual action: "+strings.Join(environment.ActionNames, ", "),
		argsNamed("ID", "ACTION"), func(args []string) error { return o.envAction(args[0], args[1], reason) })
	env.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 1 {
			return environment.ActionNames, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	env.Flags().StringVar(&reason, "reason", "", "why (recorded in the environment's audit)")
	v := shared(verbOf(o.stderr, "action", "take a manual action on an environment", env))
	v.Example = "  warden action environment pr-7-3f2c9e1 repair --reason 'container killed by hand'"
	return v
}

// dryRunVerb is `dry-run marquee ID --verb V --generation N`: what that
// callback would do now, and nothing else (O18).
func (o *clientOptions) dryRunVerb(shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	var verb, step, reason, delivery string
	var generation uint64
	marquee := typed(shared, "marquees", "marquee ID --verb VERB --generation N", "what a callback would do now, without sending it", argsNamed("ID"), func(args []string) error {
		if verb == "" {
			return usageError("dry-run needs --verb: step, deployed, destroyed, failed, null or rebooted")
		}
		body := map[string]any{"marquee_id": args[0], "verb": verb, "generation": generation}
		if step != "" {
			body["step"] = step
		}
		if reason != "" {
			body["reason"] = reason
		}
		var headers []string
		if delivery != "" {
			headers = []string{"Webhook-Id", delivery}
		}
		return o.dryRunShown(args[0])(o.callWith(http.MethodPost, "/v1/marquees/"+url.PathEscape(args[0])+"/dry-run", body, headers...))
	})
	marquee.Flags().StringVar(&verb, "verb", "", "the callback's verb: step, deployed, destroyed, failed, null or rebooted")
	marquee.Flags().Uint64Var(&generation, "generation", 0, "the generation the callback speaks for")
	marquee.Flags().StringVar(&step, "step", "", "with --verb step: vm_starting, ssh_configuring, tls_provisioning or app_deploying")
	marquee.Flags().StringVar(&reason, "reason", "", "with --verb failed: what went wrong")
	marquee.Flags().StringVar(&delivery, "delivery-id", "", "a delivery id, to ask what its repeat would be answered")
	marquee.Example = "  warden dry-run marquee m-1 --verb step --generation 2 --step vm_starting\n  warden dry-run mq m-1 --verb null --generation 2 -o json"
	var action, envReason string
	var remove bool
	env := typed(shared, "environments", "environment ID --action A --reason R | --remove", "what an action or a removal would do now, without doing it", argsNamed("ID"), func(args []string) error {
		var body map[string]any
		switch {
		case remove == (action != ""):
			return usageError("dry-run environment needs one of --action A and --remove")
		case remove:
			body = map[string]any{"remove": map[string]any{"reason": envReason}}
		default:
			body = map[string]any{"action": action, "reason": envReason}
		}
		return o.dryRunShown(args[0])(o.call(http.MethodPost, "/v1/environments/"+url.PathEscape(args[0])+"/dry-run", body))
	})
	env.Flags().StringVar(&action, "action", "", "the action: "+strings.Join(environment.ActionNames, ", "))
	env.Flags().BoolVar(&remove, "remove", false, "a removal")
	env.Flags().StringVar(&envReason, "reason", "", "why, as the real command would record it")
	env.Example = "  warden dry-run environment pr-7-3f2c9e1 --remove --reason 'branch merged'\n  warden dry-run env pr-7-3f2c9e1 --action repair --reason 'container killed by hand'"
	v := shared(verbOf(o.stderr, "dry-run", "what an input would do now, without sending it", marquee, env))
	v.Example = marquee.Example + "\n" + env.Example
	return v
}
