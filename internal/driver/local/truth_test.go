package local

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/driver/local/pgcluster"
	"github.com/wardenhq/warden/persistence"
)

// controller is warden's environment side on the real parts, as `warden
// serve --env-platform local` wires it: the platform's drivers, its
// podman events, a reconcile round.
type controller struct {
	t     *testing.T
	sys   *actors.System
	store *persistence.Store
	c     *caddy
}

func startController(t *testing.T, store *persistence.Store, c *caddy, platform Platform, round time.Duration, cfg environment.Config) *controller {
	t.Helper()
	drivers, err := platform.Drivers()
	require.NoError(t, err)
	sys, err := actors.Start(actors.Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		IdleAfter: -1, EffectTimeout: time.Minute,
		Env: actors.EnvConfig{Machine: environment.Machine{Config: cfg}, Drivers: drivers, Worker: "w1", ReconcileEvery: round,
			Watcher: platform.Watcher(), ExclusiveStore: true}})
	require.NoError(t, err)
	ctl := &controller{t: t, sys: sys, store: store, c: c}
	t.Cleanup(ctl.stop)
	return ctl
}

func (ctl *controller) stop() {
	if ctl.sys != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctl.sys.Stop(ctx)
		ctl.sys = nil
	}
}

func (ctl *controller) env(id string) environment.Env {
	e, err := ctl.sys.Environment(id)
	require.NoError(ctl.t, err)
	return e
}

func (ctl *controller) waitReady(id string, within time.Duration) {
	ctl.t.Helper()
	require.Eventually(ctl.t, func() bool { return ctl.env(id).State == environment.Ready }, within, 100*time.Millisecond,
		"%s ready (now %s, %+v)", id, ctl.env(id).State, ctl.env(id).LastFailure)
}

// page is what the branch's host name serves through Caddy.
func (ctl *controller) page(branch string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+ctl.c.proxy+"/", nil)
	req.Host = branch + ".localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func containerID(t *testing.T, p *Podman, env string) string {
	c, err := p.inspect(context.Background(), "container", "app-"+env)
	require.NoError(t, err)
	if c == nil || !c.State.Running {
		return ""
	}
	return c.ID
}

