package httpapi_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/persistence"
)

var defaultPools = map[string]int{"default": 1}

// TestE2ESlowDeployReportsAfterRedeploy is the seed's story (M10, I1):
// deploy #1 is slow; redeploy #2 goes healthy first; then #1 reports
// deployed with a dead VM's address and is answered 200 stale.
func TestE2ESlowDeployReportsAfterRedeploy(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	v := w.waitFor("m-1", "first dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	require.Equal(t, "reserved", v["admission"].(map[string]any)["status"])
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"}))

	st, v, _ := w.do("POST", "/v1/marquees/m-1/redeploy", operatorToken, nil)
	require.Equal(t, http.StatusAccepted, st)
	require.Equal(t, uint64(2), gen(v))
	require.Eventually(t, func() bool { return len(w.gh.sent()) == 2 }, 5*time.Second, 5*time.Millisecond)
	sent := w.gh.sent()
	require.Equal(t, dispatch{"m-1", 1, "apply", w.url + "/v1/webhooks/terraform", "", 0}, sent[0])
	require.Equal(t, dispatch{"m-1", 2, "redeploy", w.url + "/v1/webhooks/terraform", "", 0}, sent[1], "I2: a fresh generation per dispatch")

	require.Equal(t, "applied", w.result(deployedBody("m-1", 2, "203.0.113.20")))
	v = w.waitFor("m-1", "provisioned", lifecycleIs("provisioned"))
	require.Equal(t, "active", v["serving"])

	st, ans := w.callback(deployedBody("m-1", 1, "203.0.113.10"))
	require.Equal(t, http.StatusOK, st, "a stale callback is answered 200 so the late workflow stops")
	require.Equal(t, "stale", ans["result"])
	require.Equal(t, float64(2), ans["generation"])
	require.Equal(t, float64(1), ans["received_generation"])
	v = w.view("m-1")
	require.Equal(t, "203.0.113.20", v["connection"].(map[string]any)["host"], "I1: the live marquee keeps generation 2's host")

	_, h, _ := w.do("GET", "/v1/marquees/m-1/history?limit=1", operatorToken, nil)
	entry := h["items"].([]any)[0].(map[string]any)
	require.Equal(t, "stale", entry["result"], "M10: the rejection is kept in history with both numbers")
	require.Equal(t, float64(2), entry["generation"])
	require.Equal(t, float64(1), entry["received_generation"])
}

// TestE2EStaleStepDoesNotRewind: M10 guards step too.
func TestE2EStaleStepDoesNotRewind(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	w.do("POST", "/v1/marquees/m-1/redeploy", operatorToken, nil)
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 2, "step": "tls_provisioning"}))
	require.Equal(t, "stale", w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"}))
	require.Equal(t, "tls_provisioning", w.view("m-1")["progress"])
}

// TestE2EGenerationZeroFailsOpen: M11; the lock still holds (M13).
func TestE2EGenerationZeroFailsOpen(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 0, "step": "ssh_configuring"}))
	require.Equal(t, "ssh_configuring", w.view("m-1")["progress"])
	require.Equal(t, "applied", w.result(deployedBody("m-1", 0, "203.0.113.7")))
	require.Equal(t, "locked", w.result(deployedBody("m-1", 0, "203.0.113.99")))
}

// TestE2ENullWhileProvisioning: M16, conclusive at once, slot released.
func TestE2ENullWhileProvisioning(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "null", "generation": 1}))
	v := w.view("m-1")
	require.Equal(t, "failed", v["lifecycle"])
	require.Equal(t, "queued", v["progress"], "M16: the progress resets to queued, and the view keeps it beside failed")
	require.Equal(t, "M16", v["failure"].(map[string]any)["rule"], "O2: why it failed, as a field")
	require.Contains(t, v["status"], "failed (generation 1)")
	require.Nil(t, v["admission"])
	_, p, _ := w.do("GET", "/v1/pools/default", operatorToken, nil)
	require.Empty(t, p["reserved"], "A5: the slot is released")
}

