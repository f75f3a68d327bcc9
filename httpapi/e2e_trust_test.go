package httpapi_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/trust"
)

// trustWorld is a world with the trust boundary switched on: signing keys
// for scoped credentials, Standard Webhooks secrets and a key pair, a
// local OIDC issuer, a manual clock (expiry is tested by moving it), and
// the modes asked for.
type trustWorld struct {
	*world
	clk      *clock.Manual
	keys     *trust.Keyring
	secrets  [][]byte
	signer   ed25519.PrivateKey
	issuer   *localIssuer
	audience string
}

func newTrustWorld(t *testing.T, modes []string, runDetails bool, extra func(*httpapi.Options)) *trustWorld {
	tw := &trustWorld{clk: clock.NewManual(time.Now().Truncate(time.Second)), keys: &trust.Keyring{Keys: []trust.Key{trust.NewKey()}},
		issuer: newLocalIssuer(t), audience: "https://warden.test"}
	tw.secrets = [][]byte{bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	tw.signer = priv
	tw.world = newWorldWith(t, map[string]int{"default": 4}, func(cfg *actors.Config, o *httpapi.Options) {
		cfg.Clock = tw.clk
		cfg.CallbackKeys, cfg.CallbackTokenTTL = tw.keys, time.Hour
		o.CallbackModes = modes
		o.CallbackKeys, o.CallbackTokenTTL = tw.keys, time.Hour
		o.Webhooks = &trust.Webhooks{Secrets: tw.secrets, PublicKeys: []ed25519.PublicKey{pub}}
		o.OIDC = trust.NewOIDC(trust.OIDCConfig{Issuer: tw.issuer.srv.URL, Audience: tw.audience, Repository: "acme/infra",
			WorkflowRef: "acme/infra/.github/workflows/terraform.yml", Client: tw.issuer.srv.Client(), Now: tw.clk.Now})
		if extra != nil {
			extra(o)
		}
	})
	tw.gh.mu.Lock()
	tw.gh.runDetails = runDetails
	tw.gh.mu.Unlock()
	return tw
}

// dispatched waits for the dispatch of a marquee's generation and returns
// what GitHub received.
func (tw *trustWorld) dispatched(id string, g uint64) dispatch {
	tw.t.Helper()
	var d dispatch
	require.Eventually(tw.t, func() bool {
		for _, s := range tw.gh.sent() {
			if s.MarqueeID == id && s.Generation == g {
				d = s
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "dispatch of %s generation %d", id, g)
	return d
}

// post sends a callback with the given headers (no default token).
func (tw *trustWorld) post(body any, headers ...string) (int, map[string]any, []byte) {
	tw.t.Helper()
	return tw.do("POST", "/v1/webhooks/terraform", "", body, headers...)
}

func bearerOf(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func step(id string, g uint64, s string) map[string]any {
	return map[string]any{"marquee_id": id, "verb": "step", "generation": g, "step": s}
}

func errCode(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errMsg(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// TestT1ScopedCredentials dispatches through the fake GitHub API and uses
// the credential it received as the input callback_token: accepted for its
// marquee, 403 for another marquee or generation, stale after a redeploy,
// 401 once expired.
func TestT1ScopedCredentials(t *testing.T) {
	tw := newTrustWorld(t, []string{httpapi.ModeScoped}, false, nil)
	tw.create("m-1")
	tw.create("m-2")
	tok1 := tw.dispatched("m-1", 1).Token
	require.True(t, strings.HasPrefix(tok1, "wcb1."), "T1: the dispatch carries a scoped credential as an input")
	require.NotEqual(t, tok1, tw.dispatched("m-2", 1).Token, "one credential per dispatch")

	st, v, raw := tw.post(step("m-1", 1, "vm_starting"), bearerOf(tok1)...)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Equal(t, "applied", v["result"])

	st, v, _ = tw.post(step("m-2", 1, "vm_starting"), bearerOf(tok1)...)
	require.Equal(t, http.StatusForbidden, st, "T1: m-1's credential never speaks for m-2")
	require.Equal(t, "forbidden", errCode(v))
	st, _, _ = tw.post(step("m-1", 2, "vm_starting"), bearerOf(tok1)...)
	require.Equal(t, http.StatusForbidden, st, "T1: nor for another generation of m-1")
	st, _, _ = tw.post(step("m-1", 0, "vm_starting"), bearerOf(tok1)...)
	require.Equal(t, http.StatusForbidden, st, "T1: nor unversioned (M11 would let it fail open)")

	other := &trust.Keyring{Keys: []trust.Key{trust.NewKey()}}
	forged := trust.MintScoped(other, "m-1", 1, tw.clk.Now().Add(time.Hour))
	st, _, _ = tw.post(step("m-1", 1, "ssh_configuring"), bearerOf(forged)...)
	require.Equal(t, http.StatusUnauthorized, st, "a credential under a key warden does not hold")

	st, _, _ = tw.do("POST", "/v1/marquees/m-1/redeploy", operatorToken, nil)
	require.Equal(t, http.StatusAccepted, st)
	tok2 := tw.dispatched("m-1", 2).Token
	st, v, _ = tw.post(step("m-1", 1, "ssh_configuring"), bearerOf(tok1)...)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "stale", v["result"], "T1: an older, unexpired generation's credential gets what any stale callback gets")
	st, v, _ = tw.post(step("m-1", 2, "vm_starting"), bearerOf(tok2)...)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "applied", v["result"])

	_, h, _ := tw.do("GET", "/v1/marquees/m-1/history?limit=10", operatorToken, nil)
	found := false
	for _, e := range h["items"].([]any) {
		found = found || e.(map[string]any)["auth"] == "scoped"
	}
	require.True(t, found, "history records how a callback proved itself: %v", h)

	tw.clk.Advance(time.Hour + time.Second)
	st, v, _ = tw.post(step("m-1", 2, "ssh_configuring"), bearerOf(tok2)...)
	require.Equal(t, http.StatusUnauthorized, st, "T1: expired")
	require.Contains(t, errMsg(v), "expired", "the message says why")

}

// TestT2SharedTokenIsOptional: with shared off, the shared token is 401.
func TestT2SharedTokenIsOptional(t *testing.T) {
	tw := newTrustWorld(t, []string{httpapi.ModeScoped}, false, nil)
	tw.create("m-1")
	tw.dispatched("m-1", 1)
	st, v, _ := tw.post(step("m-1", 1, "vm_starting"), bearerOf(callbackToken)...)
	require.Equal(t, http.StatusUnauthorized, st)
	require.Contains(t, errMsg(v), "shared is off")
	st, _, _ = tw.post(step("m-1", 1, "vm_starting"), bearerOf(operatorToken)...)
	require.Equal(t, http.StatusForbidden, st, "an operator token is a valid token of the wrong role")

	on := newTrustWorld(t, []string{httpapi.ModeScoped, httpapi.ModeShared}, false, nil)
	on.create("m-1")
	on.dispatched("m-1", 1)
	st, v, _ = on.post(step("m-1", 1, "vm_starting"), bearerOf(callbackToken)...)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "applied", v["result"])
	st, v, _ = on.post(step("m-1", 1, "ssh_configuring"), append(bearerOf(callbackToken), httpapi.ScopedHeader, "wcb1.x")...)
	require.Equal(t, http.StatusBadRequest, st, "a scoped credential accompanies only an OIDC token, never the shared one: %v", v)

	// The shared token is known by its digest before any shape is told:
	// one shaped like a JWT or a scoped credential is still the shared
	// token, checked once, as the shared token.
	for _, shaped := range []string{"eyJhbGciOiJub25lIn0.eyJ4IjoxfQ.c2lnbmF0dXJl", "wcb1.k.m-1.1.2.mac"} {
		all := []string{httpapi.ModeScoped, httpapi.ModeShared, httpapi.ModeGitHubOIDC}
		tw := newTrustWorld(t, all, false, func(o *httpapi.Options) { o.CallbackToken = shaped })
		tw.create("m-1")
		tw.dispatched("m-1", 1)
		st, v, _ = tw.post(step("m-1", 1, "vm_starting"), bearerOf(shaped)...)
		require.Equal(t, http.StatusOK, st, "%s: %v", shaped, v)
		require.Equal(t, "applied", v["result"])
	}
}

// signedHeaders signs a body as a Standard Webhooks sender would.
func (tw *trustWorld) signedHeaders(id string, at time.Time, body []byte, sigs ...func(id, ts string, body []byte) string) []string {
	ts := strconv.FormatInt(at.Unix(), 10)
	var parts []string
	for _, s := range sigs {
		parts = append(parts, s(id, ts, body))
	}
	return []string{"Webhook-Id", id, "Webhook-Timestamp", ts, "Webhook-Signature", strings.Join(parts, " ")}
}

func (tw *trustWorld) v1(secret []byte) func(string, string, []byte) string {
	return func(id, ts string, body []byte) string { return trust.SignV1(secret, id, ts, body) }
}

func (tw *trustWorld) v1a() func(string, string, []byte) string {
	return func(id, ts string, body []byte) string { return trust.SignV1a(tw.signer, id, ts, body) }
}

// TestT3StandardWebhooks: v1 and v1a signatures, several at once and
// several secrets (rotation), the 5-minute window, tampering.
func TestT3StandardWebhooks(t *testing.T) {
	tw := newTrustWorld(t, []string{httpapi.ModeStandardWebhooks}, false, nil)
	tw.create("m-1")
	tw.dispatched("m-1", 1)
	now := tw.clk.Now()
	body, _ := json.Marshal(step("m-1", 1, "vm_starting"))
	bogus := func(string, string, []byte) string { return "v1,AAAA" }

	// The second secret of two, beside a signature that matches nothing.
	h := tw.signedHeaders("msg-1", now, body, bogus, tw.v1(tw.secrets[1]))
	st, v, raw := tw.post(body, h...)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Equal(t, "applied", v["result"])
	st, _, again := tw.post(body, h...)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, raw, again, "T3: webhook-id is the delivery id (M20): the first answer, byte for byte")

	body2, _ := json.Marshal(step("m-1", 1, "ssh_configuring"))
	st, v, _ = tw.post(body2, tw.signedHeaders("msg-2", now.Add(-4*time.Minute), body2, tw.v1a())...)
	require.Equal(t, http.StatusOK, st, "v1a (ed25519) within the window")
	require.Equal(t, "applied", v["result"])

	tampered := bytes.Replace(body2, []byte("ssh_configuring"), []byte("app_deploying"), 1)
	st, v, _ = tw.post(tampered, tw.signedHeaders("msg-3", now, body2, tw.v1(tw.secrets[0]))...)
	require.Equal(t, http.StatusUnauthorized, st, "a body changed after signing")
	require.Contains(t, errMsg(v), "no signature matches")
	for _, at := range []time.Time{now.Add(-6 * time.Minute), now.Add(6 * time.Minute)} {
		st, v, _ = tw.post(body2, tw.signedHeaders("msg-4", at, body2, tw.v1(tw.secrets[0]))...)
		require.Equal(t, http.StatusUnauthorized, st, "more than 5 minutes away")
		require.Contains(t, errMsg(v), "webhook-timestamp", "the message says which check failed")
	}
	st, _, _ = tw.post(body2, tw.signedHeaders("msg-5", now, body2, tw.v1(bytes.Repeat([]byte{9}, 32)))...)
	require.Equal(t, http.StatusUnauthorized, st, "a secret warden does not hold")
	st, _, _ = tw.post(body2, append(tw.signedHeaders("msg-6", now, body2, tw.v1(tw.secrets[0])), bearerOf(callbackToken)...)...)
	require.Equal(t, http.StatusBadRequest, st, "T7: credentials of two kinds at once")
}

// localIssuer is an OIDC issuer on loopback with its own RSA key: nothing
// reaches the internet (T4).
type localIssuer struct {
	srv    *httptest.Server
	key    *rsa.PrivateKey
	fetch  atomic.Int64
	signer jose.Signer
}

func newLocalIssuer(t *testing.T) *localIssuer {
	li := &localIssuer{}
	var err error
	li.key, err = rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	li.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: li.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	require.NoError(t, err)
	// Its discovery document puts the key set where GitHub's does not:
	// warden must follow jwks_uri, not guess the path.
	li.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": li.srv.URL, "jwks_uri": li.srv.URL + "/keys/current",
				"id_token_signing_alg_values_supported": []string{"RS256"}, "response_types_supported": []string{"id_token"},
				"subject_types_supported": []string{"public"}})
			return
		case "/keys/current":
		default:
			w.WriteHeader(http.StatusNotFound)
			return
		}
		li.fetch.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &li.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	}))
	t.Cleanup(li.srv.Close)
	return li
}