// TestP13P14AKilledApplicationIsRepairedWithoutAnOperator: the
// application of a ready preview is killed ten times, across three
// previews, by podman kill and by podman rm -f. Each time podman's events
// say so at once: the preview leaves ready within 10 s, is never reported
// ready again until it is repaired (a new container of its own, serving
// through its unchanged route), and the repair is automatic (an
// application drift, no question for an operator) within two reconcile
// rounds of the kill.
func TestP13P14AKilledApplicationIsRepairedWithoutAnOperator(t *testing.T) {
	c := startCaddy(t)
	p := podmanHere(t)
	envs := []string{"env-k1", "env-k2", "env-k3"}
	cleanupPodman(t, p, envs...)
	platform := testPlatform(c, p)
	platform.Instance = "test-kill"
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	const round = 5 * time.Second
	ctl := startController(t, store, c, platform, round, ownArtifacts())
	for i, id := range envs {
		_, err := ctl.sys.CreateEnvironment(context.Background(), environment.Create{ID: id, Branch: "kill-" + id, Revision: "r1"})
		require.NoError(t, err, i)
	}
	for _, id := range envs {
		ctl.waitReady(id, 120*time.Second)
	}
	for i := range 10 {
		id := envs[i%len(envs)]
		how := []string{"kill"}
		if i%2 == 1 {
			how = []string{"rm", "--force"}
		}
		before := containerID(t, p, id)
		require.NotEmpty(t, before)
		_, _, err := p.podman(context.Background(), append(how, "app-"+id)...)
		require.NoError(t, err)
		killed := time.Now()
		var left, repaired time.Time
		for repaired.IsZero() && time.Since(killed) < 4*round {
			e := ctl.env(id)
			switch {
			case e.State != environment.Ready && left.IsZero():
				left = time.Now()
			case e.State == environment.Ready && !left.IsZero():
				now := containerID(t, p, id)
				require.NotEqual(t, before, now, "kill %d (%s): ready again only once repaired", i, id)
				repaired = time.Now()
			case e.State == environment.Ready && time.Since(killed) > 10*time.Second:
				t.Fatalf("kill %d (%s, podman %s): still reported ready %s after the kill", i, id, how[0], time.Since(killed))
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.False(t, repaired.IsZero(), "kill %d (%s): not repaired (state %s, %+v)", i, id, ctl.env(id).State, ctl.env(id).LastFailure)
		require.Less(t, left.Sub(killed), 10*time.Second, "kill %d: left ready", i)
		require.LessOrEqual(t, repaired.Sub(killed), 2*round, "kill %d (%s): repaired within two reconcile rounds", i, id)
		e := ctl.env(id)
		last := e.Drift[len(e.Drift)-1]
		require.Equal(t, environment.App, last.Capability, "kill %d: the application's drift, not the route's: %+v", i, e.Drift)
		require.Equal(t, "auto-repair", last.Outcome)
		for _, d := range e.Drift {
			require.NotEmpty(t, d.Outcome, "kill %d: no drift waits for an operator: %+v", i, d)
		}
		status, page := ctl.page("kill-" + id)
		require.Equal(t, http.StatusOK, status, page)
		require.Contains(t, page, "Preview "+id)
		t.Logf("kill %d: %s by podman %s: left ready after %s, repaired after %s", i, id, how[0], left.Sub(killed).Round(time.Millisecond), repaired.Sub(killed).Round(time.Millisecond))
	}
}

// TestP15APostgresMovedUnderRunningPreviews: PostgreSQL stops under
// running previews: each leaves ready within one round (its application
// says its database does not answer), named as the application's drift.
// PostgreSQL starts again on another port and warden with it (its
// connection string is a start-time setting): every preview's application
// runs with an address that is no longer current, is started again with
// the current one, and serves a row of its own database again.
func TestP15APostgresMovedUnderRunningPreviews(t *testing.T) {
	c := startCaddy(t)
	p := podmanHere(t)
	envs := []string{"env-m1", "env-m2"}
	cleanupPodman(t, p, envs...)
	pgDir := filepath.Join(t.TempDir(), "pg")
	pg, err := pgcluster.Start(pgDir, "warden")
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop(); os.RemoveAll(pgDir) })
	platform := testPlatform(c, p)
	platform.Instance, platform.PostgresAdmin = "test-moved", pg.DSN("postgres")
	p.DatabaseURL = (&Data{Admin: platform.PostgresAdmin}).URL
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	const round = 3 * time.Second
	cfg := ownArtifacts()
	cfg.RetryBackoff = 500 * time.Millisecond
	ctl := startController(t, store, c, platform, round, cfg)
	for _, id := range envs {
		_, err := ctl.sys.CreateEnvironment(context.Background(), environment.Create{ID: id, Branch: "moved-" + id, Revision: "r1"})
		require.NoError(t, err)
	}
	for _, id := range envs {
		ctl.waitReady(id, 120*time.Second)
	}

	require.NoError(t, pg.Stop())
	stopped := time.Now()
	for _, id := range envs {
		require.Eventually(t, func() bool { return ctl.env(id).State != environment.Ready }, round+2*time.Second-time.Since(stopped), 50*time.Millisecond,
			"%s leaves ready within one round of its database going away", id)
		e := ctl.env(id)
		require.Equal(t, environment.App, e.Drift[len(e.Drift)-1].Capability, "named as the application's drift: %+v", e.Drift)
		require.Contains(t, e.Drift[len(e.Drift)-1].Observed, "database")
	}
	// The view, the list and the metrics' census agree: none is ready.
	page, err := ctl.sys.Environments("", 0, 0, nil)
	require.NoError(t, err)
	for _, e := range page.Items {
		require.NotEqual(t, environment.Ready, e.State, "the list says %s is ready", e.ID)
	}
	require.Eventually(t, func() bool { return ctl.sys.Census().Environments["ready"] == 0 }, 5*time.Second, 100*time.Millisecond,
		"warden_environments{state=\"ready\"} follows within its census bound: %v", ctl.sys.Census().Environments)
	require.GreaterOrEqual(t, testutil.ToFloat64(ctl.sys.Metrics().DriftFound), float64(len(envs)), "warden_drift_found_total counts them")

	old := pg.Port()
	for pg, err = pgcluster.Start(pgDir, "warden"); err == nil && pg.Port() == old; pg, err = pgcluster.Start(pgDir, "warden") {
		require.NoError(t, pg.Stop()) // the same port by chance: another
	}
	require.NoError(t, err)
	ctl.stop()
	platform.PostgresAdmin = pg.DSN("postgres")
	ctl = startController(t, store, c, platform, round, cfg)
	for _, id := range envs {
		ctl.waitReady(id, 60*time.Second)
		status, page := ctl.page("moved-" + id)
		require.Equal(t, http.StatusOK, status, page)
		require.Contains(t, page, "own database", "%s serves a row of its own database again: %s", id, page)
		require.False(t, strings.Contains(page, "unavailable"), page)
	}
}
