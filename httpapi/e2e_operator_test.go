package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/httpapi"
)

// TestO1StatusAndNextInEveryView: a provisioning marquee says in words what
// it waits for and until when, and its `next` names the stuck deadline
// for what it is; no retry block appears before a retry has happened. An
// environment's view says what it is doing too.
func TestO1StatusAndNextInEveryView(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	v := w.waitFor("m-1", "dispatch observed", func(v map[string]any) bool { return gen(v) == 1 })
	require.Contains(t, v["status"], "provisioning, attempt 1 of 7 (generation 1)")
	next := v["next"].(map[string]any)
	require.Contains(t, next["what"], "stuck retry")
	require.Contains(t, next["what"], "(M21)")
	require.Nil(t, v["retry"], "the stuck deadline of a healthy attempt is `next`, not a planned retry")

	st, env, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-1", "branch": "main", "revision": "r1", "ttl": "72h"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.NotEmpty(t, env["status"])
	require.Eventually(t, func() bool { return w.envView("env-1")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	env = w.envView("env-1")
	require.Contains(t, env["status"], "ready; route generation 1 of branch main")
	require.Equal(t, "TTL ends: removal starts (E14)", env["next"].(map[string]any)["what"])
}

// TestO2FailureReasonsAreFields: a failed marquee says why as a field; an
// undelivered notification says why (no notifier configured, said once,
// never retried).
func TestO2FailureReasonsAreFields(t *testing.T) {
	w := newWorldWith(t, defaultPools, func(c *actors.Config, _ *httpapi.Options) { c.Env.Notifier = nil })
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "failed", "generation": 1, "reason": "quota exceeded"}))
	v := w.view("m-1")
	f := v["failure"].(map[string]any)
	require.Equal(t, "M15", f["rule"])
	require.Contains(t, f["reason"], "quota exceeded")
	require.EqualValues(t, 1, f["generation"])
	require.NotEmpty(t, f["at"])
	require.Equal(t, []any{"failed"}, v["classes"])

	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Eventually(t, func() bool { return w.envView("env-1")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	out := w.envView("env-1")["outbox"].([]any)[0].(map[string]any)
	require.Equal(t, false, out["delivered"])
	require.Contains(t, out["why"], "no notifier is configured")
	require.EqualValues(t, 0, out["attempts"], "nothing is tried without a notifier")
}

// TestO4ListsFilterPageAndSummarize: limit and an opaque cursor page
// through every marquee once; filters by state axis and status class;
// unknown names and values are 400; rows are summaries (no connection).
func TestO4ListsFilterPageAndSummarize(t *testing.T) {
	w := newWorld(t, map[string]int{"default": 10})
	for i := 0; i < 5; i++ {
		w.create(fmt.Sprintf("m-%d", i))
	}
	for i := 0; i < 5; i++ {
		w.waitFor(fmt.Sprintf("m-%d", i), "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	}
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-3", "verb": "failed", "generation": 1, "reason": "x"}))

	var seen []string
	cursor := ""
	for pages := 0; pages < 10; pages++ {
		path := "/v1/marquees?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		st, page, raw := w.do("GET", path, operatorToken, nil)
		require.Equal(t, http.StatusOK, st, string(raw))
		for _, it := range page["items"].([]any) {
			row := it.(map[string]any)
			seen = append(seen, row["id"].(string))
			require.NotContains(t, row, "connection", "a list row is a summary")
			require.NotEmpty(t, row["status"])
		}
		cursor, _ = page["next_cursor"].(string)
		if cursor == "" {
			break
		}
		require.False(t, strings.Contains(cursor, "m-"), "the cursor is opaque")
	}
	require.Equal(t, []string{"m-0", "m-1", "m-2", "m-3", "m-4"}, seen, "every marquee once, in order")

	_, failed, _ := w.do("GET", "/v1/marquees?status=failed", operatorToken, nil)
	require.Len(t, failed["items"], 1)
	require.Equal(t, "m-3", failed["items"].([]any)[0].(map[string]any)["id"])
	_, prov, _ := w.do("GET", "/v1/marquees?lifecycle=provisioning&kind=tutorial&pool=default", operatorToken, nil)
	require.Len(t, prov["items"], 4)

	for _, bad := range []string{"?state=ready", "?status=sleepy", "?lifecycle=bogus", "?limit=0", "?limit=1001", "?cursor=m-1", "?cursor=!!", "?limit=1&limit=2"} {
		st, v, _ := w.do("GET", "/v1/marquees"+bad, operatorToken, nil)
		require.Equal(t, http.StatusBadRequest, st, bad)
		require.Equal(t, "invalid_request", v["error"].(map[string]any)["code"], bad)
	}

	for i := 0; i < 3; i++ {
		st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": fmt.Sprintf("env-%d", i), "branch": "main", "revision": "r1"})
		require.Equal(t, http.StatusCreated, st, string(raw))
	}
	st, envs, raw := w.do("GET", "/v1/environments?limit=1", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Len(t, envs["items"], 1, "limit is honoured")
	require.NotContains(t, envs["items"].([]any)[0], "receipts", "a list row is a summary; receipts are per id")
	_, rest, _ := w.do("GET", "/v1/environments?cursor="+envs["next_cursor"].(string), operatorToken, nil)
	require.Len(t, rest["items"], 2)
	st, _, _ = w.do("GET", "/v1/environments?cursor="+cursor+"x", operatorToken, nil)
	require.Equal(t, http.StatusBadRequest, st)
	st, _, _ = w.do("GET", "/v1/environments?state=nowhere", operatorToken, nil)
	require.Equal(t, http.StatusBadRequest, st)
	require.Eventually(t, func() bool { return w.envView("env-0")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	_, one, _ := w.do("GET", "/v1/environments/env-0?receipts=2", operatorToken, nil)
	require.Len(t, one["receipts"], 2, "receipts paged behind ?receipts=N")
	require.EqualValues(t, 7, one["receipts_total"])
}

// TestO5RunNow: run-now cuts a waiting back-off short and dispatches at
// once, recorded with who asked; it is refused where no back-off waits,
// and a viewer may not ask.
func TestO5RunNow(t *testing.T) {
	w := newWorldWith(t, defaultPools, func(c *actors.Config, o *httpapi.Options) {
		c.Machine = marquee.Machine{Config: marquee.DefaultConfig()}
		c.Machine.Config.StaleAfter = 100 * time.Millisecond
		c.Machine.Config.RetryBackoff = []time.Duration{time.Hour, time.Hour}
		ops, err := httpapi.ParseOperators([]byte(fmt.Sprintf("vic viewer %x\n", sha("vic-token"))))
		require.NoError(t, err)
		o.Operators = ops
	})
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	st, v, _ := w.do("POST", "/v1/marquees/m-1/actions/run-now", operatorToken, nil)
	require.Equal(t, http.StatusConflict, st, "the first stuck wait is the workflow's time, not a back-off")
	require.Contains(t, v["error"].(map[string]any)["message"], "no back-off waiting")

	v = w.waitFor("m-1", "first stuck retry", func(v map[string]any) bool { return gen(v) == 2 })
	require.EqualValues(t, 1, v["retry"].(map[string]any)["count"])
	st, _, _ = w.do("POST", "/v1/marquees/m-1/actions/run-now", "vic-token", nil)
	require.Equal(t, http.StatusForbidden, st, "a viewer changes nothing")
	st, v, raw := w.do("POST", "/v1/marquees/m-1/actions/run-now", operatorToken, nil)
	require.Equal(t, http.StatusAccepted, st, string(raw))
	require.EqualValues(t, 3, v["generation"], "re-dispatched now, not in an hour")
	_, h, _ := w.do("GET", "/v1/marquees/m-1/history?limit=5", operatorToken, nil)
	var runNow map[string]any
	for _, e := range h["items"].([]any) {
		if e := e.(map[string]any); strings.HasPrefix(fmt.Sprint(e["detail"]), "run now") {
			runNow = e
		}
	}
	require.NotNil(t, runNow, "recorded")
	require.Equal(t, "operator", runNow["actor"], "with who asked")
	require.Eventually(t, func() bool { return len(w.gh.sent()) == 3 }, 5*time.Second, 5*time.Millisecond)
}

// syncBuf collects log lines from the actors while a test reads them.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestO11EveryTransitionIsALogLine: lifecycle changes, failures and
// operator actions (with the operator's name) are info lines, an accepted
// progress callback stays at debug, environment creation, readiness and
// removal are lines too, and no line carries a secret.
func TestO11EveryTransitionIsALogLine(t *testing.T) {
	logs := &syncBuf{}
	w := newWorldWith(t, defaultPools, func(c *actors.Config, _ *httpapi.Options) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	g := w.provisioned("m-1")
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "rebooted", "generation": g}))
	st, _, _ := w.do("POST", "/v1/marquees/m-1/disable", operatorToken, nil)
	require.Equal(t, http.StatusOK, st)
	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Eventually(t, func() bool { return w.envView("env-1")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	st, _, _ = w.do("POST", "/v1/environments/env-1/remove", operatorToken, map[string]any{"reason": "merged"})
	require.Equal(t, http.StatusAccepted, st)
	require.Eventually(t, func() bool { return w.envView("env-1")["tombstone"] != nil }, 5*time.Second, 5*time.Millisecond)

	var lines []map[string]any
	parse := func() {
		lines = nil
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			lines = append(lines, m)
		}
	}
	find := func(msg string, match func(m map[string]any) bool) map[string]any {
		for _, l := range lines {
			if l["msg"] == msg && match(l) {
				return l
			}
		}
		return nil
	}
	// The view reads the store, which has the removal once it is durable;
	// the step's log line comes just after, in the entity's turn.
	removed := func(m map[string]any) bool { return m["state"] == "resources-verified-absent -> removed" }
	require.Eventually(t, func() bool { parse(); return find("environment transition", removed) != nil }, 5*time.Second, 5*time.Millisecond)
	require.NotNil(t, find("marquee transition", func(m map[string]any) bool { return m["lifecycle"] == "provisioning -> provisioned" }), "a lifecycle change")
	disabled := find("marquee transition", func(m map[string]any) bool { return m["event"] == "Disable" })
	require.NotNil(t, disabled, "an operator action")
	require.Equal(t, "operator", disabled["operator"], "with the operator's name")
	require.Nil(t, find("marquee transition", func(m map[string]any) bool {
		return m["event"] == "Callback" && m["lifecycle"] == nil && m["result"] == "applied"
	}),
		"routine accepted callbacks stay at debug")
	for _, state := range []string{"none -> requested", "route-active -> ready", "resources-verified-absent -> removed"} {
		require.NotNil(t, find("environment transition", func(m map[string]any) bool { return m["state"] == state }), state)
	}
	require.NotNil(t, find("environment action", func(m map[string]any) bool { return m["action"] == "remove" && m["operator"] == "operator" }))
	for _, secret := range []string{operatorToken, callbackToken, githubToken, "BEGIN OPENSSH"} {
		require.NotContains(t, logs.String(), secret)
	}
}

// TestO12MetricsForAlerting: the scrape names marquees by lifecycle and
// serving, environments by state, pools, failures by rule, driver calls,
// HTTP requests by route pattern (never a raw id) and commit latency.
func TestO12MetricsForAlerting(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.provisioned("m-1")
	w.create("m-2")
	w.waitFor("m-2", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-2", "verb": "failed", "generation": 1, "reason": "x"}))
	st, _, _ := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st)
	require.Eventually(t, func() bool { return w.envView("env-1")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	st, _, body := w.do("GET", "/metrics", "", nil)
	require.Equal(t, http.StatusOK, st)
	text := string(body)
	for _, want := range []string{
		`warden_marquees{lifecycle="provisioned",serving="active"} 1`,
		`warden_marquees{lifecycle="failed",serving="errored"} 1`,
		`warden_environments{state="ready"} 1`,
		`warden_drift_open 0`,
		`warden_pool_limit{pool="default"} 1`,
		`warden_pool_reserved{pool="default"}`,
		`warden_marquee_failures_total{rule="M15"} 1`,
		`warden_driver_seconds_count{driver="dispatch",outcome="ok"}`,
		`warden_driver_seconds_count{driver="capability",outcome="ok"}`,
		`warden_http_requests_total{code="201",route="POST /v1/environments"} 1`,
		`warden_http_request_seconds_count{route="GET /v1/marquees/:id"}`,
		`warden_persist_seconds_count`,
		`warden_actors_parked 0`,
		`warden_callbacks_total{result="applied",verb="failed"} 1`,
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, `route="GET /v1/marquees/m-1"`, "routes are patterns, never ids")
}

// TestO3TombstonesStayReadable: a reaped marquee answers 200 with lifecycle
// tombstone, when and why, and its history; it is listed on request; only
// an id that never existed is 404.
func TestO3TombstonesStayReadable(t *testing.T) {
	w := newWorld(t, defaultPools)
	g := w.provisioned("m-1")
	st, _, _ := w.do("POST", "/v1/marquees/m-1/destroy", operatorToken, map[string]any{"reap": true})
	require.Equal(t, http.StatusAccepted, st)
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "destroyed", "generation": g + 1}))
	st, v, _ := w.do("GET", "/v1/marquees/m-1", operatorToken, nil)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "tombstone", v["lifecycle"])
	tomb := v["tombstone"].(map[string]any)
	require.Equal(t, "reaped after destroy", tomb["reason"])
	require.NotEmpty(t, tomb["at"])
	st, h, _ := w.do("GET", "/v1/marquees/m-1/history", operatorToken, nil)
	require.Equal(t, http.StatusOK, st)
	require.NotEmpty(t, h["items"])
	_, live, _ := w.do("GET", "/v1/marquees", operatorToken, nil)
	require.Empty(t, live["items"], "not among the live ones")
	_, tombs, _ := w.do("GET", "/v1/marquees?lifecycle=tombstone", operatorToken, nil)
	require.Len(t, tombs["items"], 1)
	st, _, _ = w.do("GET", "/v1/marquees/never-was", operatorToken, nil)
	require.Equal(t, http.StatusNotFound, st)
	// a create of the same id says it is a tombstone.
	st, v, _ = w.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, http.StatusConflict, st)
	require.Contains(t, errMessage(v), "already exists as a tombstone")
}
