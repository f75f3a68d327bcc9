package httpapi_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

const (
	callbackToken = "callback-secret-token"
	operatorToken = "operator-secret-token"
	githubToken   = "github-secret-token"
)

// fakeGitHub is a local stand-in for the GitHub Actions API: it records
// every workflow_dispatch the real GitHub driver sends.
type fakeGitHub struct {
	mu         sync.Mutex
	dispatches []dispatch
	status     int
	// runDetails makes it answer like a GitHub that knows
	// return_run_details (W6): 200 with the run's id and URLs.
	runDetails bool
	nextRun    uint64
	srv        *httptest.Server
	t          *testing.T
}

type dispatch struct {
	MarqueeID  string
	Generation uint64
	Action     string
	Callback   string
	// Token is the input callback_token: the run's scoped credential (T1).
	Token string
	RunID uint64
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	g := &fakeGitHub{status: http.StatusNoContent, t: t}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/repos/acme/infra/actions/workflows/terraform.yml/dispatches" || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+githubToken || r.Header.Get("Accept") != "application/vnd.github+json" ||
			r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var body struct {
			Ref        string            `json:"ref"`
			Inputs     map[string]string `json:"inputs"`
			RunDetails bool              `json:"return_run_details"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Ref != "main" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		gen, _ := strconv.ParseUint(body.Inputs["generation"], 10, 64)
		g.mu.Lock()
		defer g.mu.Unlock()
		d := dispatch{body.Inputs["marquee_id"], gen, body.Inputs["action"], body.Inputs["callback_url"], body.Inputs["callback_token"], 0}
		if g.runDetails && body.RunDetails && g.status == http.StatusNoContent {
			g.nextRun++
			d.RunID = 5_000_000_000 + g.nextRun
			g.dispatches = append(g.dispatches, d)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"workflow_run_id":%d,"run_url":"https://api.github.com/repos/acme/infra/actions/runs/%d","html_url":"https://github.com/acme/infra/actions/runs/%d"}`,
				d.RunID, d.RunID, d.RunID)
			return
		}
		g.dispatches = append(g.dispatches, d)
		w.WriteHeader(g.status)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGitHub) sent() []dispatch {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]dispatch(nil), g.dispatches...)
}

// fakeControlPlane answers the chat question per marquee: a count, or
// "unreachable" (500) or "garbage".
type fakeControlPlane struct {
	mu        sync.Mutex
	answers   map[string]string
	teardowns []string
	srv       *httptest.Server
}

func newFakeControlPlane(t *testing.T) *fakeControlPlane {
	c := &fakeControlPlane{answers: map[string]string{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) < 3 || parts[0] != "marquees" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if parts[2] == "playgrounds" {
			c.teardowns = append(c.teardowns, parts[1])
			w.WriteHeader(http.StatusNoContent)
			return
		}
		switch a := c.answers[parts[1]]; a {
		case "unreachable":
			w.WriteHeader(http.StatusBadGateway)
		case "garbage":
			_, _ = io.WriteString(w, `{"live": "many"`)
		case "":
			_, _ = io.WriteString(w, `{"live": 0, "reachable": 0}`)
		default:
			_, _ = io.WriteString(w, a)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *fakeControlPlane) set(id, answer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers[id] = answer
}

// world is one warden on loopback: the real actors, store, HTTP stack and
// GitHub driver, a fake GitHub, a fake control plane, and a real HTTPS
// endpoint the bootstrap probe verifies.
type world struct {
	t *testing.T
	// configure, if set, changes the system's and the API's configuration
	// before they start (trust tests: keys, modes, a manual clock).
	configure func(*actors.Config, *httpapi.Options)
	// beforeServe, if set, is given the server before it serves (a
	// benchmark build's floors).
	beforeServe func(*httpapi.Server, *persistence.Store)
	// storeOpts open the store (a faulty disk, a logger); zero: the real
	// disk.
	storeOpts persistence.Options
	url       string
	gh        *fakeGitHub
	cp        *fakeControlPlane
	https     *httptest.Server
	sys       *actors.System
	store     *persistence.Store
	srv       *http.Server
	dir       string
	pools     map[string]int
	preview   *fakePreview
	notify    *notifySink
	api       *httpapi.Server
}

func newWorld(t *testing.T, pools map[string]int) *world {
	return newWorldWith(t, pools, nil)
}

func newWorldWith(t *testing.T, pools map[string]int, configure func(*actors.Config, *httpapi.Options)) *world {
	return newWorldOn(t, pools, persistence.Options{}, configure)
}

func newWorldOn(t *testing.T, pools map[string]int, so persistence.Options, configure func(*actors.Config, *httpapi.Options)) *world {
	w := &world{t: t, gh: newFakeGitHub(t), cp: newFakeControlPlane(t), dir: t.TempDir(), pools: pools,
		preview: newFakePreview(), notify: newNotifySink(t), configure: configure, storeOpts: so}
	w.https = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusNotFound) }))
	t.Cleanup(w.https.Close)
	w.start()
	t.Cleanup(w.stop)
	return w
}