// TestE2ENullNeedsTwoConfirmations: M16, I4, and a healthy signal in
// between clears the first.
func TestE2ENullNeedsTwoConfirmations(t *testing.T) {
	w := newWorld(t, defaultPools)
	g := w.provisioned("m-1")
	null := map[string]any{"marquee_id": "m-1", "verb": "null", "generation": g}
	require.Equal(t, "pending_confirmation", w.result(null))
	v := w.view("m-1")
	require.Equal(t, "active", v["serving"], "I4: a single null never tears down")
	require.Equal(t, true, v["null_confirmation"].(map[string]any)["pending"])

	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "rebooted", "generation": g}))
	require.Nil(t, w.view("m-1")["null_confirmation"], "a healthy signal clears the flag")
	require.Equal(t, "pending_confirmation", w.result(null), "after a healthy signal, a null is a first one again")

	// The second null is confirmed; with no live chats it is applied.
	require.Equal(t, "checking", w.result(null))
	v = w.waitFor("m-1", "downgraded", lifecycleIs("failed"))
	require.Equal(t, "errored", v["serving"])
	require.Eventually(t, func() bool {
		w.cp.mu.Lock()
		defer w.cp.mu.Unlock()
		return len(w.cp.teardowns) == 1
	}, 5*time.Second, 5*time.Millisecond, "M16: playgrounds torn down")
}

// TestE2EVeto: M18, I3, with live chats and with an unreachable or
// garbage-speaking control plane.
func TestE2EVeto(t *testing.T) {
	for _, tc := range []struct{ name, answer, result string }{
		{"live chats", `{"live": 2, "reachable": 1}`, "vetoed"},
		// Nobody said there are live chats: the downgrade is held and
		// asked again, and history says checking, as the callback was
		// answered, not vetoed.
		{"unreachable", "unreachable", "checking"},
		{"garbage", "garbage", "checking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, defaultPools)
			g := w.provisioned("m-1")
			w.cp.set("m-1", tc.answer)
			require.Equal(t, "checking", w.result(map[string]any{"marquee_id": "m-1", "verb": "failed", "generation": g, "reason": "plan error"}))
			require.Eventually(t, func() bool {
				_, h, _ := w.do("GET", "/v1/marquees/m-1/history?limit=1", operatorToken, nil)
				e := h["items"].([]any)[0].(map[string]any)
				return e["source"] == "control_plane" && e["result"] == tc.result
			}, 5*time.Second, 5*time.Millisecond)
			v := w.view("m-1")
			require.Equal(t, "active", v["serving"], "I3: preserved")
			require.Equal(t, "provisioned", v["lifecycle"])
		})
	}
}

// TestE2EA3A4A10AdmissionThreeAtOnce: three tutorial creations at once against
// limit 1: one reserved, two queued, admitted in order as slots free (A3,
// A4, I7, I8). Each answer comes after its admission is durable (A10).
func TestE2EA3A4A10AdmissionThreeAtOnce(t *testing.T) {
	w := newWorld(t, defaultPools)
	ids := []string{"m-a", "m-b", "m-c"}
	answers := make([]map[string]any, 3)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = w.create(id)
		}()
	}
	wg.Wait()
	statuses := map[string]int{}
	for _, a := range answers {
		statuses[a["admission"].(map[string]any)["status"].(string)]++
	}
	require.Equal(t, map[string]int{"reserved": 1, "queued": 2}, statuses, "A3, I7")

	_, p, _ := w.do("GET", "/v1/pools/default", operatorToken, nil)
	require.Len(t, p["reserved"], 1)
	queued := p["queued"].([]any)
	require.Len(t, queued, 2)
	first := queued[0].(map[string]any)
	second := queued[1].(map[string]any)
	require.Less(t, first["sequence"], second["sequence"], "A4: queued in sequence order")
	holder := p["reserved"].([]any)[0].(map[string]any)["job"].(string)

	// Settle the holder; the first queued job is admitted and dispatched.
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": holder, "verb": "failed", "generation": 1, "reason": "x"}))
	next := first["job"].(string)
	w.waitFor(next, "admitted", func(v map[string]any) bool { return gen(v) == 1 })
	_, p, _ = w.do("GET", "/v1/pools/default", operatorToken, nil)
	require.Equal(t, next, p["reserved"].([]any)[0].(map[string]any)["job"], "I8: admitted in queue order")
	require.Len(t, p["queued"], 1)
	require.Equal(t, 0.0, w.view(second["job"].(string))["generation"], "the last one is still waiting, nothing dispatched")

	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": next, "verb": "null", "generation": 1}))
	w.waitFor(second["job"].(string), "admitted", func(v map[string]any) bool { return gen(v) == 1 })
}

