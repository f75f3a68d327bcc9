package local

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
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

// fault is one I11 boundary on the real parts: at the first call of op,
// either the effect happens and its answer is lost (lose), or the process
// dies before the effect, its intent durable (crash).
type fault struct {
	name, op string
	crash    bool
}

// faulty wraps the platform's drivers with one fault.
type faulty struct {
	inner   driver.Capability
	f       fault
	fired   *atomic.Bool
	crashed chan struct{}
	release chan struct{}
}

func (d faulty) Do(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	fire := r.Capability+"/"+r.Op == d.f.op && d.fired.CompareAndSwap(false, true)
	switch {
	case !fire:
		return d.inner.Do(ctx, r)
	case d.f.crash:
		close(d.crashed)
		<-d.release // the dead process's call never answers
		return driver.CapabilityResult{}, driver.ErrTimeout
	}
	_, _ = d.inner.Do(ctx, r)
	return driver.CapabilityResult{}, driver.ErrTimeout // done, answer lost
}

// TestP11EveryBoundaryEndsWhereAnUninterruptedRunEnds: for each boundary
// of P11, one fault at a time, a preview created and removed on
// PostgreSQL, podman and Caddy ends in the same state with the same real
// resources, read from the parts, as a run without the fault: at ready and
// after removal.
func TestP11EveryBoundaryEndsWhereAnUninterruptedRunEnds(t *testing.T) {
	c := startCaddy(t)
	p := podmanHere(t)
	platform := testPlatform(c, p)
	faults := []fault{
		{name: "none"},
		{name: "crash after the intent, before the effect", op: "artifact/apply", crash: true},
		{name: "the container started, its answer lost", op: "app/apply"},
		{name: "the route set, its answer lost", op: "route/apply"},
		{name: "a migration committed, its client cut off", op: "migrations/apply"},
		{name: "removal partly done", op: "database/remove", crash: true},
	}
	var want [2]string
	for i, f := range faults {
		env := "env-f" + string(rune('a'+i))
		cleanupPodman(t, p, env)
		got := runThrough(t, platform, c, f, env, "branch-f"+string(rune('a'+i)))
		if i == 0 {
			want = got
			require.Contains(t, want[0], "app-ENV", "the reference run is ready with its container")
			require.Contains(t, want[0], "route BRANCH generation 1 of ENV")
			continue
		}
		require.Equal(t, want, got, "boundary %q ends elsewhere", f.name)
	}
}

// runThrough creates a preview, waits for ready, removes it, waits for
// removed, and returns the platform's resources (normalized) at ready and
// at the end.
func runThrough(t *testing.T, platform Platform, c *caddy, f fault, env, branch string) [2]string {
	drivers, err := platform.Drivers()
	require.NoError(t, err)
	var fired atomic.Bool
	crashed, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	for k, d := range drivers {
		drivers[k] = faulty{inner: d, f: f, fired: &fired, crashed: crashed, release: release}
	}
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	start := func(worker string) *actors.System {
		sys, err := actors.Start(actors.Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
			IdleAfter: -1, EffectTimeout: time.Minute,
			Env: actors.EnvConfig{Machine: environment.Machine{Config: ownArtifacts()}, Drivers: drivers, Worker: worker, ReconcileEvery: -1, ExclusiveStore: true}})
		require.NoError(t, err)
		return sys
	}
	sys := start("w1")
	stop := func(s *actors.System, wait time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		s.Stop(ctx)
	}
	defer func() { stop(sys, 10*time.Second) }()
	// A crash: the process stops with the call in flight (it never
	// answers), and a new one, another worker, recovers from the same
	// store.
	reach := func(phase environment.Phase) {
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-crashed:
				crashed = nil
				stop(sys, 100*time.Millisecond)
				sys = start("w2")
			default:
			}
			if e, err := sys.Environment(env); err == nil && e.State == phase {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		e, _ := sys.Environment(env)
		t.Fatalf("%s (%s): %s never reached %s: at %s, %+v", env, f.name, env, phase, e.State, e.LastFailure)
	}
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: env, Branch: branch, Revision: "r1"})
	require.NoError(t, err)
	reach(environment.Ready)
	atReady := resources(t, platform, c, env, branch)
	_, err = sys.EnvironmentCommand(context.Background(), env, environment.RemoveEnv{Reason: "done"})
	require.NoError(t, err)
	reach(environment.Removed)
	return [2]string{atReady, resources(t, platform, c, env, branch)}
}

// resources lists what the parts hold, with this run's names replaced by
// ENV and BRANCH so that runs compare.
func resources(t *testing.T, platform Platform, c *caddy, env, branch string) string {
	p := &Podman{Binary: platform.Podman, Global: platform.PodmanGlobal}
	var out []string
	for _, r := range listResources(t, p) {
		if strings.Contains(r, env) {
			out = append(out, strings.ReplaceAll(r, env, "ENV"))
		}
	}
	resp, err := http.Get("http://" + c.admin + "/id/preview-" + branch)
	require.NoError(t, err)
	if resp.StatusCode == http.StatusOK {
		var rt caddyRoute
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rt))
		h, err := (&Routes{Admin: "http://" + c.admin, Server: "previews"}).read(context.Background(), branch)
		require.NoError(t, err)
		out = append(out, "route BRANCH generation "+strconv.FormatUint(h.generation, 10)+" of "+strings.ReplaceAll(h.env, env, "ENV"))
	}
	resp.Body.Close()
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestP11ASameNameResourceOfAnotherOwnerIsNeverReused: a database under
// the preview's declared name that another environment made stops the
// preview as a conflict naming the owner; the database is left as it was.
func TestP11ASameNameResourceOfAnotherOwnerIsNeverReused(t *testing.T) {
	c := startCaddy(t)
	p := podmanHere(t)
	cleanupPodman(t, p, "env-fz")
	platform := testPlatform(c, p)
	drivers, err := platform.Drivers()
	require.NoError(t, err)
	other := &Data{Admin: adminDSN}
	res, err := other.Do(context.Background(), driver.CapabilityRequest{Capability: "database", Op: "apply", EnvID: "env-other", Identity: "db-env-fz", Generation: 4})
	require.NoError(t, err)
	require.True(t, res.OK)
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	sys, err := actors.Start(actors.Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		IdleAfter: -1, Env: actors.EnvConfig{Machine: environment.Machine{Config: ownArtifacts()}, Drivers: drivers, Worker: "w1", ReconcileEvery: -1}})
	require.NoError(t, err)
	defer sys.Stop(context.Background())
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-fz", Branch: "branch-fz", Revision: "r1"})
	require.NoError(t, err)
	var e environment.Env
	require.Eventually(t, func() bool {
		e, err = sys.Environment("env-fz")
		return err == nil && e.LastFailure != nil && e.LastFailure.Category == environment.Conflict
	}, 60*time.Second, 100*time.Millisecond)
	require.Contains(t, e.LastFailure.Message, "env-other", "the conflict says whose it is")
	require.NotEqual(t, environment.Ready, e.State)
	obs := do(t, &Data{Admin: adminDSN}, "database", "observe", "env-fz").Observation
	require.Equal(t, "env-other", obs.Owner, "left as it was")
}