type ghClaims struct {
	jwt.Claims
	Repository     string `json:"repository"`
	WorkflowRef    string `json:"workflow_ref"`
	JobWorkflowRef string `json:"job_workflow_ref"`
	RunID          string `json:"run_id"`
}

// token mints a GitHub-shaped token; change edits its claims first.
func (li *localIssuer) token(t *testing.T, now time.Time, audience string, runID uint64, change func(*ghClaims)) string {
	c := ghClaims{Claims: jwt.Claims{Issuer: li.srv.URL, Subject: "repo:acme/infra:ref:refs/heads/main", Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute))},
		Repository: "acme/infra", WorkflowRef: "acme/infra/.github/workflows/terraform.yml@refs/heads/main",
		JobWorkflowRef: "acme/infra/.github/workflows/terraform.yml@refs/heads/main", RunID: strconv.FormatUint(runID, 10)}
	if change != nil {
		change(&c)
	}
	raw, err := jwt.Signed(li.signer).Claims(c).Serialize()
	require.NoError(t, err)
	return raw
}

// TestT4GitHubOIDC: a locally issued token is accepted for the run the
// dispatch recorded (W6), and refused with the wrong repository, audience,
// workflow, run id, or once expired. Without recorded run details the
// marquee must be named by a scoped credential as well.
func TestT4GitHubOIDC(t *testing.T) {
	tw := newTrustWorld(t, []string{httpapi.ModeGitHubOIDC, httpapi.ModeScoped}, true, nil)
	tw.create("m-1")
	run := tw.dispatched("m-1", 1).RunID
	require.NotZero(t, run)
	v := tw.waitFor("m-1", "run id recorded (W6)", func(v map[string]any) bool {
		a, _ := v["attempt"].(map[string]any)
		return a != nil && a["run_id"] == float64(run)
	})
	require.Contains(t, v["attempt"].(map[string]any)["run_url"], fmt.Sprint(run))
	now := tw.clk.Now()

	st, v, raw := tw.post(step("m-1", 1, "vm_starting"), bearerOf(tw.issuer.token(t, now, tw.audience, run, nil))...)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Equal(t, "applied", v["result"])

	for name, tc := range map[string]struct {
		aud    string
		run    uint64
		change func(*ghClaims)
		status int
	}{
		"wrong repository": {tw.audience, run, func(c *ghClaims) { c.Repository = "evil/infra" }, http.StatusUnauthorized},
		"wrong audience":   {"https://elsewhere.test", run, nil, http.StatusUnauthorized},
		"wrong workflow": {tw.audience, run, func(c *ghClaims) {
			c.WorkflowRef, c.JobWorkflowRef = "acme/infra/.github/workflows/other.yml@refs/heads/main", "acme/infra/.github/workflows/other.yml@refs/heads/main"
		}, http.StatusUnauthorized},
		"expired":      {tw.audience, run, func(c *ghClaims) { c.Expiry = jwt.NewNumericDate(now.Add(-2 * time.Minute)) }, http.StatusUnauthorized},
		"other issuer": {tw.audience, run, func(c *ghClaims) { c.Issuer = "https://token.actions.githubusercontent.com" }, http.StatusUnauthorized},
		"wrong run id": {tw.audience, run + 1, nil, http.StatusForbidden},
	} {
		st, v, _ := tw.post(step("m-1", 1, "ssh_configuring"), bearerOf(tw.issuer.token(t, now, tc.aud, tc.run, tc.change))...)
		require.Equal(t, tc.status, st, "%s: %v", name, v)
	}
	st, _, _ = tw.post(step("m-1", 2, "ssh_configuring"), bearerOf(tw.issuer.token(t, now, tw.audience, run, nil))...)
	require.Equal(t, http.StatusForbidden, st, "a run speaks only for the generation it was dispatched under")
	tampered := tw.issuer.token(t, now, tw.audience, run, nil)
	mid := len(tampered) - 40 // inside the signature, whatever its last characters are
	other := byte('A')
	if tampered[mid] == 'A' {
		other = 'B'
	}
	tampered = tampered[:mid] + string(other) + tampered[mid+1:]
	st, _, _ = tw.post(step("m-1", 1, "ssh_configuring"), bearerOf(tampered)...)
	require.Equal(t, http.StatusUnauthorized, st, "a signature that does not verify")

	// A GitHub that answers 204 without run details: the token alone does
	// not name the marquee; with the run's scoped credential it does.
	bare := newTrustWorld(t, []string{httpapi.ModeGitHubOIDC, httpapi.ModeScoped}, false, nil)
	bare.create("m-9")
	d := bare.dispatched("m-9", 1)
	bnow := bare.clk.Now()
	tok := bare.issuer.token(t, bnow, bare.audience, 777, nil)
	st, v, _ = bare.post(step("m-9", 1, "vm_starting"), bearerOf(tok)...)
	require.Equal(t, http.StatusForbidden, st)
	require.Contains(t, errMsg(v), "scoped credential as well")
	st, v, _ = bare.post(step("m-9", 1, "vm_starting"), append(bearerOf(tok), httpapi.ScopedHeader, d.Token)...)
	require.Equal(t, http.StatusOK, st, "%v", v)
	require.Equal(t, "applied", v["result"])
}