func (w *world) start() {
	store, err := persistence.Open(w.dir, w.storeOpts)
	require.NoError(w.t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(w.t, err)
	w.url = "http://" + ln.Addr().String()
	roots := x509.NewCertPool()
	roots.AddCert(w.https.Certificate())
	_, port, _ := net.SplitHostPort(w.https.Listener.Addr().String())
	cfg := actors.Config{
		Store:   store,
		Clock:   clock.Real{},
		Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools:   w.pools,
		Dispatcher: &driver.GitHub{APIURL: w.gh.srv.URL, Repo: "acme/infra", Workflow: "terraform.yml", Ref: "main",
			Token: githubToken, Client: w.gh.srv.Client()},
		Bootstrapper: &driver.HTTPSProbe{RootCAs: roots, Port: port, Timeout: 5 * time.Second},
		ControlPlane: &driver.HTTPControlPlane{URL: w.cp.srv.URL},
		CallbackURL:  w.url + "/v1/webhooks/terraform",
		Env: actors.EnvConfig{Drivers: w.preview.drivers(), Notifier: &driver.Webhook{Endpoint: w.notify.srv.URL}, Worker: "test-worker",
			ReconcileEvery: 20 * time.Millisecond, NotifyBackoff: 10 * time.Millisecond},
		Logger: w.storeOpts.Logger,
	}
	opts := httpapi.Options{CallbackToken: callbackToken, OperatorToken: operatorToken}
	if w.configure != nil {
		w.configure(&cfg, &opts)
	}
	sys, err := actors.Start(cfg)
	require.NoError(w.t, err)
	sys.Metrics().RegisterStorage(store.Health(), persistence.Reserve{Dir: w.dir})
	w.sys, w.store = sys, store
	w.api = httpapi.New(sys, opts)
	if w.beforeServe != nil {
		w.beforeServe(w.api, store)
	}
	srv := httpapi.NewHTTPServer("", w.api)
	w.srv = srv
	go func() { _ = httpapi.Serve(srv, ln) }()
}

func (w *world) stop() {
	if w.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A sealed store holds an actor in Pebble for good (S1): the stop is
	// bounded, as warden's own is (S3).
	done := make(chan struct{})
	go func() { w.sys.Stop(ctx); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	_ = w.srv.Shutdown(ctx)
	_ = w.store.Close()
	w.srv = nil
}

// do sends one request and decodes the JSON answer.
func (w *world) do(method, path, token string, body any, headers ...string) (int, map[string]any, []byte) {
	w.t.Helper()
	var rd io.Reader
	var sent []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		sent = b
	case string:
		sent = []byte(b)
	default:
		sent, _ = json.Marshal(b)
	}
	if body != nil {
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, w.url+path, rd)
	require.NoError(w.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(w.t, err)
	if !benchRoute(path) {
		checkAgainstSpec(w.t, req, sent, resp.StatusCode, resp.Header, raw)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, raw
}

func (w *world) create(id string) map[string]any {
	w.t.Helper()
	st, v, raw := w.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": id, "kind": "tutorial"})
	require.Equal(w.t, http.StatusCreated, st, string(raw))
	return v
}

func (w *world) callback(body map[string]any, headers ...string) (int, map[string]any) {
	w.t.Helper()
	st, v, _ := w.do("POST", "/v1/webhooks/terraform", callbackToken, body, headers...)
	return st, v
}

// result posts a callback and returns its result word, requiring 200.
func (w *world) result(body map[string]any) string {
	w.t.Helper()
	st, v := w.callback(body)
	require.Equal(w.t, http.StatusOK, st, "%v", v)
	return v["result"].(string)
}

func (w *world) view(id string) map[string]any {
	w.t.Helper()
	st, v, raw := w.do("GET", "/v1/marquees/"+id, operatorToken, nil)
	require.Equal(w.t, http.StatusOK, st, string(raw))
	return v
}

// waitFor polls the view until cond holds.
func (w *world) waitFor(id string, what string, cond func(v map[string]any) bool) map[string]any {
	w.t.Helper()
	var last map[string]any
	require.Eventually(w.t, func() bool {
		last = w.view(id)
		return cond(last)
	}, 10*time.Second, 5*time.Millisecond, "waiting for %s: %s; last view %v", id, what, last)
	return last
}

func gen(v map[string]any) uint64 { return uint64(v["generation"].(float64)) }

func lifecycleIs(l string) func(map[string]any) bool {
	return func(v map[string]any) bool { return v["lifecycle"] == l }
}

// deployedBody is a deployed callback whose free domain is the local HTTPS
// endpoint, so the real probe verifies it.
func deployedBody(id string, g uint64, host string) map[string]any {
	return map[string]any{"marquee_id": id, "verb": "deployed", "generation": g, "connection": map[string]any{
		"host": host, "port": 22, "user": "root", "ssh_private_key": "-----BEGIN OPENSSH PRIVATE KEY-----secret-key-material",
		"free_domain": "127.0.0.1", "acme_dns": map[string]any{"server_url": "https://acme-dns.example.net",
			"username": "acme-user", "password": "acme-secret-password", "subdomain": "s", "full_domain": "s.acme.example.net"}}}
}

// provisioned creates a marquee and walks it to active and provisioned.
func (w *world) provisioned(id string) uint64 {
	w.t.Helper()
	w.create(id)
	v := w.waitFor(id, "dispatched", func(v map[string]any) bool { return gen(v) > 0 })
	g := gen(v)
	require.Equal(w.t, "applied", w.result(deployedBody(id, g, "203.0.113.7")))
	w.waitFor(id, "provisioned", lifecycleIs("provisioned"))
	return g
}

// benchRoute is a benchmark build's route (httpapi/floors.go), outside
// the API and its document.
func benchRoute(path string) bool {
	return path == "/v1/webhooks/noop" || strings.HasPrefix(path, "/v1/webhooks/floor")
}
