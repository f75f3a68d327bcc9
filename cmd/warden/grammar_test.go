package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// entityCommands are the commands on one entity, each as warden VERB TYPE
// ID [ARG] takes it; extra are the flags it needs to get as far as the
// server.
var entityCommands = []struct {
	path  []string
	extra []string
}{
	{[]string{"get", "marquees"}, nil},
	{[]string{"get", "environments"}, nil},
	{[]string{"get", "pools"}, nil},
	{[]string{"describe", "marquee"}, nil},
	{[]string{"describe", "environment"}, nil},
	{[]string{"explain", "marquee"}, nil},
	{[]string{"explain", "pool"}, nil},
	{[]string{"explain", "environment"}, nil},
	{[]string{"dry-run", "marquee"}, []string{"--verb", "step", "--generation", "1", "--step", "vm_starting"}},
	{[]string{"dry-run", "environment"}, []string{"--remove"}},
	{[]string{"history", "marquee"}, nil},
	{[]string{"wait", "marquee"}, []string{"--for", "lifecycle=provisioned", "--timeout", "1s"}},
	{[]string{"create", "marquee"}, nil},
	{[]string{"create", "environment"}, []string{"--branch", "b", "--revision", "r"}},
	{[]string{"remove", "environment"}, nil},
	{[]string{"action", "environment"}, []string{"repair", "--reason", "why"}},
	{[]string{"redeploy", "marquee"}, nil},
	{[]string{"destroy", "marquee"}, nil},
	{[]string{"enable", "marquee"}, nil},
	{[]string{"disable", "marquee"}, nil},
	{[]string{"run-now", "marquee"}, nil},
}

// TestO19EveryEntityCommandIsVerbTypeID: each entity command answers
// --help (0), an unknown flag (2), a missing id (2) and a dead server
// (1), each error one line in the one format.
func TestO19EveryEntityCommandIsVerbTypeID(t *testing.T) {
	t.Parallel() // each command's dead-server call retries for 2 s, asleep
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": "http://127.0.0.1:1", "WARDEN_OPERATOR_TOKEN": "t"}[k]
	}
	for _, c := range entityCommands {
		name := "warden " + strings.Join(c.path, " ")
		t.Run(strings.Join(c.path, "_"), func(t *testing.T) {
			t.Parallel()
			code, out, errs := walkCLI(env, append(c.path, "--help")...)
			require.Equal(t, 0, code, errs)
			require.Regexp(t, `Usage:\n  `+name+`s? \[?(ID|NAME)`, out)
			require.NotRegexp(t, `\([MAEITOWCSPD][0-9]+\)`, out, "no rule ids in help")

			code, _, errs = walkCLI(env, append(c.path, "x-1", "--no-such-flag")...)
			require.Equal(t, exitUsage, code)
			require.Equal(t, "warden: unknown flag: --no-such-flag\nRun '"+name+" --help' for usage.\n", errs)

			if c.path[0] != "get" { // get TYPE without an id lists
				code, _, errs = walkCLI(env, c.path...)
				require.Equal(t, exitUsage, code, errs)
				require.True(t, strings.HasPrefix(errs, "warden: "), errs)
				require.Equal(t, 1, strings.Count(errs, "warden:"), errs)
			}

			code, _, errs = walkCLI(env, append(append(c.path, "x-1"), c.extra...)...)
			require.Equal(t, 1, code, errs)
			require.Equal(t, 1, strings.Count(errs, "\n"), "one line: %s", errs)
			require.True(t, strings.HasPrefix(errs, "warden: "), errs)
		})
	}
	// A verb without a type names the types it takes.
	code, _, errs := walkCLI(env, "create")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "warden create marquee|environment|seed ID")
	code, _, errs = walkCLI(env, "remove", "marquee", "m-1")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, `unknown type "marquee"; it takes environment`)
}

// TestO19OldFormsRunAndNameTheNewOne: the forms before the grammar still
// reach warden, each saying on stderr what to type now.
func TestO19OldFormsRunAndNameTheNewOne(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"m-1","status":"redeploying"}`))
	}))
	defer srv.Close()
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": srv.URL, "WARDEN_OPERATOR_TOKEN": "t"}[k]
	}
	code, out, errs := walkCLI(env, "redeploy", "m-1")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "m-1: redeploying\n", out)
	require.Equal(t, "warden: \"warden redeploy m-1\" is now \"warden redeploy marquee m-1\"\n", errs)
	code, _, errs = walkCLI(env, "destroy", "m-1", "--reap")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, `"warden destroy marquee m-1"`)
	code, _, errs = walkCLI(env, "env", "create", "--id", "pr-1", "--branch", "b", "--revision", "r")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, `is now "warden create environment pr-1 ..."`)
	require.Equal(t, []string{"POST /v1/marquees/m-1/redeploy", "POST /v1/marquees/m-1/destroy", "POST /v1/environments"}, paths)

	code, out, _ = walkCLI(env, "--help")
	require.Equal(t, 0, code)
	require.NotContains(t, out, "\n  env ", "the old env command is hidden")
}

// TestO20RefusalsAreOneLineInOneFormat: warden's refusal of any command,
// the old env commands among them, is `warden: message (status code)`,
// never its JSON.
func TestO20RefusalsAreOneLineInOneFormat(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"code":"conflict","message":"environment pr-1 already exists"}}`))
	}))
	defer srv.Close()
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": srv.URL, "WARDEN_OPERATOR_TOKEN": "t"}[k]
	}
	for _, args := range [][]string{
		{"create", "environment", "pr-1", "--branch", "b", "--revision", "r"},
		{"env", "create", "--id", "pr-1", "--branch", "b", "--revision", "r"},
		{"redeploy", "marquee", "m-1"},
		{"get", "marquee", "m-1"},
	} {
		code, _, errs := walkCLI(env, args...)
		require.Equal(t, 1, code, "%v: %s", args, errs)
		last := errs[strings.LastIndex(strings.TrimSuffix(errs, "\n"), "\n")+1:]
		require.Equal(t, "warden: environment pr-1 already exists (409 conflict)\n", last, "%v", args)
		require.NotContains(t, errs, "{", "%v: never the JSON", args)
	}
}