// TestT5DeliveryIDsAreScopedPerMarquee: the same delivery id for another
// marquee is another delivery; the same id with another body for the same
// marquee is 409 idempotency_key_reused and changes nothing.
func TestT5DeliveryIDsAreScopedPerMarquee(t *testing.T) {
	w := newWorld(t, map[string]int{"default": 2})
	w.create("m-1")
	w.create("m-2")
	w.waitFor("m-1", "dispatched", func(v map[string]any) bool { return gen(v) == 1 })
	w.waitFor("m-2", "dispatched", func(v map[string]any) bool { return gen(v) == 1 })

	st, v := w.callback(step("m-1", 1, "vm_starting"), "Webhook-Id", "d-shared")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "applied", v["result"])
	// The finding: a genuine deployed for another marquee under the same id
	// used to vanish. Now it is its own delivery.
	st, v = w.callback(deployedBody("m-2", 1, "203.0.113.8"), "Webhook-Id", "d-shared")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "applied", v["result"], "T5: (marquee, delivery id) is the key")
	require.Equal(t, "m-2", v["marquee_id"])

	st, v = w.callback(step("m-1", 1, "tls_provisioning"), "Webhook-Id", "d-shared")
	require.Equal(t, http.StatusConflict, st, "T5: same id, another body")
	require.Equal(t, "idempotency_key_reused", errCode(v))
	require.Equal(t, "vm_starting", w.view("m-1")["progress"], "nothing changed")
	// Counted by what the refused callback would have written: the
	// marquee's own later entries (its dispatch's run id, recorded after
	// "dispatched" is visible) may land meanwhile.
	require.Equal(t, 1, w.historyEntries("m-1", "d-shared"), "the refused callback wrote no history entry")
}

