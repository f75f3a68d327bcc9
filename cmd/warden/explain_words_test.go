package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestO17ExplainInWordsForEachCase: `warden explain` against a real
// warden, in words, names each case the API's tests name: a refused stale
// callback with both generations, a first null pending (a second null, a
// deployed or a healthy step, the window's end), an environment's
// attempt under its worker's lease (owner and expiry), and a drift
// waiting for an operator (the three choices).
func TestO17ExplainInWordsForEachCase(t *testing.T) {
	t.Parallel() // mostly waits on the preview's slow applies
	previewDir := t.TempDir()
	ok := okScript(t)
	p := startProcEnv(t, t.TempDir()+"/data", freePort(t), []string{"WARDEN_PREVIEW_DIR=" + previewDir, "WARDEN_PREVIEW_APPLY_DELAY=1s"},
		"--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok,
		"--env-driver-command", previewDriver(t, previewDir), "--driver-env", "WARDEN_PREVIEW_DIR,WARDEN_PREVIEW_APPLY_DELAY",
		"--env-reconcile-every", "100ms")
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": p.url, "WARDEN_OPERATOR_TOKEN": "op-secret"}[k]
	}
	explain := func(args ...string) string {
		var out, errs bytes.Buffer
		require.Equal(t, 0, run(append([]string{"explain"}, args...), env, &out, &errs), errs.String())
		return out.String()
	}

	// An environment mid-attempt: each apply takes a second here.
	st, v := p.do("POST", "/v1/environments", "op-secret", map[string]any{"id": "env-d", "branch": "drift", "revision": "r1"})
	require.Equal(t, 201, st, "%v", v)
	var words string
	require.Eventually(t, func() bool {
		words = explain("environment", "env-d")
		return strings.Contains(words, "leased to ")
	}, time.Minute, 20*time.Millisecond, "an attempt in flight, held by its lease")
	require.Regexp(t, `blocked by:\n  attempt att-env-d-\d+: \w+ \w+ \S+, leased to \S+ \(lease \d+\) until its expiry; .*\(until 20\d\d-`, words)
	require.Contains(t, words, "timer lease end at ")

	// A marquee: a stale callback refused, then provisioned, then a first
	// null pending.
	st, v = p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	p.waitDispatched("m-1", 30*time.Second)
	st, v = p.do("POST", "/v1/webhooks/terraform", "cb-secret", map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 6, "step": "vm_starting"})
	require.Equal(t, 200, st)
	require.Equal(t, "stale", v["result"])
	words = explain("marquee", "m-1")
	require.Regexp(t, `refused \(newest first\):\n  \S+ callback step stale \(gen 1, received 6\): `, words)
	st, _ = p.do("POST", "/v1/webhooks/terraform", "cb-secret", deployedCallback("m-1", "key-1"))
	require.Equal(t, 200, st)
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
		return v["lifecycle"] == "provisioned"
	}, 30*time.Second, 20*time.Millisecond)
	st, v = p.do("POST", "/v1/webhooks/terraform", "cb-secret", map[string]any{"marquee_id": "m-1", "verb": "null", "generation": 1})
	require.Equal(t, 200, st)
	require.Equal(t, "pending_confirmation", v["result"])
	words = explain("marquee", "m-1")
	require.Contains(t, words, ", a first null pending until ")
	require.Regexp(t, `callback null: .*asking the control plane for live chats before downgrading`, words)
	require.Regexp(t, `callback step: .*pending null cleared`, words)
	require.Regexp(t, `callback deployed: .*pending null cleared`, words)
	require.Regexp(t, `timer null_expired at 20\d\d-\S+: .*forgotten`, words)

	// The environment ready, then its database taken over by someone
	// else: drift an operator decides.
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/environments/env-d", "op-secret", nil)
		return v["state"] == "ready"
	}, time.Minute, 50*time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(previewDir, "databases", "db-env-d", "owner"), []byte("env-99"), 0o644))
	require.Eventually(t, func() bool {
		words = explain("environment", "env-d")
		return strings.Contains(words, "drift of database db-env-d")
	}, 30*time.Second, 20*time.Millisecond, "the reconciler finds the drift")
	require.Contains(t, words, "waits for an operator to repair, adopt or continue removal (E15)")
	for _, choice := range []string{"operator action repair: ", "operator action adopt: ", "operator action continue-removal: "} {
		require.Contains(t, words, choice)
	}
}
