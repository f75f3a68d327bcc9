package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

func (w *world) envView(id string) map[string]any {
	w.t.Helper()
	st, v, raw := w.do("GET", "/v1/environments/"+id, operatorToken, nil)
	require.Equal(w.t, http.StatusOK, st, string(raw))
	return v
}

// TestE2EE17EnvironmentLifecycle: an environment is provisioned through its
// verified transitions to ready, announces itself once through the outbox
// (E10), is removed forward to a tombstone (E11, E12), and the view shows
// state, receipts, resources, actions and audit (E17).
func TestE2EE17EnvironmentLifecycle(t *testing.T) {
	w := newWorld(t, defaultPools)
	st, v, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{
		"id": "env-271", "branch": "feature-search", "revision": "3f2c9e1", "data": "disposable", "ttl": "72h"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Equal(t, "requested", v["state"])
	require.Eventually(t, func() bool { return w.envView("env-271")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	v = w.envView("env-271")
	require.Len(t, v["receipts"], 7, "one receipt per verified step (E4)")
	require.Eventually(t, func() bool { return len(w.notify.delivered()) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"env-271-1"}, w.notify.delivered(), "E10: one notification keyed by id and generation")
	require.Equal(t, 4, w.preview.resources(), "artifact, database, app and route exist")

	st, _, _ = w.do("POST", "/v1/environments/env-271/actions/resume", operatorToken, map[string]any{"reason": "x", "actor": "ana"})
	require.Equal(t, http.StatusConflict, st, "E16: resume is not available without a failure")
	st, _, _ = w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-271", "branch": "b", "revision": "r"})
	require.Equal(t, http.StatusConflict, st)
	st, _, _ = w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-9", "branch": "b", "revision": "r", "ttl": "forever"})
	require.Equal(t, http.StatusBadRequest, st)

	// O17: what would move it now, from its machine.
	st, x, raw := w.do("GET", "/v1/environments/env-271/explain", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, string(raw))
	var events []string
	for _, a := range x["awaiting"].([]any) {
		events = append(events, a.(map[string]any)["event"].(string))
	}
	require.Contains(t, events, "timer ttl")
	require.Contains(t, events, "operator remove")
	require.Len(t, x["because"], 7, "its verified steps")

	st, _, _ = w.do("POST", "/v1/environments/env-271/remove", operatorToken, map[string]any{"reason": "branch merged"})
	require.Equal(t, http.StatusAccepted, st)
	require.Eventually(t, func() bool { return w.envView("env-271")["tombstone"] != nil }, 5*time.Second, 5*time.Millisecond)
	v = w.envView("env-271")
	require.Equal(t, "removed", v["state"])
	require.Empty(t, v["url"], "a removed preview has no URL to open")
	require.Nil(t, v["expires_at"], "nor time left to live")
	_, x, _ = w.do("GET", "/v1/environments/env-271/explain", operatorToken, nil)
	for _, a := range x["awaiting"].([]any) {
		event := a.(map[string]any)["event"]
		require.Contains(t, []any{"reconciler finds something of it left", "notification delivered", "notification failed"}, event,
			"a tombstone waits only for a leak to be found and its news to be sent")
	}
	require.Equal(t, 1, w.preview.resources(), "only the shared artifact is left")
	_, list, _ := w.do("GET", "/v1/environments", operatorToken, nil)
	require.Len(t, list["items"], 1, "E12: the tombstone stays listed for leak audits")
	st, _, _ = w.do("GET", "/v1/environments/env-404", operatorToken, nil)
	require.Equal(t, http.StatusNotFound, st)
}

// TestE2EEnvironmentResumesFromItsRecord: a process that starts on a record
// left at data-ready (the previous one died there) wakes it through the
// wake index and resumes from the last verified state (E6): the artifact
// and database are not made again.
func TestE2EEnvironmentResumesFromItsRecord(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.stop()
	store, err := persistence.Open(w.dir, persistence.Options{})
	require.NoError(t, err)
	m := environment.Machine{Config: environment.DefaultConfig()}
	now := time.Now().UTC()
	e, err := m.New(environment.Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1}, now)
	require.NoError(t, err)
	e.State = environment.DataReady
	b := store.NewBatch()
	// As its create wrote it: the record and its wake entry (its branch's
	// generation does not matter to a resume).
	runtime.Stage(record.EnvironmentWrites{}, b, e.ID, record.Environment{}, record.Environment{Env: e, WakeAt: now}, environment.Outcome{})
	require.NoError(t, b.Commit())
	require.NoError(t, store.Close())
	w.preview.res["artifact-env-1-r1"] = ""
	w.preview.res["db-env-1"] = "env-1"
	w.preview.ledger["db-env-1"] = true

	w.start()
	require.Eventually(t, func() bool { return w.envView("env-1")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	v := w.envView("env-1")
	var caps []string
	for _, r := range v["receipts"].([]any) {
		caps = append(caps, r.(map[string]any)["capability"].(string))
	}
	require.NotEmpty(t, caps)
	for _, c := range caps {
		require.NotContains(t, []string{"artifact", "database", "migrations"}, c, "E6: resumed after the last verified state, nothing before it redone")
	}
	require.Contains(t, caps, "smoke")
}

// TestE2EReconcilerFindsDrift: E14, E15. A process removed by hand is
// noticed at rest and reprovisioned through full readiness; a route that
// advanced to a newer generation supersedes this preview, which never takes
// it back (I14); a database taken by someone else waits for an operator,
// whose outcome is audited (E16).
func TestE2EReconcilerFindsDrift(t *testing.T) {
	w := newWorld(t, defaultPools)
	st, _, _ := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-5", "branch": "main", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st)
	require.Eventually(t, func() bool { return w.envView("env-5")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)

	w.preview.mu.Lock()
	delete(w.preview.res, "app-env-5") // someone stopped the container by hand
	w.preview.mu.Unlock()
	require.Eventually(t, func() bool {
		v := w.envView("env-5")
		d, _ := v["drift"].([]any)
		return len(d) == 1 && v["state"] == "ready"
	}, 5*time.Second, 5*time.Millisecond, "repaired automatically and ready again")
	v := w.envView("env-5")
	require.Equal(t, "auto-repair", v["drift"].([]any)[0].(map[string]any)["outcome"])
	w.preview.mu.Lock()
	_, back := w.preview.res["app-env-5"]
	w.preview.mu.Unlock()
	require.True(t, back, "the application was started again")

	w.preview.mu.Lock()
	w.preview.route["main"] = 7 // a newer preview of the branch took the route
	w.preview.mu.Unlock()
	require.Eventually(t, func() bool { return w.envView("env-5")["superseded_by"] == float64(7) }, 5*time.Second, 5*time.Millisecond,
		"superseded: recorded, not drift")
	w.preview.mu.Lock()
	delete(w.preview.route, "main") // the newer preview went away
	w.preview.mu.Unlock()
	w.preview.waitObserved(t, environment.Route, w.preview.observations(environment.Route), 5) // five more rounds
	w.preview.mu.Lock()
	_, restored := w.preview.route["main"]
	w.preview.mu.Unlock()
	require.False(t, restored, "I14: a superseded preview never takes the route back")
	v = w.envView("env-5")
	require.Len(t, v["drift"], 1, "supersession is not drift")
	audit := v["audit"].([]any)
	require.Equal(t, "superseded", audit[len(audit)-1].(map[string]any)["action"])

	// A database taken over by someone else is drift an operator decides.
	w.preview.mu.Lock()
	w.preview.res["db-env-5"] = "env-99"
	w.preview.mu.Unlock()
	require.Eventually(t, func() bool {
		acts, _ := w.envView("env-5")["actions"].([]any)
		return len(acts) > 0 && acts[0] == "repair"
	}, 5*time.Second, 5*time.Millisecond, "recorded for an operator")
	w.preview.waitObserved(t, environment.Database, w.preview.observations(environment.Database), 5)
	require.Len(t, w.envView("env-5")["drift"], 2, "recorded once, not on every round")
	// O17: explained, the drift holds it and the operator's three choices
	// are what would move it.
	st, x, _ := w.do("GET", "/v1/environments/env-5/explain", operatorToken, nil)
	require.Equal(t, http.StatusOK, st)
	blocked := x["blocked_by"].([]any)
	require.Len(t, blocked, 2, "the drift, and the newer preview of its branch")
	require.Contains(t, blocked[0].(map[string]any)["what"], "drift of database db-env-5")
	require.Contains(t, blocked[0].(map[string]any)["detail"], "waits for an operator to repair, adopt or continue removal")
	var events []string
	for _, a := range x["awaiting"].([]any) {
		events = append(events, a.(map[string]any)["event"].(string))
	}
	for _, choice := range []string{"operator action repair", "operator action adopt", "operator action continue-removal"} {
		require.Contains(t, events, choice)
	}
	st, v, _ = w.do("POST", "/v1/environments/env-5/actions/adopt", operatorToken, map[string]any{"reason": "the migration owns it now", "actor": "ana"})
	require.Equal(t, http.StatusAccepted, st)
	audit = v["audit"].([]any)
	require.Equal(t, "operator", audit[len(audit)-1].(map[string]any)["actor"], "T8: the token says who acted, not the body")
}

// TestE2ENotificationRetriesAndReceipts: E10, E13. A notification endpoint
// that is down at readiness gets the same identity again until it answers;
// readiness never waits for it. Every receipt keeps its driver call's input
// and output.
func TestE2ENotificationRetriesAndReceipts(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.notify.mu.Lock()
	w.notify.failNext = 2
	w.notify.mu.Unlock()
	st, _, _ := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-8", "branch": "main", "revision": "r8"})
	require.Equal(t, http.StatusCreated, st)
	require.Eventually(t, func() bool { return w.envView("env-8")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return len(w.notify.delivered()) == 1 }, 5*time.Second, 5*time.Millisecond)
	w.notify.mu.Lock()
	require.GreaterOrEqual(t, len(w.notify.attempts), 3, "two failures, then a delivery")
	for _, k := range w.notify.attempts {
		require.Equal(t, "env-8-1", k, "the same identity on every delivery")
	}
	w.notify.mu.Unlock()
	// The sink answered; the sender's report reaches the record a moment
	// later, through the actor.
	require.Eventually(t, func() bool {
		return w.envView("env-8")["outbox"].([]any)[0].(map[string]any)["delivered"] == true
	}, 5*time.Second, 5*time.Millisecond)
	v := w.envView("env-8")
	for _, r := range v["receipts"].([]any) {
		rec := r.(map[string]any)
		require.Contains(t, rec["input"], `"identity":"`+rec["identity"].(string)+`"`, "E13: the input is kept")
		require.Contains(t, rec["output"], `"observation"`, "E13: verified by an observation, kept as output")
	}
}

// TestE2ETwoPreviewsOfOneBranch: route generations are given out per branch
// in order, so of two previews created at once the newer owns the route and
// the older never pulls it back (E8, I14).
func TestE2ETwoPreviewsOfOneBranch(t *testing.T) {
	w := newWorld(t, defaultPools)
	done := make(chan int, 2)
	for _, id := range []string{"env-a", "env-b"} {
		go func() {
			st, _, _ := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": id, "branch": "main", "revision": id})
			done <- st
		}()
	}
	require.Equal(t, http.StatusCreated, <-done)
	require.Equal(t, http.StatusCreated, <-done)
	ga, gb := w.envView("env-a")["generation"].(float64), w.envView("env-b")["generation"].(float64)
	require.ElementsMatch(t, []float64{1, 2}, []float64{ga, gb}, "one generation each, in order")
	newer := "env-a"
	if gb > ga {
		newer = "env-b"
	}
	older := map[string]string{"env-a": "env-b", "env-b": "env-a"}[newer]
	require.Eventually(t, func() bool { return w.envView(newer)["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	// The older one comes to rest too (whatever it did on the way).
	require.Eventually(t, func() bool { v := w.envView(older); return v["attempt"] == nil && v["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	w.preview.mu.Lock()
	require.EqualValues(t, 2, w.preview.route["main"], "I14: the newer generation keeps the route")
	w.preview.mu.Unlock()
}

// TestE2EUnknownEnvironmentIsNotFoundAtOnce: a removal, an
// action or a read of an environment that does not exist, or whose id is
// not even valid, is 404, never a 503 after the ask timeout.
func TestE2EUnknownEnvironmentIsNotFoundAtOnce(t *testing.T) {
	w := newWorld(t, map[string]int{"default": 1})
	for _, path := range []string{"/v1/environments/nope/remove", "/v1/environments/nope/actions/resume",
		"/v1/environments/Not_Valid/remove", "/v1/environments/Not_Valid/actions/resume"} {
		st, v, _ := w.do("POST", path, operatorToken, map[string]any{"reason": "x"})
		require.Equal(t, http.StatusNotFound, st, "%s: %v", path, v)
	}
	st, _, _ := w.do("GET", "/v1/environments/Not_Valid", operatorToken, nil)
	require.Equal(t, http.StatusNotFound, st)
}

// TestO18EnvironmentDryRunIsTheRealCommandAndChangesNothing: a dry run of
// a removal answers what the real removal then does (its state, what is
// desired, what it starts) and leaves the record as it was; an action not
// available now is refused as the real one is; a viewer and a callback
// credential may not dry-run.
func TestO18EnvironmentDryRunIsTheRealCommandAndChangesNothing(t *testing.T) {
	w := newWorld(t, defaultPools)
	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-9", "branch": "dry", "revision": "r1", "ttl": "72h"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Eventually(t, func() bool { return w.envView("env-9")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	// At rest: its readiness notification delivered, so that nothing of its
	// own changes the record between the two reads.
	require.Eventually(t, func() bool {
		out, _ := w.envView("env-9")["outbox"].([]any)
		return len(out) == 1 && out[0].(map[string]any)["delivered"] == true
	}, 5*time.Second, 5*time.Millisecond)
	before := w.envView("env-9")

	st, d, raw := w.do("POST", "/v1/environments/env-9/dry-run", operatorToken, map[string]any{"remove": map[string]any{"reason": "branch merged"}})
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Equal(t, "applied", d["result"])
	require.Contains(t, d["reason"], "removal requested: branch merged")
	require.Contains(t, d["changes"], map[string]any{"field": "state", "from": "ready", "to": "removal-requested"})
	require.Contains(t, d["changes"], map[string]any{"field": "desired", "from": "ready", "to": "removed"})
	require.NotEmpty(t, d["effects"], "it would start the route's removal")
	require.Equal(t, before, w.envView("env-9"), "the dry run changed nothing")

	st, real, raw := w.do("POST", "/v1/environments/env-9/actions/resume", operatorToken, map[string]any{"reason": "x"})
	require.Equal(t, http.StatusConflict, st, string(raw))
	st, dry, _ := w.do("POST", "/v1/environments/env-9/dry-run", operatorToken, map[string]any{"action": "resume", "reason": "x"})
	require.Equal(t, http.StatusConflict, st)
	require.Equal(t, real["error"], dry["error"], "refused as the real one is")

	st, _, _ = w.do("POST", "/v1/environments/env-9/dry-run", callbackToken, map[string]any{"remove": map[string]any{}})
	require.Equal(t, http.StatusForbidden, st, "a callback credential may not probe")
	st, _, _ = w.do("POST", "/v1/environments/env-9/dry-run", operatorToken, map[string]any{"action": "repair", "remove": map[string]any{}})
	require.Equal(t, http.StatusBadRequest, st)

	st, _, _ = w.do("POST", "/v1/environments/env-9/remove", operatorToken, map[string]any{"reason": "branch merged"})
	require.Equal(t, http.StatusAccepted, st)
	after := w.envView("env-9")
	require.Equal(t, "removed", after["desired"], "the real removal did what the dry run said")
	require.Contains(t, []string{"removal-requested", "route-detached", "application-stopped", "data-removed", "resources-verified-absent", "removed"}, after["state"])
}

// TestO17ExplainAnEnvironmentMidAttempt: an environment whose database
// apply is in flight is held by its attempt, under its worker's lease
// with its owner and expiry, and awaits the driver's answers and the
// lease's end.
func TestO17ExplainAnEnvironmentMidAttempt(t *testing.T) {
	w := newWorld(t, defaultPools)
	defer w.preview.hold(environment.Database)()
	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-7", "branch": "lease", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	var x map[string]any
	require.Eventually(t, func() bool {
		_, x, _ = w.do("GET", "/v1/environments/env-7/explain", operatorToken, nil)
		a, _ := x["state"].(map[string]any)["attempt"].(map[string]any)
		return a != nil && a["capability"] == "database"
	}, 5*time.Second, 5*time.Millisecond, "the database apply in flight")
	attempt := x["state"].(map[string]any)["attempt"].(map[string]any)
	lease := attempt["lease"].(map[string]any)
	var held map[string]any
	for _, b := range x["blocked_by"].([]any) {
		if m := b.(map[string]any); strings.HasPrefix(m["what"].(string), "attempt ") {
			held = m
		}
	}
	require.NotNil(t, held, "the attempt holds it: %v", x["blocked_by"])
	require.Contains(t, held["detail"], "apply database")
	require.Contains(t, held["detail"], "leased to "+lease["owner"].(string))
	require.Equal(t, lease["expires_at"], held["until"], "until the lease's expiry")
	var events []string
	for _, a := range x["awaiting"].([]any) {
		events = append(events, a.(map[string]any)["event"].(string))
	}
	require.Contains(t, events, "driver database apply done")
	require.Contains(t, events, "timer lease end")
}

// TestO17AnEnvironmentWithNoVerifiedStepExplainsWithAnEmptyBecause: held
// at its first step, an environment has no receipt yet; its explanation's
// because is an empty list, as the OpenAPI document says, never null (the
// schema check every request here makes fails on null).
func TestO17AnEnvironmentWithNoVerifiedStepExplainsWithAnEmptyBecause(t *testing.T) {
	w := newWorld(t, defaultPools)
	defer w.preview.hold(environment.Artifact)()
	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-8", "branch": "first", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	st, x, raw := w.do("GET", "/v1/environments/env-8/explain", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.NotNil(t, x["because"], "because is a list: %s", raw)
	require.Empty(t, x["because"])
}