// TestE2EDuplicateDelivery: M20. A repeated Webhook-Id gets the first answer
// byte for byte and changes nothing; a new id is a new message.
func TestE2EDuplicateDelivery(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	body := map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"}
	st1, _, raw1 := w.do("POST", "/v1/webhooks/terraform", callbackToken, body, "Webhook-Id", "delivery-1")
	require.Equal(t, 200, st1)
	w.do("POST", "/v1/marquees/m-1/redeploy", operatorToken, nil)
	st2, _, raw2 := w.do("POST", "/v1/webhooks/terraform", callbackToken, body, "Webhook-Id", "delivery-1")
	require.Equal(t, 200, st2)
	require.Equal(t, string(raw1), string(raw2), "the first answer again, byte for byte")
	require.Contains(t, string(raw2), `"result":"applied"`)
	_, _, raw3 := w.do("POST", "/v1/webhooks/terraform", callbackToken, body, "Webhook-Id", "delivery-2")
	require.Contains(t, string(raw3), `"result":"stale"`, "a different id is a new message")
	require.Equal(t, "queued", w.view("m-1")["progress"], "the duplicate changed nothing")
}

// TestE2EM20ADeliveryPastTheBoundIsANewMessage: a marquee's record keeps
// its last persistence.MaxDeliveries deliveries (M20's bound, chosen so
// that the store grows with the marquees, not the traffic). A repeat of
// one pushed out is taken as a new message: answered as what it now is
// (here a step already taken) and it moves no state, though like any
// callback of the current generation it is a sign of life (M21's timer);
// the deliveries still kept are answered byte for byte.
func TestE2EM20ADeliveryPastTheBoundIsANewMessage(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	body := map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"}
	first := map[string]string{}
	for i := range persistence.MaxDeliveries + 1 {
		id := fmt.Sprint("delivery-", i)
		st, _, raw := w.do("POST", "/v1/webhooks/terraform", callbackToken, body, "Webhook-Id", id)
		require.Equal(t, 200, st, string(raw))
		first[id] = string(raw)
	}
	require.Contains(t, first["delivery-0"], `"result":"applied"`)
	before := w.view("m-1")
	for i := 1; i <= persistence.MaxDeliveries; i++ {
		id := fmt.Sprint("delivery-", i)
		_, _, raw := w.do("POST", "/v1/webhooks/terraform", callbackToken, body, "Webhook-Id", id)
		require.Equal(t, first[id], string(raw), "%s is kept: its first answer, byte for byte", id)
	}
	st, _, raw := w.do("POST", "/v1/webhooks/terraform", callbackToken, body, "Webhook-Id", "delivery-0")
	require.Equal(t, 200, st)
	require.NotEqual(t, first["delivery-0"], string(raw), "pushed out of the record: a new message")
	require.NotContains(t, string(raw), `"result":"applied"`)
	after := w.view("m-1")
	for _, f := range []string{"state", "progress", "generation", "admission"} {
		require.Equal(t, before[f], after[f], "the repeat moved nothing (%s)", f)
	}
}

