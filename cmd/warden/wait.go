package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/httpapi"
)

// `warden wait` is kubectl wait's: poll one marquee or environment until
// every --for condition holds, or fail at --timeout saying what it is
// instead (the README's examples raced the work they started).

// waitPoll is how often a wait looks.
const waitPoll = 250 * time.Millisecond

func (o *clientOptions) waitCommand(shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	var conds []string
	var timeout time.Duration
	var verbose bool
	child := func(kind, use string) *cobra.Command {
		c := typed(shared, kind, use+" ID --for FIELD=VALUE", "wait until the "+use+" has a field's value", argsNamed("ID"), func(args []string) error {
			kind, path, err := waitPath(use, args[0])
			if err != nil {
				return err
			}
			want, err := parseConditions(conds, kind)
			if err != nil {
				return err
			}
			w := waiter{o: o, what: use + " " + args[0], path: path, want: want, verbose: verbose}
			return w.run(timeout)
		})
		c.Flags().StringArrayVar(&conds, "for", nil, "FIELD=VALUE of the view to wait for, e.g. lifecycle=provisioned or state=ready (repeatable: all must hold), or delete: until it is gone")
		c.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait")
		c.Flags().BoolVarP(&verbose, "verbose", "v", false, "print each state waited through")
		return c
	}
	marquee, env := child("marquees", "marquee"), child("environments", "environment")
	marquee.Example = "  warden wait marquee m-1 --for lifecycle=provisioned --timeout 2m"
	env.Example = "  warden wait environment pr-7 --for state=ready\n  warden wait env pr-7 --for delete"
	v := shared(verbOf(o.stderr, "wait", "wait until a marquee or environment has a field's value (e.g. --for lifecycle=provisioned)", marquee, env))
	v.Example = marquee.Example + "\n" + env.Example
	return v
}

// waitPath is the kind ("marquees", "environments") and the view's path of
// an entity named by a type and an id.
func waitPath(kind, id string) (string, string, error) {
	for _, base := range []struct{ name, path string }{{"marquees", "/v1/marquees/"}, {"environments", "/v1/environments/"}} {
		if kind == base.name || contains(typeAliases[base.name], kind) {
			return base.name, base.path + url.PathEscape(id), nil
		}
	}
	return "", "", usageError("wait: unknown resource type %q; valid types: marquee (mq), environment (env)", kind)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deleted is the condition --for delete: the entity is gone.
const deleted = "delete"

// parseConditions reads --for: FIELD=VALUE, each value checked against
// the field's values where they are a fixed list (the ones get's filters
// take), or delete alone.
func parseConditions(conds []string, kind string) (map[string]string, error) {
	if len(conds) == 0 {
		return nil, usageError("wait needs --for FIELD=VALUE (or --for delete)")
	}
	values := httpapi.ViewValues(kind)
	want := map[string]string{}
	for _, c := range conds {
		if c == deleted {
			if len(conds) > 1 {
				return nil, usageError("--for delete waits for nothing else")
			}
			return map[string]string{deleted: ""}, nil
		}
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			return nil, usageError("--for %q: want FIELD=VALUE or delete", c)
		}
		if list, fixed := values[k]; fixed && !slices.Contains(list, v) {
			return nil, usageError("--for %s: %q is not a %s; valid values: %s", c, v, k, strings.Join(list, ", "))
		}
		want[k] = v
	}
	return want, nil
}

// waitGrace is how far past --timeout a call begun before it may run
// (wait returns within its timeout and half a second, O15).
const waitGrace = 250 * time.Millisecond

// waiter is one wait: what, where, for which values.
type waiter struct {
	o       *clientOptions
	what    string
	path    string
	want    map[string]string
	verbose bool
}

// run polls the view until it has every wanted value (or, for delete, is
// gone). An entity that does not exist, and a field its view does not
// have, fail at once: waiting cannot change either.
func (w waiter) run(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	// No call or retry goes past the deadline, but for a moment's grace:
	// a view asked for just before it may still answer, and then the
	// timeout says what the entity was.
	w.o.deadline = deadline.Add(waitGrace)
	defer func() { w.o.deadline = time.Time{} }()
	_, gone := w.want[deleted]
	var last map[string]any
	var lastErr error
	said := ""
	for first := true; ; first = false {
		last, lastErr = w.o.call(http.MethodGet, w.path, nil)
		var refusal answerError
		switch {
		case errors.As(lastErr, &refusal) && refusal.status == http.StatusNotFound && gone:
			fmt.Fprintf(w.o.stdout, "%s: deleted\n", w.what)
			return nil
		case errors.As(lastErr, &refusal) && refusal.status == http.StatusNotFound:
			return fmt.Errorf("%s: %w", w.what, lastErr)
		case lastErr == nil && first && !gone:
			if err := w.fieldsExist(last); err != nil {
				return err
			}
		}
		if lastErr == nil && !gone {
			now := describeWanted(last, w.want)
			if w.verbose && now != said {
				fmt.Fprintf(w.o.stdout, "%s %s: %s\n", time.Now().UTC().Format(time.TimeOnly), w.what, now)
			}
			said = now
			if holds(last, w.want) {
				fmt.Fprintf(w.o.stdout, "%s: %s\n", w.what, now)
				return nil
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		time.Sleep(min(waitPoll, left))
	}
	if lastErr != nil {
		return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, w.what, lastErr)
	}
	if gone {
		return fmt.Errorf("timed out after %s waiting for %s to be deleted", timeout, w.what)
	}
	return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, w.what, describeWanted(last, w.want))
}

// fieldsExist refuses a wanted field the view does not have.
func (w waiter) fieldsExist(view map[string]any) error {
	for k := range w.want {
		if _, ok := view[k]; !ok {
			fields := make([]string, 0, len(view))
			for f := range view {
				fields = append(fields, f)
			}
			sort.Strings(fields)
			return usageError("--for %s: %s has no field %q; its fields: %s", k, w.what, k, strings.Join(fields, ", "))
		}
	}
	return nil
}

func holds(view map[string]any, want map[string]string) bool {
	for k, v := range want {
		if str(view, k) != v {
			return false
		}
	}
	return true
}

// describeWanted says what each waited-for field is now.
func describeWanted(view map[string]any, want map[string]string) string {
	var parts []string
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, got := want[k], str(view, k)
		if got == v {
			parts = append(parts, fmt.Sprintf("%s=%s", k, got))
		} else {
			parts = append(parts, fmt.Sprintf("%s is %q, want %q", k, got, v))
		}
	}
	return strings.Join(parts, ", ")
}
