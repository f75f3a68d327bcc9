package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/httpapi"
)

var (
	specOnce   sync.Once
	spec       *openapi3.T
	specRouter routers.Router
	specErr    error
)

// loadSpec loads and validates the served OpenAPI document once.
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		spec, specErr = loader.LoadFromData(httpapi.OpenAPIYAML)
		if specErr != nil {
			return
		}
		if specErr = spec.Validate(context.Background()); specErr != nil {
			return
		}
		spec.Servers = nil // match any host: the tests listen on a random port
		specRouter, specErr = legacy.NewRouter(spec)
	})
	require.NoError(t, specErr, "openapi.yaml")
	return spec, specRouter
}

// TestO10EveryRouteIsDescribed walks the router's routes: each is in the
// document with its method, and the document describes no route the
// router does not serve; the document is OpenAPI 3.1 and is served as
// JSON without a token.
func TestO10EveryRouteIsDescribed(t *testing.T) {
	doc, _ := loadSpec(t)
	require.True(t, doc.IsOpenAPI31OrLater() && !doc.IsOpenAPI32OrLater(), "OpenAPI 3.1")
	w := newWorld(t, defaultPools)
	api := w.api
	described := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, r := range api.Routes() {
		key := r.Method + " " + openAPIPath(r.Path)
		served[key] = true
		require.True(t, described[key], "%s is served but not in openapi.yaml", key)
	}
	for key := range described {
		require.True(t, served[key], "%s is in openapi.yaml but not served", key)
	}
	st, body, raw := w.do("GET", "/v1/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "3.1.0", body["openapi"], string(raw[:min(len(raw), 80)]))
}

// openAPIPath turns httprouter's :name into OpenAPI's {name}.
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

// checkAgainstSpec validates one exchange the end-to-end tests made (O10):
// a request the document allows must get an answer the document
// describes; a request it refuses must have been refused by the server
// too (4xx).
func checkAgainstSpec(t *testing.T, req *http.Request, body []byte, status int, header http.Header, answer []byte) {
	t.Helper()
	_, router := loadSpec(t)
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		require.True(t, status == http.StatusNotFound || status == http.StatusMethodNotAllowed,
			"%s %s is not in openapi.yaml but was answered %d", req.Method, req.URL.Path, status)
		return
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		require.True(t, status >= 400 && status < 500, "%s %s breaks openapi.yaml (%v) but was answered %d", req.Method, req.URL.Path, err, status)
		return
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: opts}
	out.SetBodyBytes(answer)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out), "%s %s answered %d: %s", req.Method, req.URL.Path, status, answer)
}