// TestE2EM9AuthAndLimits: M9 and the HTTP contract's error answers.
func TestE2EM9AuthAndLimits(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	ok := map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"}
	cases := []struct {
		name, method, path, token string
		body                      any
		headers                   []string
		status                    int
		code                      string
	}{
		{"no token", "POST", "/v1/webhooks/terraform", "", ok, nil, 401, "unauthorized"},
		{"wrong token", "POST", "/v1/webhooks/terraform", "nope", ok, nil, 401, "unauthorized"},
		{"operator token on webhook", "POST", "/v1/webhooks/terraform", operatorToken, ok, nil, 403, "forbidden"},
		{"callback token on operator API", "GET", "/v1/marquees", callbackToken, nil, nil, 403, "forbidden"},
		{"unknown field", "POST", "/v1/webhooks/terraform", callbackToken, `{"marquee_id":"m-1","verb":"step","generation":1,"step":"vm_starting","gneration":2}`, nil, 400, "invalid_request"},
		{"missing generation", "POST", "/v1/webhooks/terraform", callbackToken, `{"marquee_id":"m-1","verb":"null"}`, nil, 400, "invalid_request"},
		{"unknown verb", "POST", "/v1/webhooks/terraform", callbackToken, `{"marquee_id":"m-1","verb":"exploded","generation":1}`, nil, 400, "invalid_request"},
		{"deployed without connection", "POST", "/v1/webhooks/terraform", callbackToken, `{"marquee_id":"m-1","verb":"deployed","generation":1}`, nil, 400, "invalid_request"},
		{"not json", "POST", "/v1/webhooks/terraform", callbackToken, `{"marquee_id":`, nil, 400, "invalid_request"},
		{"too large", "POST", "/v1/webhooks/terraform", callbackToken, `{"marquee_id":"m-1","verb":"failed","generation":1,"reason":"` + strings.Repeat("x", 70<<10) + `"}`, nil, 413, "too_large"},
		{"wrong media type", "POST", "/v1/webhooks/terraform", callbackToken, ok, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"unknown marquee", "POST", "/v1/webhooks/terraform", callbackToken, map[string]any{"marquee_id": "m-404", "verb": "null", "generation": 1}, nil, 404, "not_found"},
		{"bad delivery id", "POST", "/v1/webhooks/terraform", callbackToken, ok, []string{"Webhook-Id", strings.Repeat("x", 300)}, 400, "invalid_request"},
		{"create conflict", "POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-1", "kind": "tutorial"}, nil, 409, "conflict"},
		{"enable not allowed", "POST", "/v1/marquees/m-1/enable", operatorToken, nil, nil, 409, "conflict"},
		{"bad id", "POST", "/v1/marquees", operatorToken, map[string]any{"id": "M_1", "kind": "tutorial"}, nil, 400, "invalid_request"},
		{"unknown pool", "POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-9", "kind": "tutorial", "pool": "gpu"}, nil, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, v, raw := w.do(tc.method, tc.path, tc.token, tc.body, tc.headers...)
			require.Equal(t, tc.status, st, string(raw))
			require.Equal(t, tc.code, v["error"].(map[string]any)["code"], string(raw))
			require.NotEmpty(t, v["error"].(map[string]any)["message"])
		})
	}
	require.Equal(t, "queued", w.view("m-1")["progress"], "no rejected request changed anything")
	st, _, _ := w.do("GET", "/healthz", "", nil)
	require.Equal(t, 200, st)
	st, _, _ = w.do("GET", "/readyz", "", nil)
	require.Equal(t, 200, st)
}

// TestE2ESecretsNeverAnswered: the SSH key and acme-dns secrets never appear
// in views, history, the actor list or metrics.
func TestE2ESecretsNeverAnswered(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.provisioned("m-1")
	for _, path := range []string{"/v1/marquees/m-1", "/v1/marquees", "/v1/marquees/m-1/history", "/v1/actors", "/v1/pools", "/metrics"} {
		_, _, raw := w.do("GET", path, operatorToken, nil)
		for _, secret := range []string{"secret-key-material", "acme-secret-password", "acme-user", callbackToken, githubToken} {
			require.NotContains(t, string(raw), secret, path)
		}
	}
	v := w.view("m-1")
	require.Equal(t, "[redacted]", v["connection"].(map[string]any)["ssh_private_key"])
}

