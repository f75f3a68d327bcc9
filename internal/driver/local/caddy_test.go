package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/internal/testports"
)

// caddy is a real Caddy (Debian's caddy) started for one test, its
// config and autosave under the test's directory.
type caddy struct {
	t            *testing.T
	dir          string
	admin, proxy string
	cmd          *exec.Cmd
}

func freeAddr(t *testing.T) string {
	addr, err := testports.StablePort()
	require.NoError(t, err)
	return addr
}

func startCaddy(t *testing.T) *caddy {
	if _, err := exec.LookPath("caddy"); err != nil {
		t.Fatal("caddy is not installed (Debian: apt-get install -y caddy)")
	}
	c := &caddy{t: t, dir: t.TempDir(), admin: freeAddr(t), proxy: freeAddr(t)}
	cfg := map[string]any{"admin": map[string]any{"listen": c.admin}, "apps": map[string]any{"http": map[string]any{"servers": map[string]any{
		"previews": map[string]any{"listen": []string{c.proxy}, "routes": []any{}, "automatic_https": map[string]any{"disable": true}}}}}}
	b, _ := json.Marshal(cfg)
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "caddy.json"), b, 0o600))
	c.run("--config", filepath.Join(c.dir, "caddy.json"))
	t.Cleanup(c.stop)
	return c
}

// run starts caddy with args and waits for its admin API.
func (c *caddy) run(args ...string) {
	c.cmd = exec.Command("caddy", append([]string{"run"}, args...)...)
	c.cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(c.dir, "config"), "XDG_DATA_HOME="+filepath.Join(c.dir, "data"))
	log, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("caddy-%d.log", time.Now().UnixNano())))
	require.NoError(c.t, err)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	require.NoError(c.t, c.cmd.Start())
	require.Eventually(c.t, func() bool {
		resp, err := http.Get("http://" + c.admin + "/config/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "caddy's admin API answers")
}

func (c *caddy) stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(os.Interrupt)
		_ = c.cmd.Wait()
		c.cmd = nil
	}
}

