package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// fuzzServer is a Server with every callback mode on and no actor system:
// enough to run the authentication of a request.
func fuzzServer(t testing.TB) *Server {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	keys := &trust.Keyring{Keys: []trust.Key{{ID: "k1", Secret: [32]byte{1}}}}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"keys":[]}`)) }))
	t.Cleanup(jwks.Close)
	return &Server{now: func() time.Time { return now }, modes: CallbackModes, callback: sha256.Sum256([]byte("shared-token")),
		operators: []Operator{{Name: "operator", Role: RoleOperator, TokenSHA256: sha256.Sum256([]byte("op-token"))}},
		opts: Options{CallbackToken: "shared-token", CallbackKeys: keys, CallbackTokenTTL: time.Hour,
			Webhooks: &trust.Webhooks{Secrets: [][]byte{bytes.Repeat([]byte{2}, 32)}},
			OIDC:     trust.NewOIDC(trust.OIDCConfig{Issuer: jwks.URL, Audience: "a", Repository: "r/r", WorkflowRef: "r/r/w.yml", Client: jwks.Client(), Now: func() time.Time { return now }})}}
}

// FuzzAuthenticateCallback feeds arbitrary Authorization, Standard
// Webhooks and scoped-credential headers (JWTs included) to the callback
// authentication: every request gets claims or a 400/401/403, never a
// panic, and only the exact shared token is the shared mode.
func FuzzAuthenticateCallback(f *testing.F) {
	s := fuzzServer(f)
	keys := s.opts.CallbackKeys
	f.Add("Bearer shared-token", "", "", "")
	f.Add("bearer "+trust.MintScoped(keys, "m-1", 2, time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)), "", "", "")
	f.Add("Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJpc3MiOiJ4In0.c2ln", "", "", "")
	f.Add("Bearer eyJhbGciOiJub25lIn0.e30.", "", "", "wcb1.k1.m-1.2.1.x")
	f.Add("", "1764504000", "v1,AAAA v1a,BBBB", "")
	f.Add("Bearer op-token", "", "", "")
	f.Fuzz(func(t *testing.T, authz, ts, sig, scoped string) {
		r := httptest.NewRequest("POST", "/v1/webhooks/terraform", strings.NewReader("{}"))
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if sig != "" {
			r.Header.Set("Webhook-Id", "d-1")
			r.Header.Set("Webhook-Timestamp", ts)
			r.Header.Set("Webhook-Signature", sig)
		}
		if scoped != "" {
			r.Header.Set(ScopedHeader, scoped)
		}
		c, fail := s.authenticateCallback(r, []byte("{}"))
		if fail != nil {
			require.Contains(t, []int{400, 401, 403}, answers[fail.refusal].status)
			require.NotContains(t, fail.msg, "shared-token", "a refusal never echoes a secret")
			return
		}
		require.Contains(t, CallbackModes, c.mode)
		if c.mode == ModeShared {
			tok, _, _ := bearer(r)
			require.Equal(t, "shared-token", tok)
		}
	})
}

// FuzzStrictDecode: every body either decodes or is a 400 naming what is
// wrong; a body that decodes has no repeated or unknown field.
func FuzzStrictDecode(f *testing.F) {
	f.Add([]byte(`{"reap":true}`))
	f.Add([]byte(`{"reap":true,"re\u0061p":false}`))
	f.Add([]byte(`{"REAP":true}`))
	f.Add([]byte("{\"reap\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var w struct {
			Reap bool `json:"reap"`
		}
		err := strictDecode(body, &w)
		if err != nil {
			var iv *invalid
			require.ErrorAs(t, err, &iv)
			return
		}
		require.NotContains(t, strings.ToLower(string(body)), `"reap":true,"reap"`)
	})
}

// BenchmarkCallbackAuth measures what each callback mode costs a request
// before any actor sees it: parsing the header and verifying the
// credential (T1-T3). `make bench` sets these beside the durable path's
// server CPU per request.
func BenchmarkCallbackAuth(b *testing.B) {
	s := fuzzServer(b)
	body := []byte(`{"marquee_id":"m-001","verb":"step","generation":1,"step":"vm_starting"}`)
	now := s.now()
	scoped := trust.MintScoped(s.opts.CallbackKeys, "m-001", 1, now.Add(time.Hour))
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := trust.SignV1(s.opts.Webhooks.Secrets[0], "d-1", ts, body)
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"shared", []string{"Authorization", "Bearer shared-token"}},
		{"scoped", []string{"Authorization", "Bearer " + scoped}},
		{"standard-webhooks", []string{"Webhook-Id", "d-1", "Webhook-Timestamp", ts, "Webhook-Signature", sig}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/v1/webhooks/terraform", nil)
			for i := 0; i+1 < len(tc.headers); i += 2 {
				r.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			for b.Loop() {
				c, fail := s.authenticateCallback(r, body)
				if fail != nil {
					b.Fatal(fail.msg)
				}
				if _, fail := c.bind("m-001", 1); fail != nil {
					b.Fatal(fail.msg)
				}
			}
		})
	}
}

// TestOneAnswerPerErrorKind: every kind maps to its status in one table,
// whatever package wrapped it; an error of no kind is a 500, not a 503
// that would invite a retry of a bug.
func TestOneAnswerPerErrorKind(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for err, status := range map[error]int{
		fmt.Errorf("%w: marquee m-9", errs.NotFound):           404,
		fmt.Errorf("%w: enable needs disabled", errs.Conflict): 409,
		fmt.Errorf("%w: id", errs.Invalid):                     400,
		fmt.Errorf("%w: run 7", errs.Forbidden):                403,
		fmt.Errorf("%w: d-1", errs.IdempotencyKeyReused):       409,
		fmt.Errorf("%w: 1000 waiting", errs.Overloaded):        503,
		fmt.Errorf("%w: persist", errs.Unavailable):            503,
		fmt.Errorf("ask: %w", context.DeadlineExceeded):        503,
		errors.New("pebble: something nobody classified"):      500,
		fmt.Errorf("store: %w", persistence.ErrNotFound):       404,
	} {
		rec := httptest.NewRecorder()
		s.writeErr(rec, err)
		require.Equal(t, status, rec.Code, "%v", err)
		if status == 503 {
			require.NotEmpty(t, rec.Header().Get("Retry-After"), "%v", err)
		}
	}
}
