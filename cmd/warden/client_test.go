package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestO9TheBinaryIsAlsoTheClient: get, describe, history and the marquee
// actions against a real warden, in a table by default, -o wide, json and
// yaml; a refusal exits non-zero with the server's message.
func TestO9TheBinaryIsAlsoTheClient(t *testing.T) {
	ok := okScript(t)
	p := startProc(t, t.TempDir()+"/data", freePort(t), "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
	for _, id := range []string{"m-1", "m-2"} {
		st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": id, "kind": "tutorial"})
		require.Equal(t, 201, st, "%v", v)
	}
	st, _ := p.do("POST", "/v1/environments", "op-secret", map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Equal(t, 201, st)
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": p.url, "WARDEN_OPERATOR_TOKEN": "op-secret"}[k]
	}
	cli := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := run(args, env, &out, &errs)
		return code, out.String(), errs.String()
	}

	code, out, errs := cli("get", "marquees")
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ID\s+KIND\s+LIFECYCLE\s+SERVING\s+GEN\s+STATUS$`, lines[0])
	require.Regexp(t, `^m-1\s+tutorial\s+provisioning\s+disabled\s+1\s+provisioning, attempt 1 of 7`, lines[1])

	code, out, _ = cli("get", "marquees", "-o", "wide")
	require.Equal(t, 0, code)
	require.Contains(t, strings.Split(out, "\n")[0], "NEXT")

	code, out, _ = cli("get", "marquees", "-o", "json", "--lifecycle", "provisioning")
	require.Equal(t, 0, code)
	var list struct{ Items []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Items, 2)

	code, out, _ = cli("get", "environments", "-o", "yaml")
	require.Equal(t, 0, code)
	var ylist struct{ Items []map[string]any }
	require.NoError(t, yaml.Unmarshal([]byte(out), &ylist))
	require.Equal(t, "env-1", ylist.Items[0]["id"])

	code, out, _ = cli("get", "pools")
	require.Equal(t, 0, code)
	require.Regexp(t, `default\s+1\s+1\s+1`, out, "limit 1, one reserved, one queued")

	code, out, errs = cli("describe", "marquee", "m-1")
	require.Equal(t, 0, code, errs)
	for _, want := range []string{"Status:      provisioning, attempt 1 of 7", "Next:        stuck retry", "Timeline", "-- generation 1 --", "dispatch"} {
		require.Contains(t, out, want)
	}
	code, out, _ = cli("describe", "environment", "env-1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Resources (desired | observed):")

	// O17: explain, in words and as the API's JSON.
	code, out, errs = cli("explain", "marquee", "m-2")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "blocked by:\n  pool default: queued 1 of 1 in pool default (limit 1), held by [m-1]")
	require.Contains(t, out, "because (oldest first):\n")
	code, out, errs = cli("explain", "mq", "m-1", "-o", "json")
	require.Equal(t, 0, code, errs)
	var e map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &e))
	require.NotEmpty(t, e["awaiting"])
	code, out, errs = cli("explain", "env", "env-1")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "env-1: ")
	require.Contains(t, out, "awaiting:\n")
	require.Contains(t, out, "operator remove: ")
	code, out, errs = cli("dry-run", "environment", "env-1", "--remove", "--reason", "branch merged")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "env-1: would be applied: removal requested: branch merged")
	require.Contains(t, out, "desired ready -> removed")
	code, out, errs = cli("explain", "pool", "default")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "pool default: 1 of 1 slots held (m-1); 1 waiting, m-2 next")
	require.Contains(t, out, "release by m-1: frees m-1's slot and admits m-2")
	code, _, errs = cli("explain", "m-1")
	require.Equal(t, 2, code, "a type is needed")
	require.Contains(t, errs, "unknown resource type")

	// O18: a dry run, in words, from the CLI; it changes nothing.
	code, out, errs = cli("dry-run", "marquee", "m-1", "--verb", "step", "--generation", "1", "--step", "vm_starting")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "m-1: would be applied")
	require.Contains(t, out, "changes:\n  progress queued -> vm_starting")
	code, out, errs = cli("dry-run", "mq", "m-1", "--verb", "step", "--generation", "9", "--step", "vm_starting", "-o", "json")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `"result": "stale"`)
	require.Contains(t, out, "ahead of the marquee's 1")
	code, out, _ = cli("get", "marquee", "m-1", "-o", "json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"progress": "queued"`, "the dry runs changed nothing")

	code, out, _ = cli("history", "marquee", "m-1", "--limit", "5")
	require.Equal(t, 0, code)
	require.Contains(t, out, "slot reserved in pool default")

	code, out, errs = cli("disable", "marquee", "m-1")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "m-1: provisioning")

	code, _, errs = cli("run-now", "mq", "m-1")
	require.NotEqual(t, 0, code, "a refusal is a non-zero exit")
	require.Contains(t, errs, "no back-off waiting", "with the server's message")
	code, _, errs = cli("get", "marquees", "--status", "sleepy")
	require.NotEqual(t, 0, code)
	require.Contains(t, errs, "invalid_request")
	code, _, errs = cli("get", "marquees", "-o", "xml")
	require.NotEqual(t, 0, code)
	require.Contains(t, errs, "want table, wide, json or yaml")

	code, out, _ = cli("version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "warden "))
}