// historyEntries counts a marquee's history entries under a delivery id.
func (w *world) historyEntries(id, delivery string) int {
	w.t.Helper()
	_, h, _ := w.do("GET", "/v1/marquees/"+id+"/history?limit=200", operatorToken, nil)
	n := 0
	for _, e := range h["items"].([]any) {
		if e.(map[string]any)["delivery_id"] == delivery {
			n++
		}
	}
	return n
}

// TestT6StrictJSONAndQueries: the findings, each refused with 400 naming
// the field, and nothing acted on.
func TestT6StrictJSONAndQueries(t *testing.T) {
	w := newWorld(t, map[string]int{"default": 2})
	w.create("m-2")
	w.create("k-1")
	w.waitFor("k-1", "dispatched", func(v map[string]any) bool { return gen(v) == 1 })
	for body, field := range map[string]string{
		`{"marquee_id":"m-2","verb":"null","generation":1,"marquee_\u0069d":"k-1"}`:         "marquee_id",
		`{"MARQUEE_ID":"m-2","verb":"null","generation":1}`:                                 "MARQUEE_ID",
		`{"marquee_id":"m-2","verb":"null","generation":1,"Verb":"step"}`:                   "Verb",
		`{"marquee_id":"m-2","verb":"null","generation":"1"}`:                               "generation",
		"{\"marquee_id\":\"m-2\",\"verb\":\"failed\",\"generation\":1,\"reason\":\"\xff\"}": "reason",
		`{"marquee_id":"m-2","verb":"null","generation":1}{"x":1}`:                          "after the JSON object",
	} {
		st, v, _ := w.do("POST", "/v1/webhooks/terraform", callbackToken, body)
		require.Equal(t, http.StatusBadRequest, st, body)
		require.Equal(t, "invalid_request", errCode(v))
		require.Contains(t, errMsg(v), field, body)
	}
	require.Equal(t, "provisioning", w.view("k-1")["lifecycle"], "k-1 was never acted on")

	st, v, _ := w.do("POST", "/v1/environments", operatorToken, `{"id":"case-a","ID":"case-b","branch":"b","revision":"r1"}`)
	require.Equal(t, http.StatusBadRequest, st, "no case folding, so no second id")
	require.Contains(t, errMsg(v), "ID")
	st, _, _ = w.do("GET", "/v1/environments/case-b", operatorToken, nil)
	require.Equal(t, http.StatusNotFound, st)

	st, v, _ = w.do("POST", "/v1/marquees/m-2/redeploy", operatorToken, `{"x":1}`)
	require.Equal(t, http.StatusBadRequest, st, "operator bodies too")
	require.Contains(t, errMsg(v), "x")
	for _, q := range []string{"?lifecycle=bogus", "?kind=vm", "?colour=red", "?limit=5&limit=6"} {
		st, v, _ = w.do("GET", "/v1/marquees"+q, operatorToken, nil)
		require.Equal(t, http.StatusBadRequest, st, q)
		require.Equal(t, "invalid_request", errCode(v))
	}
	st, _, _ = w.do("GET", "/v1/pools?verbose=1", operatorToken, nil)
	require.Equal(t, http.StatusBadRequest, st, "an endpoint without parameters refuses any")
	st, _, _ = w.do("GET", "/v1/marquees?lifecycle=provisioning&limit=5", operatorToken, nil)
	require.Equal(t, http.StatusOK, st)
}