// app is a preview's application standing in for its container: it
// answers /healthz with its identity and its database reachable (P6,
// P13); its generation is its environment's number (env-2: 2).
func app(t *testing.T, env, revision string) string {
	gen, _ := strconv.ParseUint(strings.TrimPrefix(env, "env-"), 10, 64)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(health{Environment: env, Revision: revision, Generation: gen, Dependencies: map[string]string{"database": "ok"}})
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func routesOn(c *caddy, upstreams map[string]string) *Routes {
	return &Routes{Admin: "http://" + c.admin, Server: "previews", Public: c.proxy, Domain: "localhost",
		Upstream: func(env string) (string, error) {
			if u, ok := upstreams[env]; ok {
				return u, nil
			}
			return "", fmt.Errorf("no application for %s", env)
		}}
}

func route(t *testing.T, d *Routes, op, env string, gen, expected uint64, capability ...string) driver.CapabilityResult {
	t.Helper()
	cp := "route"
	if len(capability) > 0 {
		cp = capability[0]
	}
	res, err := d.Do(context.Background(), driver.CapabilityRequest{Capability: cp, Op: op, EnvID: env, Branch: "feature-x",
		Generation: gen, ExpectedRoute: expected, Revision: "rev-" + env})
	require.NoError(t, err)
	return res
}

// TestP7P8TheRouteMovesOnlyForwardByCompareAndSet: a branch's route is set
// for a generation over its predecessor, never over a newer one; removal
// touches only this generation's; the smoke check through Caddy says who
// answers (P8, E8, I14).
func TestP7P8TheRouteMovesOnlyForwardByCompareAndSet(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1"), "env-2": app(t, "env-2", "rev-env-2")})

	require.False(t, route(t, d, "observe", "env-1", 1, 0).Observation.Exists)
	res := route(t, d, "apply", "env-1", 1, 0)
	require.True(t, res.OK, res.Message)
	require.Equal(t, uint64(1), res.Observation.RouteTarget)
	require.True(t, res.Observation.Matches)
	require.Equal(t, "http://feature-x.localhost:"+strings.Split(c.proxy, ":")[1]+"/", res.Observation.URL)
	smoke := route(t, d, "observe", "env-1", 1, 0, "smoke").Observation
	require.True(t, smoke.Exists && smoke.Matches, smoke.Detail)
	require.Equal(t, uint64(1), smoke.RouteTarget)

	res = route(t, d, "apply", "env-2", 2, 1)
	require.Equal(t, uint64(2), res.Observation.RouteTarget)
	require.Equal(t, "env-2", res.Observation.Owner)

	res = route(t, d, "apply", "env-1", 1, 0)
	require.Equal(t, uint64(2), res.Observation.RouteTarget, "I14: an older generation never takes the route back")
	require.Equal(t, "env-2", route(t, d, "observe", "env-1", 1, 0, "smoke").Observation.Owner)
	require.False(t, route(t, d, "observe", "env-1", 1, 0, "smoke").Observation.Matches, "the host name answers for the newer preview")

	res = route(t, d, "remove", "env-1", 1, 0)
	require.True(t, res.Observation.Exists, "E11: the newer generation's route is not the older one's to remove")
	res = route(t, d, "remove", "env-2", 2, 1)
	require.False(t, res.Observation.Exists)
	require.False(t, route(t, d, "observe", "env-2", 2, 1, "smoke").Observation.Exists, "nothing answers once detached")
}

// TestP7AWriteThatRacesAnotherChangeIsRefused: the write carries the
// ETag of what was read; a change in between makes Caddy refuse it (412)
// and the driver reads and decides again.
func TestP7AWriteThatRacesAnotherChangeIsRefused(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1"), "env-2": app(t, "env-2", "rev-env-2")})
	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	stale, err := d.read(context.Background(), "feature-x")
	require.NoError(t, err)
	require.True(t, route(t, d, "apply", "env-2", 2, 1).OK) // lands between the read and the write
	ok, err := d.write(context.Background(), driver.CapabilityRequest{EnvID: "env-1", Branch: "feature-x", Generation: 1}, "127.0.0.1:1", false, stale)
	require.NoError(t, err)
	require.False(t, ok, "Caddy refuses a write under a stale ETag")
	require.Equal(t, uint64(2), route(t, d, "observe", "env-2", 2, 1).Observation.RouteTarget)
}

// TestP10ARouteEditedByHandIsSeen: pointed elsewhere through the admin
// API at the same generation, the route is observed as it now is: its
// upstream is the provider id, which is no longer the one warden wrote
// (the controller compares them: drift, E15, P14).
func TestP10ARouteEditedByHandIsSeen(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	written := route(t, d, "apply", "env-1", 1, 0).Observation
	require.True(t, written.Matches)
	req, _ := http.NewRequest(http.MethodPatch, "http://"+c.admin+"/id/preview-feature-x/handle/1/upstreams/0/dial", strings.NewReader(`"127.0.0.1:9"`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	obs := route(t, d, "observe", "env-1", 1, 0).Observation
	require.True(t, obs.Exists)
	require.Equal(t, uint64(1), obs.RouteTarget)
	require.Equal(t, "127.0.0.1:9", obs.ProviderID, obs.Detail)
	require.NotEqual(t, written.ProviderID, obs.ProviderID)
	require.Equal(t, written.ProviderID, route(t, d, "apply", "env-1", 1, 0).Observation.ProviderID, "applying again puts it back")
}

// TestP17AHostWithNoPreviewAnswers404: Caddy answers a host no preview
// route matches, and a removed preview's host, with a 404 page naming the
// host, saying no preview is there and linking to warden's console: never
// an empty 200 that looks like a page that works. A route added later
// still goes before the catch-all.
func TestP17AHostWithNoPreviewAnswers404(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	d.Console = "http://127.0.0.1:8080/ui/environments"
	// A connection per request: Caddy replaces its server at each config
	// change, and a kept-alive connection may still be answered by the
	// one before it (a removed route served once more, under load).
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+c.proxy+"/", nil)
		req.Host = host
		resp, err := fresh.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.NoError(t, d.EnsureFallback(context.Background()))
	require.NoError(t, d.EnsureFallback(context.Background()), "once is enough")
	for _, host := range []string{"nothing-here.localhost", "feature-x.localhost"} {
		status, page := get(host)
		require.Equal(t, http.StatusNotFound, status, host)
		require.Contains(t, page, "No preview here")
		require.Contains(t, page, "<code>"+host+"</code>")
		require.Contains(t, page, `<a href="http://127.0.0.1:8080/ui/environments">`)
	}
	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	status, page := get("feature-x.localhost")
	require.Equal(t, http.StatusOK, status, "the preview's route goes before the catch-all: %s", page)
	require.True(t, route(t, d, "remove", "env-1", 1, 0).OK)
	status, page = get("feature-x.localhost")
	require.Equal(t, http.StatusNotFound, status, "a removed preview's host: %s", page)
	require.Contains(t, page, "No preview here")
	var routes []map[string]any
	resp, err := http.Get("http://" + c.admin + "/config/apps/http/servers/previews/routes")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&routes))
	resp.Body.Close()
	require.Len(t, routes, 1, "one catch-all, however often it was ensured")
}

// TestP7ACaddyRestartKeepsItsRoutes: Caddy saves every change; started
// again with --resume it serves the same routes.
func TestP7ACaddyRestartKeepsItsRoutes(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	c.stop()
	c.run("--resume")
	obs := route(t, d, "observe", "env-1", 1, 0).Observation
	require.True(t, obs.Exists && obs.Matches)
	require.True(t, route(t, d, "observe", "env-1", 1, 0, "smoke").Observation.Matches)
}