// TestTheCLIFollowsItsUsersHabits: the resource types people type
// (aliases, one item by id, describe by id alone), a usage error that
// says so and exits 2, and `warden wait`.
func TestTheCLIFollowsItsUsersHabits(t *testing.T) {
	ok := okScript(t)
	p := startProc(t, t.TempDir()+"/data", freePort(t), "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-3", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	st, _ = p.do("POST", "/v1/environments", "op-secret", map[string]any{"id": "env-3", "branch": "main", "revision": "r1"})
	require.Equal(t, 201, st)
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": p.url, "WARDEN_OPERATOR_TOKEN": "op-secret"}[k]
	}
	cli := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := run(args, env, &out, &errs)
		return code, out.String(), errs.String()
	}
	for _, alias := range []string{"envs", "env", "environment", "environments"} {
		code, out, errs := cli("get", alias)
		require.Equal(t, 0, code, "get %s: %s", alias, errs)
		require.Contains(t, out, "env-3")
	}
	code, out, errs := cli("get", "marquee", "m-3")
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^m-3\s+tutorial`, out, "one marquee, as a row")
	code, out, _ = cli("get", "mq", "m-3", "-o", "json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"id": "m-3"`)
	code, out, _ = cli("describe", "m-3")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Marquee:     m-3")
	code, out, _ = cli("describe", "env-3")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Environment: env-3")
	code, _, errs = cli("describe", "nothing-here")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no marquee or environment")

	for _, args := range [][]string{{"get", "frobs"}, {"get"}, {"frobnicate"}, {"get", "marquees", "--frobnicate"}, {"describe"}} {
		code, out, errs := cli(args...)
		require.Equal(t, exitUsage, code, "%v", args)
		require.Empty(t, out, "%v: no help text on stdout", args)
		require.Regexp(t, `\nRun 'warden( [a-z-]+)* --help' for usage\.\n$`, errs, "%v", args)
	}
	code, _, errs = cli("get", "frobs")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "marquees (marquee, mq), environments (environment, env, envs)")

	code, out, errs = cli("wait", "mq", "m-3", "--for", "generation=1", "--for", "lifecycle=provisioning", "--timeout", "30s")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "generation=1, lifecycle=provisioning")
	code, out, errs = cli("wait", "env", "env-3", "--for", "desired=ready", "--timeout", "30s")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "desired=ready")
	code, _, errs = cli("wait", "marquee", "m-3", "--for", "lifecycle=destroyed", "--timeout", "2s")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `lifecycle is "provisioning", want "destroyed"`)
}
