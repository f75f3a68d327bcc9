package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestO17ExplainAStuckMarquee: a marquee whose workflow never calls back
// is retried six times (M21); explain then shows, through the API and the
// CLI, its retry count of six and the next retry's time, when it fails.
func TestO17ExplainAStuckMarquee(t *testing.T) {
	ok := okScript(t)
	p := startProc(t, t.TempDir()+"/data", freePort(t), "--dispatch", "exec", "--dispatch-command", ok,
		"--bootstrap", "exec", "--bootstrap-command", ok,
		"--stale-after", "20ms", "--retry-backoff", "20ms,20ms,20ms,20ms,20ms,10m")
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	var e map[string]any
	require.Eventually(t, func() bool {
		st, e = p.do("GET", "/v1/marquees/m-1/explain", "op-secret", nil)
		s, _ := e["state"].(map[string]any)
		return st == 200 && s["retry_count"] == float64(6)
	}, time.Minute, 10*time.Millisecond, "six stuck retries")
	require.Equal(t, "provisioning", e["state"].(map[string]any)["lifecycle"])
	var retry map[string]any
	for _, a := range e["awaiting"].([]any) {
		if m := a.(map[string]any); m["event"] == "timer retry" {
			retry = m
		}
	}
	require.NotNil(t, retry, "the next retry is listed: %v", e["awaiting"])
	at, err := time.Parse(time.RFC3339Nano, retry["at"].(string))
	require.NoError(t, err)
	require.Greater(t, time.Until(at), 5*time.Minute, "ten minutes after the sixth retry")
	require.Contains(t, retry["effect"], "no callback after 6 retries: failed (M21)")

	env := func(k string) string {
		return map[string]string{"WARDEN_URL": p.url, "WARDEN_OPERATOR_TOKEN": "op-secret"}[k]
	}
	var out, errs bytes.Buffer
	require.Equal(t, 0, run([]string{"explain", "marquee", "m-1"}, env, &out, &errs), errs.String())
	words := out.String()
	require.Contains(t, words, "m-1: ")
	require.Contains(t, words, "stuck retries 6")
	require.Contains(t, words, "timer retry at "+retry["at"].(string)[:len("2006-01-02T15:04")])
	require.Contains(t, words, "no callback after 6 retries: failed (M21)")
	out.Reset()
	require.Equal(t, 0, run([]string{"explain", "marquee", "m-1", "-o", "json"}, env, &out, &errs), errs.String())
	var j map[string]any
	require.NoError(t, json.NewDecoder(strings.NewReader(out.String())).Decode(&j))
	require.Equal(t, float64(6), j["state"].(map[string]any)["retry_count"])
}