// TestE2EMetrics: callbacks by verb and result, decision and persistence
// latency, and what the runtime has in flight (read when scraped).
func TestE2EMetrics(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.waitFor("m-1", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"})
	w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 9, "step": "vm_starting"})
	_, _, raw := w.do("GET", "/metrics", "", nil)
	text := string(raw)
	for _, want := range []string{
		`warden_callbacks_total{result="applied",verb="step"} 1`,
		`warden_callbacks_total{result="stale",verb="step"} 1`,
		"warden_decision_seconds_count 2",
		"warden_persist_seconds_count",
		"warden_mailbox_depth ",
		"warden_effects_in_flight ",
		"warden_internal_retries_pending 0",
	} {
		require.Contains(t, text, want)
	}
	live := regexp.MustCompile(`(?m)^warden_actors_live (\d+)$`).FindStringSubmatch(text)
	require.NotNil(t, live, "warden_actors_live is scraped")
	n, err := strconv.Atoi(live[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 2, "the marquee's actor and its pool's are live")
}

// TestE2EOperatorLifecycle: destroy with reap makes a tombstone (M7, M14):
// gone from the list, callbacks stale, the id taken.
func TestE2EOperatorLifecycle(t *testing.T) {
	w := newWorld(t, defaultPools)
	g := w.provisioned("m-1")
	st, _, _ := w.do("POST", "/v1/marquees/m-1/disable", operatorToken, nil)
	require.Equal(t, 200, st)
	st, _, _ = w.do("POST", "/v1/marquees/m-1/enable", operatorToken, nil)
	require.Equal(t, 200, st)
	st, v, _ := w.do("POST", "/v1/marquees/m-1/destroy", operatorToken, map[string]any{"reap": true})
	require.Equal(t, 202, st)
	require.Equal(t, "destroying", v["lifecycle"])
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "destroyed", "generation": g + 1}))
	// O3: the tombstone stays readable, with its history.
	st, v, _ = w.do("GET", "/v1/marquees/m-1", operatorToken, nil)
	require.Equal(t, 200, st)
	require.Equal(t, "tombstone", v["lifecycle"])
	require.Equal(t, "reaped after destroy", v["tombstone"].(map[string]any)["reason"])
	require.Contains(t, v["status"], "tombstone: reaped after destroy")
	st, h, _ := w.do("GET", "/v1/marquees/m-1/history?limit=3", operatorToken, nil)
	require.Equal(t, 200, st)
	require.Equal(t, "destroyed", h["items"].([]any)[0].(map[string]any)["verb"])
	st, _, _ = w.do("GET", "/v1/marquees/never-was", operatorToken, nil)
	require.Equal(t, 404, st, "only an id that never existed is 404")
	_, tombs, _ := w.do("GET", "/v1/marquees?lifecycle=tombstone", operatorToken, nil)
	require.Len(t, tombs["items"], 1, "tombstones are listed when asked for")
	require.Equal(t, "stale", w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": g + 1, "step": "vm_starting"}))
	_, list, _ := w.do("GET", "/v1/marquees", operatorToken, nil)
	require.Empty(t, list["items"])
	st, _, _ = w.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 409, st, "a tombstone keeps its id")

	// byo marquees: created active with their connection.
	st, v, _ = w.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "b-1", "kind": "byo",
		"connection": map[string]any{"host": "198.51.100.4", "port": 22, "user": "root", "ssh_private_key": "k"}})
	require.Equal(t, 201, st)
	require.Equal(t, "active", v["serving"])
	require.Nil(t, v["lifecycle"])
	_, list, _ = w.do("GET", "/v1/marquees?kind=byo&limit=10", operatorToken, nil)
	require.Len(t, list["items"], 1)
}

