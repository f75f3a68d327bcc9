package main

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// `warden wait` is kubectl wait's: poll one marquee or environment until
// every --for condition holds, or fail at --timeout saying what it is
// instead (issue 22: the README's examples raced the work they started).

// waitPoll is how often a wait looks.
const waitPoll = 250 * time.Millisecond

func (o *clientOptions) waitCommand(shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	var conds []string
	var timeout time.Duration
	c := shared(&cobra.Command{Use: "wait TYPE ID --for FIELD=VALUE", Short: "wait until a marquee or environment has a field's value (e.g. --for lifecycle=provisioned)",
		Args: cobra.ExactArgs(2), RunE: func(_ *cobra.Command, args []string) error {
			path, err := waitPath(args[0], args[1])
			if err != nil {
				return err
			}
			want, err := parseConditions(conds)
			if err != nil {
				return err
			}
			return o.wait(args[0]+" "+args[1], path, want, timeout)
		}})
	c.Flags().StringArrayVar(&conds, "for", nil, "FIELD=VALUE of the view to wait for, e.g. lifecycle=provisioned or state=ready (repeatable: all must hold)")
	c.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait")
	return c
}

func waitPath(kind, id string) (string, error) {
	for _, base := range []struct{ name, path string }{{"marquees", "/v1/marquees/"}, {"environments", "/v1/environments/"}} {
		if kind == base.name || contains(typeAliases[base.name], kind) {
			return base.path + url.PathEscape(id), nil
		}
	}
	return "", usageError("wait: unknown resource type %q; valid types: marquee (mq), environment (env)", kind)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func parseConditions(conds []string) (map[string]string, error) {
	if len(conds) == 0 {
		return nil, usageError("wait needs --for FIELD=VALUE")
	}
	want := map[string]string{}
	for _, c := range conds {
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			return nil, usageError("--for %q: want FIELD=VALUE", c)
		}
		want[k] = v
	}
	return want, nil
}

// wait polls path until its view has every wanted value.
func (o *clientOptions) wait(what, path string, want map[string]string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last map[string]any
	var lastErr error
	for {
		last, lastErr = o.call(http.MethodGet, path, nil)
		if lastErr == nil && holds(last, want) {
			fmt.Fprintf(o.stdout, "%s: %s\n", what, describeWanted(last, want))
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(waitPoll)
	}
	if lastErr != nil {
		return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, lastErr)
	}
	return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, describeWanted(last, want))
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