// TestT7AuthorizationHeader: the scheme is case-insensitive.
func TestT7AuthorizationHeader(t *testing.T) {
	w := newWorld(t, map[string]int{"default": 1})
	w.create("m-1")
	w.waitFor("m-1", "dispatched", func(v map[string]any) bool { return gen(v) == 1 })
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		st, _, raw := w.do("GET", "/v1/marquees/m-1", "", nil, "Authorization", scheme+" "+operatorToken)
		require.Equal(t, http.StatusOK, st, "%s: %s", scheme, raw)
		st, _, raw = w.do("POST", "/v1/webhooks/terraform", "", step("m-1", 1, "vm_starting"), "Authorization", scheme+" "+callbackToken)
		require.Equal(t, http.StatusOK, st, "%s: %s", scheme, raw)
	}
	for _, h := range []string{"Basic " + operatorToken, "Bearer", "Bearer  " + operatorToken, operatorToken} {
		st, _, _ := w.do("GET", "/v1/marquees/m-1", "", nil, "Authorization", h)
		require.Equal(t, http.StatusUnauthorized, st, h)
	}
}

// TestT8NamedOperatorsAndViewers: names come from the token and go into
// history and audit; a viewer reads and never changes.
func TestT8NamedOperatorsAndViewers(t *testing.T) {
	ops, err := httpapi.ParseOperators([]byte(fmt.Sprintf("# the team\nalice operator %x\nvic viewer %x\n", sha("alice-token"), sha("vic-token"))))
	require.NoError(t, err)
	w := newWorldWith(t, map[string]int{"default": 1}, func(_ *actors.Config, o *httpapi.Options) { o.Operators = ops })
	st, _, raw := w.do("POST", "/v1/marquees", "alice-token", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	st, _, _ = w.do("GET", "/v1/marquees/m-1", "vic-token", nil)
	require.Equal(t, http.StatusOK, st, "a viewer reads")
	st, _, _ = w.do("GET", "/v1/pools", "vic-token", nil)
	require.Equal(t, http.StatusOK, st)
	st, v, _ := w.do("POST", "/v1/marquees/m-1/redeploy", "vic-token", nil)
	require.Equal(t, http.StatusForbidden, st, "a viewer changes nothing")
	require.Contains(t, errMsg(v), "viewer")
	st, _, _ = w.do("POST", "/v1/environments", "vic-token", map[string]any{"id": "env-1", "branch": "b", "revision": "r1"})
	require.Equal(t, http.StatusForbidden, st)
	st, _, _ = w.do("POST", "/v1/marquees/m-1/redeploy", "alice-token", nil)
	require.Equal(t, http.StatusAccepted, st)
	_, h, _ := w.do("GET", "/v1/marquees/m-1/history?limit=50", "vic-token", nil)
	actors := map[string]string{}
	for _, e := range h["items"].([]any) {
		e := e.(map[string]any)
		if e["source"] == "operator" {
			actors[e["verb"].(string)], _ = e["actor"].(string)
		}
	}
	require.Equal(t, map[string]string{"create": "alice", "redeploy": "alice"}, actors, "T8: history names the operator")

	st, _, _ = w.do("POST", "/v1/environments", "alice-token", map[string]any{"id": "env-1", "branch": "b", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st)
	st, v, _ = w.do("POST", "/v1/environments/env-1/remove", "alice-token", map[string]any{"reason": "done", "actor": "mallory"})
	require.Equal(t, http.StatusAccepted, st)
	var who []string
	for _, a := range v["audit"].([]any) {
		who = append(who, a.(map[string]any)["actor"].(string)+":"+a.(map[string]any)["action"].(string))
	}
	require.Equal(t, []string{"alice:create", "alice:remove"}, who, "T8: the token says who acted, not the body")
}

func sha(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// storeDump is every key and value in the store.
func (w *world) storeDump() map[string]string {
	w.t.Helper()
	out := map[string]string{}
	require.NoError(w.t, w.store.ForEach(func(k, v []byte) error {
		out[string(k)] = string(v)
		return nil
	}))
	return out
}

// TestT12RefusalsChangeNothing sends every kind of refusal of the trust
// boundary and compares the whole store before and after: no marquee,
// pool, environment or dedup record moved.
func TestT12RefusalsChangeNothing(t *testing.T) {
	tw := newTrustWorld(t, []string{httpapi.ModeScoped, httpapi.ModeStandardWebhooks, httpapi.ModeGitHubOIDC}, true, nil)
	tw.create("m-1")
	tw.create("m-2")
	d1 := tw.dispatched("m-1", 1)
	tw.dispatched("m-2", 1)
	tw.waitFor("m-1", "run recorded", func(v map[string]any) bool {
		a, _ := v["attempt"].(map[string]any)
		return a != nil && a["run_id"] != nil
	})
	tw.waitFor("m-2", "run recorded", func(v map[string]any) bool {
		a, _ := v["attempt"].(map[string]any)
		return a != nil && a["run_id"] != nil
	})
	st, _, _ := tw.post(step("m-1", 1, "vm_starting"), append(bearerOf(d1.Token), "Webhook-Id", "d-1")...)
	require.Equal(t, http.StatusOK, st)
	st, _, _ = tw.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-1", "branch": "b", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st)
	tw.waitForEnv("env-1", "ready")
	require.Eventually(t, func() bool { // the sender's report is the last write of a ready preview (E10)
		_, v, _ := tw.do("GET", "/v1/environments/env-1", operatorToken, nil)
		out, _ := v["outbox"].([]any)
		return len(out) == 1 && out[0].(map[string]any)["delivered"] == true
	}, 10*time.Second, 5*time.Millisecond)
	before := tw.storeDump()

	now := tw.clk.Now()
	body, _ := json.Marshal(step("m-1", 1, "ssh_configuring"))
	expired := trust.MintScoped(tw.keys, "m-1", 1, now.Add(-time.Second))
	refusals := []struct {
		name   string
		body   any
		token  string
		hdr    []string
		path   string
		status int
	}{
		{"T1 another marquee", step("m-2", 1, "vm_starting"), d1.Token, nil, "", 403},
		{"T1 expired", step("m-1", 1, "ssh_configuring"), expired, nil, "", 401},
		{"T2 shared off", step("m-1", 1, "ssh_configuring"), callbackToken, nil, "", 401},
		{"T3 bad signature", body, "", tw.signedHeaders("x-1", now, body, tw.v1(bytes.Repeat([]byte{7}, 32))), "", 401},
		{"T3 old timestamp", body, "", tw.signedHeaders("x-2", now.Add(-10*time.Minute), body, tw.v1(tw.secrets[0])), "", 401},
		{"T4 wrong run", step("m-1", 1, "ssh_configuring"), tw.issuer.token(t, now, tw.audience, 42, nil), nil, "", 403},
		{"T4 wrong repository", step("m-1", 1, "ssh_configuring"), tw.issuer.token(t, now, tw.audience, d1.RunID, func(c *ghClaims) { c.Repository = "x/y" }), nil, "", 401},
		{"T5 reused id", step("m-1", 1, "tls_provisioning"), d1.Token, []string{"Webhook-Id", "d-1"}, "", 409},
		{"T6 repeated field", `{"marquee_id":"m-1","verb":"null","generation":1,"marquee_\u0069d":"m-2"}`, d1.Token, nil, "", 400},
		{"T6 unknown field", `{"marquee_id":"m-1","verb":"null","generation":1,"x":1}`, d1.Token, nil, "", 400},
		{"T7 two kinds", body, d1.Token, tw.signedHeaders("x-3", now, body, tw.v1(tw.secrets[0])), "", 400},
		{"unknown operator token", map[string]any{"id": "m-9", "kind": "tutorial"}, "nobody", nil, "/v1/marquees", 401},
		{"T6 operator body", `{"x":1}`, operatorToken, nil, "/v1/marquees/m-1/redeploy", 400},
		{"T6 env body", `{"id":"env-2","ID":"env-3","branch":"b","revision":"r"}`, operatorToken, nil, "/v1/environments", 400},
		{"T6 env action body", `{"reason":"x","reason":"y"}`, operatorToken, nil, "/v1/environments/env-1/remove", 400},
		{"callback token on operator path", map[string]any{"id": "m-9", "kind": "tutorial"}, d1.Token, nil, "/v1/marquees", 403},
		{"too large", strings.Repeat("x", httpapi.MaxBody+1), d1.Token, nil, "", 413},
	}
	for _, r := range refusals {
		path := r.path
		if path == "" {
			path = "/v1/webhooks/terraform"
		}
		st, v, _ := tw.do("POST", path, r.token, r.body, r.hdr...)
		require.Equal(t, r.status, st, "%s: %v", r.name, v)
	}
	after := tw.storeDump()
	for k, v := range before {
		require.Equal(t, v, after[k], "T12: %s changed", k)
	}
	for k := range after {
		_, ok := before[k]
		require.True(t, ok, "T12: %s was written by a refusal", k)
	}
}

// waitForEnv polls an environment until it reaches state.
func (w *world) waitForEnv(id, state string) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		_, v, _ := w.do("GET", "/v1/environments/"+id, operatorToken, nil)
		return v["state"] == state
	}, 10*time.Second, 5*time.Millisecond, "environment %s never reached %s", id, state)
}
