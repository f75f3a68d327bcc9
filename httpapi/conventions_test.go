package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/httpapi"
)

// What users' tools expect of the API.

// TestOpenAPIDocumentIsLinted: what generated clients and linters
// (redocly's recommended rules) need: a license, servers with URLs, an
// operationId on every operation, unique, and the 4xx answers each
// operation gives documented by status, not only as default.
func TestOpenAPIDocumentIsLinted(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPIYAML)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	require.NotNil(t, doc.Info.License, "info.license")
	require.NotEmpty(t, doc.Info.License.Name)
	require.NotEmpty(t, doc.Servers, "servers")
	for _, s := range doc.Servers {
		require.NotEmpty(t, s.URL, "no empty server URL (no-empty-servers)")
	}
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			require.NotEmpty(t, op.OperationID, "%s: operationId", where)
			require.Empty(t, seen[op.OperationID], "%s: operationId %s also on %s", where, op.OperationID, seen[op.OperationID])
			seen[op.OperationID] = where
			if path == "/v1/openapi.json" || path == "/healthz" || path == "/readyz" { // no 4xx: 200 or 503
				continue
			}
			fourxx := 0
			for code := range op.Responses.Map() {
				if strings.HasPrefix(code, "4") {
					fourxx++
				}
			}
			require.Positive(t, fourxx, "%s documents its 4xx answers", where)
			if op.Security == nil || len(*op.Security) > 0 {
				require.NotNil(t, op.Responses.Value("401"), "%s: a secured operation documents 401", where)
			}
		}
	}
}

// TestHeadAnswersEveryGet: HEAD on every GET route answers as GET
// does, with no body (RFC 9110 section 9.1), walked from the router.
func TestHeadAnswersEveryGet(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	fill := strings.NewReplacer(":id", "m-1", ":name", "default")
	for _, r := range w.api.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		path := fill.Replace(r.Path)
		status := func(method string) (int, int) {
			req, _ := http.NewRequest(method, w.url+path, nil)
			req.Header.Set("Authorization", "Bearer "+operatorToken)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, len(b)
		}
		get, _ := status(http.MethodGet)
		head, n := status(http.MethodHead)
		require.Equal(t, get, head, "HEAD %s answers as GET does", r.Path)
		require.NotEqual(t, http.StatusMethodNotAllowed, head, r.Path)
		require.Zero(t, n, "HEAD %s has no body", r.Path)
	}
	for _, p := range []string{"/ui/login", "/ui/static/console.css"} {
		req, _ := http.NewRequest(http.MethodHead, w.url+p, nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
}

// TestAlertedCountersExistAtZero: every labelled counter an alert
// reads exists from start-up, so increase() sees the first failure.
func TestAlertedCountersExistAtZero(t *testing.T) {
	w := newWorld(t, defaultPools)
	metrics := get(t, http.DefaultClient, w.url+"/metrics")
	for _, series := range []string{
		`warden_marquee_failures_total{rule="M21"} 0`,
		`warden_marquee_failures_total{rule="M16"} 0`,
		`warden_retries_total{kind="stuck"} 0`,
		`warden_driver_seconds_count{driver="notify",outcome="error"} 0`,
		`warden_auth_rate_limited_total{surface="api"} 0`,
	} {
		require.Contains(t, metrics, series+"\n")
	}
}

// TestARemovedEnvironmentsArtifactIsShownKept: removal keeps the
// shared artifact on purpose; the console says so instead of flagging a
// mismatch. The sign-in page of a warden on make run's token says where
// that token is.
func TestARemovedEnvironmentsArtifactIsShownKept(t *testing.T) {
	w := newWorldWith(t, defaultPools, func(_ *actors.Config, o *httpapi.Options) { o.DevTokenHint = "sign in with dev-operator-token" })
	page := get(t, browserLike(), w.url+"/ui/login")
	require.Contains(t, page, `id="dev-token">sign in with dev-operator-token`)

	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Eventually(t, func() bool { return w.envView("env-1")["state"] == "ready" }, 5*time.Second, 5*time.Millisecond)
	st, _, _ = w.do("POST", "/v1/environments/env-1/remove", operatorToken, map[string]any{"reason": "merged"})
	require.Equal(t, http.StatusAccepted, st)
	require.Eventually(t, func() bool { return w.envView("env-1")["tombstone"] != nil }, 5*time.Second, 5*time.Millisecond)
	c, _ := consoleClient(t, w.url, operatorToken)
	page = get(t, c, w.url+"/ui/environments/env-1")
	row := regexp.MustCompile(`<tr class="([^"]*)"><td>artifact</td><td>[^<]*</td><td>([^<]*)</td>`).FindStringSubmatch(page)
	require.NotNil(t, row, "the artifact row")
	require.Equal(t, "kept", row[2])
	require.Empty(t, row[1], "not flagged as differing")
}
