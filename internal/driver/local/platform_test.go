package local

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

// TestP1ThePlatformDrivesEveryCapability: every capability a lifecycle
// step calls has a driver on the local platform.
func TestP1ThePlatformDrivesEveryCapability(t *testing.T) {
	drivers, err := Platform{Migrations: "../../../examples/previewapp/migrations"}.Drivers()
	require.NoError(t, err)
	for _, c := range environment.StepCapabilities {
		require.Contains(t, drivers, c, "capability %s", c)
	}
}

// TestP9APreviewEndToEndOnTheRealParts: warden drives a preview of a
// branch on PostgreSQL, podman and Caddy until it is served through Caddy
// with its revision and a row of its own database; a new revision of the
// branch takes the route and keeps it while the old preview is removed
// (I14); removed, no container, database, role or route it owned is
// left, its image neither (P9: on this platform artifacts are each
// environment's own, Config.RemoveArtifacts).
func TestP9APreviewEndToEndOnTheRealParts(t *testing.T) {
	c := startCaddy(t)
	p := podmanHere(t)
	cleanupPodman(t, p, "env-e1", "env-e2")
	platform := testPlatform(c, p)
	drivers, err := platform.Drivers()
	require.NoError(t, err)
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	sys, err := actors.Start(actors.Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		IdleAfter: -1, EffectTimeout: time.Minute,
		Env: actors.EnvConfig{Machine: environment.Machine{Config: ownArtifacts()}, Drivers: drivers, Worker: "w1", ReconcileEvery: -1}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sys.Stop(ctx)
		store.Close()
	})
	reach := func(id string, phase environment.Phase) environment.Env {
		var e environment.Env
		require.Eventually(t, func() bool {
			e, err = sys.Environment(id)
			return err == nil && e.State == phase
		}, 90*time.Second, 100*time.Millisecond, "%s reaches %s (last: %s, %+v)", id, phase, e.State, e.LastFailure)
		return e
	}
	page := func() string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+c.proxy+"/", nil)
		req.Host = "feature-e.localhost"
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-e1", Branch: "feature-e", Revision: "r1"})
	require.NoError(t, err)
	reach("env-e1", environment.Ready)
	body := page()
	require.Contains(t, body, "Preview env-e1")
	require.Contains(t, body, "<code>r1</code>")
	require.Contains(t, body, "own database")

	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-e2", Branch: "feature-e", Revision: "r2"})
	require.NoError(t, err)
	reach("env-e2", environment.Ready)
	require.Contains(t, page(), "<code>r2</code>", "the new revision holds the branch's route")

	_, err = sys.EnvironmentCommand(context.Background(), "env-e1", environment.RemoveEnv{Reason: "superseded"})
	require.NoError(t, err)
	reach("env-e1", environment.Removed)
	require.Contains(t, page(), "Preview env-e2", "I14: removing the old preview never takes the route back or away")

	_, err = sys.EnvironmentCommand(context.Background(), "env-e2", environment.RemoveEnv{Reason: "branch merged"})
	require.NoError(t, err)
	tomb := reach("env-e2", environment.Removed)
	require.NotNil(t, tomb.Tombstone)
	removed := map[string]string{}
	for _, r := range tomb.Resources {
		removed[string(r.Capability)+" "+r.Identity] = r.Status
	}
	require.Equal(t, map[string]string{"artifact artifact-env-e2-r2": "removed", "database db-env-e2": "removed", "app app-env-e2": "removed",
		"route route-feature-e-2": "removed"}, removed, "the tombstone lists what it owned, each removed")
	left := listResources(t, p)
	for _, env := range []string{"env-e1", "env-e2"} {
		require.False(t, slices.ContainsFunc(left, func(s string) bool { return strings.Contains(s, env) }), "%s left %v", env, left)
	}
	resp, err := http.Get("http://" + c.admin + "/id/preview-feature-e")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the branch's route is gone")
}

