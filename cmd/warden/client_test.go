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

	code, out, _ = cli("history", "m-1", "--limit", "5")
	require.Equal(t, 0, code)
	require.Contains(t, out, "slot reserved in pool default")

	code, out, errs = cli("disable", "m-1")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "m-1: provisioning")

	code, _, errs = cli("run-now", "m-1")
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