// TestP10ACaddyRestartedWithoutItsConfigIsSeen: a Caddy started afresh
// (not resumed) has no route for the branch, and observe says so (E14).
func TestP10ACaddyRestartedWithoutItsConfigIsSeen(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	c.stop()
	c.run("--config", filepath.Join(c.dir, "caddy.json"))
	require.False(t, route(t, d, "observe", "env-1", 1, 0).Observation.Exists)
	require.False(t, route(t, d, "observe", "env-1", 1, 0, "smoke").Observation.Exists)
}

// TestP19ARouteIsReadAsItselfWhileOthersAreInsertedBeforeIt: Caddy resolves
// an @id to the route's position in the server's list outside its lock,
// so a route inserted before another moves it between the resolution and
// the read or write. Found by CI: two previews activated together, one's
// activation was read back as the other's route (same generation, another
// environment and upstream), recorded as its own, and taken for route
// drift after a restart. Here previews activate and are removed together,
// round after round, each route inserted at the head of the list: every
// answer names its own environment and upstream, and every write lands on
// its own route.
func TestP19ARouteIsReadAsItselfWhileOthersAreInsertedBeforeIt(t *testing.T) {
	c := startCaddy(t)
	const previews, rounds = 6, 20
	ups := map[string]string{}
	for i := range previews {
		env := fmt.Sprintf("env-%d", i+1)
		ups[env] = app(t, env, "rev-"+env)
	}
	d := routesOn(c, ups)
	// do sends an operation until it answers, as the controller would
	// after a transient answer (five compare-and-sets in a row lost to
	// the others). An error is the driver failing: a read or a write that
	// found its position moved is decided again inside the driver, and a
	// connection Caddy reset is sent again there.
	do := func(op, env string, gen, expected uint64) (driver.CapabilityResult, error) {
		for range 20 {
			res, err := d.Do(context.Background(), driver.CapabilityRequest{Capability: "route", Op: op, EnvID: env, Branch: "b-" + env,
				Generation: gen, ExpectedRoute: expected, Revision: "rev-" + env})
			if err != nil || res.OK {
				return res, err
			}
			if res.Category != "transient" {
				return res, fmt.Errorf("%s %s: %s", op, env, res.Message)
			}
		}
		return driver.CapabilityResult{}, fmt.Errorf("%s %s: transient 20 times", op, env)
	}
	for round := range rounds {
		gen := uint64(round + 1)
		for _, op := range []string{"apply", "remove"} {
			errs := make(chan error, previews)
			for env := range ups {
				go func() {
					res, err := do(op, env, gen, gen-1)
					if err == nil {
						o := res.Observation
						if want := op == "apply"; o.Exists != want || want && (o.Owner != env || o.ProviderID != ups[env] || o.RouteTarget != gen || !o.Matches) {
							err = fmt.Errorf("round %d, %s of b-%s answered %+v", round, op, env, o)
						}
					}
					errs <- err
				}()
			}
			for range previews {
				require.NoError(t, <-errs)
			}
		}
	}
	var body []byte
	_, _, err := d.callBody(context.Background(), http.MethodGet, d.routesPath(), "", nil, &body)
	require.NoError(t, err)
	var left []caddyRoute
	require.NoError(t, json.Unmarshal(body, &left))
	var ids []string
	for _, r := range left {
		ids = append(ids, r.ID)
	}
	require.Equal(t, []string{fallbackID}, ids, "every removal took its own route, and the catch-all was added once")
}

// TestP19APreviewStaysServedWhileOtherRoutesChange: Caddy replaces its
// servers at every config change, and a connection a smoke check had
// open can be reset then. That is not an observation that nothing serves
// the host: before, 6 smoke checks in 500 of a served preview said so
// while another route was added and removed over and over, and at rest
// each would have taken the preview's route for missing.
func TestP19APreviewStaysServedWhileOtherRoutesChange(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	// The churn must happen while the preview is observed: the smoke
	// checks go on until other routes changed at least minChurn times
	// (and at least 500 checks), however slowly a busy machine lets
	// either run.
	const minChurn = 21
	var churned atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		churn := []byte(`{"@id":"churn","match":[{"host":["churn.localhost"]}],"handle":[{"handler":"static_response","body":"churn"}]}`)
		for {
			select {
			case <-stop:
				return
			default:
			}
			put, _, err1 := d.call(context.Background(), http.MethodPut, d.routesPath()+"/0", "", churn)
			del, _, err2 := d.call(context.Background(), http.MethodDelete, "/id/churn", "", nil)
			if err1 == nil && err2 == nil && put == http.StatusOK && del == http.StatusOK {
				churned.Add(1)
			}
		}
	}()
	var unserved []string
	for checks := 0; checks < 500 || churned.Load() < minChurn; checks++ {
		o := route(t, d, "observe", "env-1", 1, 0, "smoke").Observation
		if !o.Exists || !o.Matches {
			unserved = append(unserved, o.Detail)
		}
	}
	close(stop)
	<-done
	require.Empty(t, unserved, "every smoke check found the preview served")
}