// testPlatform is the local platform on this test's Caddy and podman and
// the package's PostgreSQL.
func testPlatform(c *caddy, p *Podman) Platform {
	return Platform{PostgresAdmin: adminDSN, Migrations: "../../../examples/previewapp/migrations",
		Podman: p.Binary, PodmanGlobal: podmanGlobal, PodmanRun: podmanRun, AppContext: p.Context,
		CaddyAdmin: "http://" + c.admin, CaddyServer: "previews", PreviewListen: c.proxy, PreviewDomain: "localhost"}
}

func ownArtifacts() environment.Config {
	c := environment.DefaultConfig()
	c.RemoveArtifacts = true
	return c
}

// listResources lists, from the parts themselves, every container, image,
// database and role there is: what is left, read from the parts.
func listResources(t *testing.T, p *Podman) []string {
	var out []string
	for _, args := range [][]string{{"ps", "--all", "--format", "{{.Names}}"}, {"images", "--format", "{{.Repository}}"}} {
		b, _, err := p.podman(context.Background(), args...)
		require.NoError(t, err)
		out = append(out, strings.Fields(string(b))...)
	}
	for _, q := range []string{"SELECT datname FROM pg_database", "SELECT rolname FROM pg_roles"} {
		c, err := (&Data{Admin: adminDSN}).connectTo(context.Background(), "postgres")
		require.NoError(t, err)
		rows, err := c.Query(context.Background(), q)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		rows.Close()
		c.Close(context.Background())
	}
	return out
}

// TestP10DriftOnTheRealPartsGoesThroughTheController: a ready preview's
// container removed by hand is found by the reconciler and reprovisioned
// through full readiness (auto-repair); its route pointed elsewhere
// through Caddy's admin API at the same generation is recorded as drift
// that waits for an operator (E15). (A database dropped by hand is seen by
// the driver, TestP10ADatabaseDroppedByHandIsSeen; with the route's drift
// open the controller waits for the operator before judging more.)
func TestP10DriftOnTheRealPartsGoesThroughTheController(t *testing.T) {
	c := startCaddy(t)
	p := podmanHere(t)
	cleanupPodman(t, p, "env-d1")
	platform := testPlatform(c, p)
	drivers, err := platform.Drivers()
	require.NoError(t, err)
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	sys, err := actors.Start(actors.Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		IdleAfter: -1, Env: actors.EnvConfig{Machine: environment.Machine{Config: ownArtifacts()}, Drivers: drivers, Worker: "w1", ReconcileEvery: 500 * time.Millisecond}})
	require.NoError(t, err)
	defer sys.Stop(context.Background())
	env := func() environment.Env { e, err := sys.Environment("env-d1"); require.NoError(t, err); return e }
	drift := func(capability environment.Capability, open bool) bool {
		for _, d := range env().Drift {
			if d.Capability == capability && (d.Outcome == "") == open {
				return true
			}
		}
		return false
	}
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-d1", Branch: "branch-d1", Revision: "r1"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return env().State == environment.Ready }, 90*time.Second, 100*time.Millisecond)

	_, _, err = p.podman(context.Background(), "rm", "--force", "app-env-d1")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return drift(environment.App, false) && env().State == environment.Ready && appRunning(t, p, "env-d1")
	},
		90*time.Second, 100*time.Millisecond, "the container is reprovisioned through full readiness: %+v", env().Drift)

	req, _ := http.NewRequest(http.MethodPatch, "http://"+c.admin+"/id/preview-branch-d1/handle/1/upstreams/0/dial", strings.NewReader(`"127.0.0.1:9"`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Eventually(t, func() bool { return drift(environment.Route, true) }, 30*time.Second, 100*time.Millisecond,
		"a route edited by hand waits for an operator: %+v", env().Drift)
}

func appRunning(t *testing.T, p *Podman, env string) bool {
	res, err := p.Do(context.Background(), driver.CapabilityRequest{Capability: "app", Op: "observe", EnvID: env, Identity: "app-" + env, Revision: "r1", Generation: 1})
	require.NoError(t, err)
	return res.Observation.Matches
}