// TestE2EListPaging: GET /v1/marquees pages by id with a cursor.
func TestE2EListPaging(t *testing.T) {
	w := newWorld(t, map[string]int{"default": 10})
	for i := 0; i < 5; i++ {
		w.create(fmt.Sprintf("m-%d", i))
	}
	var seen []string
	cursor := ""
	for {
		_, page, _ := w.do("GET", "/v1/marquees?limit=2&cursor="+cursor, operatorToken, nil)
		for _, it := range page["items"].([]any) {
			seen = append(seen, it.(map[string]any)["id"].(string))
		}
		cursor = page["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	require.Equal(t, []string{"m-0", "m-1", "m-2", "m-3", "m-4"}, seen)
}

// TestE2EShutdownAnswersUnavailable: once stopping, new work is refused
// with 503 and Retry-After; health still answers.
func TestE2EShutdownAnswersUnavailable(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.sys.Stop(t.Context())
	st, v, _ := w.do("POST", "/v1/webhooks/terraform", callbackToken, map[string]any{"marquee_id": "m-1", "verb": "null", "generation": 1})
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Equal(t, "unavailable", v["error"].(map[string]any)["code"])
	req, _ := http.NewRequest("GET", w.url+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	st, _, _ = w.do("GET", "/healthz", "", nil)
	require.Equal(t, http.StatusOK, st)
}

// TestO16EveryAnswerThatIsNotAppliedSaysWhy: a callback's answer that is
// not applied, and an operator command that was ignored, carry a reason
// naming what decided it; a generation ahead of the marquee's is told
// apart from an older one in it.
func TestO16EveryAnswerThatIsNotAppliedSaysWhy(t *testing.T) {
	w := newWorld(t, defaultPools)
	g := w.provisioned("m-1")
	reason := func(body map[string]any) (string, string) {
		st, ans := w.callback(body)
		require.Equal(t, 200, st)
		r, _ := ans["reason"].(string)
		return ans["result"].(string), r
	}
	res, why := reason(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": g, "step": "vm_starting"})
	require.Equal(t, "ignored", res)
	require.Contains(t, why, "a sign of health, and no null or downgrade is pending for it to clear (M16)")
	res, why = reason(deployedBody("m-1", g+98, "203.0.113.7"))
	require.Equal(t, "stale", res)
	require.Contains(t, why, fmt.Sprintf("generation %d is ahead of the marquee's %d", g+98, g))
	st, _, _ := w.do("POST", "/v1/marquees/m-1/redeploy", operatorToken, nil)
	require.Equal(t, 202, st)
	res, why = reason(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": g, "step": "vm_starting"})
	require.Equal(t, "stale", res)
	require.Contains(t, why, fmt.Sprintf("generation %d is older than the marquee's %d: a superseded run's (M10)", g, g+1))
	st, ans := w.callback(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": g + 1, "step": "vm_starting"})
	require.Equal(t, 200, st)
	require.Equal(t, "applied", ans["result"])
	require.NotContains(t, ans, "reason", "an applied answer needs no reason")

	// An operator's disable of a disabled marquee: ignored, and why.
	// (The redeploy disabled it already.)
	st, v, _ := w.do("POST", "/v1/marquees/m-1/disable", operatorToken, nil)
	require.Equal(t, 200, st)
	require.Equal(t, "ignored", v["result"])
	require.Equal(t, "the marquee is disabled already: nothing to change (M8)", v["reason"])

	// A tombstone's callback with its own current generation is stale, and
	// the answer says it is a tombstone.
	st, v, _ = w.do("POST", "/v1/marquees/m-1/destroy", operatorToken, map[string]any{"reap": true})
	require.Equal(t, 202, st)
	cur := gen(v)
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-1", "verb": "destroyed", "generation": cur}))
	res, why = reason(deployedBody("m-1", cur, "203.0.113.7"))
	require.Equal(t, "stale", res)
	require.Contains(t, why, "the marquee is a tombstone")
}

// TestO17ExplainAMarquee: GET /v1/marquees/{id}/explain says why a
// marquee is where it is (its changes, oldest first), what moves it now
// (from its machine), what holds it (its pool: its place and the holder)
// and what it refused (a stale callback with both generations).
func TestO17ExplainAMarquee(t *testing.T) {
	w := newWorld(t, map[string]int{"default": 1})
	w.create("m-1")
	g := gen(w.waitFor("m-1", "dispatched", func(v map[string]any) bool { return gen(v) > 0 }))
	require.Equal(t, "stale", w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": g + 5, "step": "vm_starting"}))
	w.create("m-2") // queued behind m-1, which holds the only slot while it provisions
	w.waitFor("m-2", "queued", func(v map[string]any) bool {
		a, _ := v["admission"].(map[string]any)
		return a != nil && a["status"] == "queued"
	})

	st, e, _ := w.do("GET", "/v1/marquees/m-1/explain", operatorToken, nil)
	require.Equal(t, 200, st)
	require.NotEmpty(t, e["summary"])
	require.Equal(t, "provisioning", e["state"].(map[string]any)["lifecycle"])
	because := e["because"].([]any)
	require.Equal(t, "create", because[0].(map[string]any)["event"], "oldest first, from the create")
	refused := e["refused"].([]any)
	require.NotEmpty(t, refused)
	r := refused[0].(map[string]any)
	require.Equal(t, "stale", r["result"])
	require.EqualValues(t, g, r["generation"])
	require.EqualValues(t, g+5, r["received_generation"])
	require.Contains(t, r["reason"], "is ahead of the marquee's")
	var names []string
	for _, a := range e["awaiting"].([]any) {
		names = append(names, a.(map[string]any)["event"].(string))
	}
	require.Contains(t, names, "callback deployed", "the workflow's report of its host")
	require.Contains(t, names, "timer retry", "the stuck retry, with its time")

	st, e, _ = w.do("GET", "/v1/marquees/m-2/explain", operatorToken, nil)
	require.Equal(t, 200, st)
	blocked := e["blocked_by"].([]any)
	require.Len(t, blocked, 1)
	require.Contains(t, blocked[0].(map[string]any)["detail"], "queued 1 of 1 in pool default (limit 1), held by [m-1]")

	st, _, _ = w.do("GET", "/v1/marquees/never-was/explain", operatorToken, nil)
	require.Equal(t, 404, st)

	// The pool: who holds its slot, who waits, what each release or a new
	// ask would do (stepped on a copy: the pool is unchanged after).
	st, e, raw := w.do("GET", "/v1/pools/default/explain", operatorToken, nil)
	require.Equal(t, 200, st, string(raw))
	require.Equal(t, "pool default: 1 of 1 slots held (m-1); 1 waiting, m-2 next", e["summary"])
	awaiting := e["awaiting"].([]any)
	require.Len(t, awaiting, 3)
	require.Equal(t, "release by m-1", awaiting[0].(map[string]any)["event"])
	require.Contains(t, awaiting[0].(map[string]any)["effect"], "frees m-1's slot and admits m-2")
	require.Equal(t, "release by m-2", awaiting[1].(map[string]any)["event"])
	require.Contains(t, awaiting[1].(map[string]any)["effect"], "m-2 leaves the queue (place 1 of 1)")
	require.Contains(t, awaiting[2].(map[string]any)["effect"], "queued at sequence 3, behind 1 waiting")
	require.Contains(t, e["blocked_by"].([]any)[0].(map[string]any)["detail"], "waits 1 of 1 for a slot held by m-1")
	_, pool, _ := w.do("GET", "/v1/pools/default", operatorToken, nil)
	require.Len(t, pool["queued"], 1, "explaining changed nothing")
	st, _, _ = w.do("GET", "/v1/pools/never-was/explain", operatorToken, nil)
	require.Equal(t, 404, st)
}

// TestO17ExplainAPendingNull: a provisioned marquee with a first null
// pending is explained with what would move it: a second null asks the
// control plane before downgrading, a healthy step or a deployed clears
// it, and the window's end forgets it, at its time.
func TestO17ExplainAPendingNull(t *testing.T) {
	w := newWorld(t, defaultPools)
	g := w.provisioned("m-1")
	require.Equal(t, "pending_confirmation", w.result(map[string]any{"marquee_id": "m-1", "verb": "null", "generation": g}))
	st, e, raw := w.do("GET", "/v1/marquees/m-1/explain", operatorToken, nil)
	require.Equal(t, 200, st, string(raw))
	effects := map[string]string{}
	at := map[string]any{}
	for _, a := range e["awaiting"].([]any) {
		m := a.(map[string]any)
		effects[m["event"].(string)] = m["effect"].(string)
		at[m["event"].(string)] = m["at"]
	}
	require.Contains(t, effects["callback null"], "asking the control plane for live chats before downgrading")
	require.Contains(t, effects["callback step"], "pending null cleared")
	require.Contains(t, effects["callback deployed"], "pending null cleared")
	require.Contains(t, effects["timer null_expired"], "first null was never confirmed; forgotten")
	require.Equal(t, e["state"].(map[string]any)["null_pending_until"], at["timer null_expired"], "at the window's end")
}

// TestO18DryRunAnswersAsTheRealCallbackAndChangesNothing: a dry run of a
// stale, a duplicate and a second-null callback answers as the real one
// then does, and leaves the record, the history and the delivery ids as
// they were; a callback credential may not dry-run.
func TestO18DryRunAnswersAsTheRealCallbackAndChangesNothing(t *testing.T) {
	w := newWorld(t, defaultPools)
	g := w.provisioned("m-1")
	snapshot := func() (map[string]any, int) {
		_, h, _ := w.do("GET", "/v1/marquees/m-1/history?limit=200", operatorToken, nil)
		v := w.view("m-1")
		delete(v, "next") // its times are read at the request's
		return v, len(h["items"].([]any))
	}
	dry := func(body map[string]any, delivery string) map[string]any {
		var headers []string
		if delivery != "" {
			headers = []string{"Webhook-Id", delivery}
		}
		st, a, raw := w.do("POST", "/v1/marquees/m-1/dry-run", operatorToken, body, headers...)
		require.Equal(t, 200, st, string(raw))
		return a
	}
	real := func(body map[string]any, delivery string) map[string]any {
		st, a := w.callback(body, "Webhook-Id", delivery)
		require.Equal(t, 200, st)
		return a
	}

	stale := map[string]any{"marquee_id": "m-1", "verb": "step", "generation": g + 3, "step": "vm_starting"}
	null := map[string]any{"marquee_id": "m-1", "verb": "null", "generation": g}
	for _, c := range []struct {
		name     string
		body     map[string]any
		delivery string
	}{{"stale", stale, "d-stale"}, {"first null", null, "d-null-1"}, {"second null", null, "d-null-2"}} {
		view, n := snapshot()
		d := dry(c.body, c.delivery)
		after, m := snapshot()
		require.Equal(t, view, after, "%s: the record as it was", c.name)
		require.Equal(t, n, m, "%s: the history as it was", c.name)
		r := real(c.body, c.delivery)
		require.False(t, r["result"] == "duplicate", "%s: the dry run consumed no delivery id", c.name)
		require.Equal(t, r["result"], d["result"], c.name)
		require.Equal(t, r["reason"], d["reason"], c.name)
		require.Equal(t, r, d["reply"], c.name)
	}
	// The duplicate: the real one's delivery id again answers as its repeat.
	d := dry(stale, "d-stale")
	require.Equal(t, true, d["duplicate"])
	require.Equal(t, real(stale, "d-stale"), d["reply"])

	st, _, _ := w.do("POST", "/v1/marquees/m-1/dry-run", callbackToken, stale)
	require.Equal(t, 403, st, "a workflow cannot probe")
}

// TestTheServerServesNoBenchmarkRoute: a server built without -tags
// benchfloor (every production build) has no benchmark route.
func TestTheServerServesNoBenchmarkRoute(t *testing.T) {
	w := newWorld(t, defaultPools)
	for _, path := range []string{"/v1/webhooks/noop", "/v1/webhooks/floor", "/v1/webhooks/floor-records"} {
		code, _, _ := w.do(http.MethodPost, path, callbackToken, `{"x":1}`)
		require.Equal(t, http.StatusNotFound, code, path)
	}
}
