package actors

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

// slowWorld answers every capability as a world where everything works,
// after a delay longer than the lease.
type slowWorld struct{ delay time.Duration }

func (s slowWorld) Do(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return driver.CapabilityResult{}, driver.ErrTimeout
	}
	return worksResult(r), nil
}

// worksResult is the answer of a world where everything works: the
// resource exists (absent after a removal), is the caller's (artifacts are
// shared) and matches.
func worksResult(r driver.CapabilityRequest) driver.CapabilityResult {
	obs := &driver.CapabilityObservation{Exists: r.Op != "remove", Owner: r.EnvID, Matches: true, RouteTarget: r.Generation}
	if r.Capability == "artifact" {
		obs.Owner = ""
	}
	return driver.CapabilityResult{OK: true, Observation: obs}
}

// startEnvSystem starts a real System on store (real clock, one pool, the
// marquee side idle) with env as its environment side.
func startEnvSystem(t *testing.T, store *persistence.Store, secrets []string, env EnvConfig) *System {
	t.Helper()
	sys, err := Start(Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		IdleAfter: -1, Secrets: secrets, Env: env})
	require.NoError(t, err)
	return sys
}

// gatedWorld answers like slowWorld, but each apply waits until the test
// opens its gate: the call lasts exactly as long as the test says, on any
// clock.
type gatedWorld struct {
	gate    chan struct{}
	started chan string
}

func (g gatedWorld) Do(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	if r.Op == "apply" {
		select {
		case g.started <- r.Capability:
		default: // only the first call is watched
		}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return driver.CapabilityResult{}, driver.ErrTimeout
		}
	}
	return worksResult(r), nil
}

// TestLeaseIsRenewedDuringLongEffects: E7. A driver call that lasts longer
// than the lease keeps its lease by renewal, on the System's clock (a
// manual one here: no race of wall-clock durations): the lease's expiry
// moves with every third of it, nobody takes the attempt over, and the
// result commits.
func TestLeaseIsRenewedDuringLongEffects(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	em := environment.Machine{Config: environment.DefaultConfig()} // a two-minute lease
	world := gatedWorld{gate: make(chan struct{}), started: make(chan string, 1)}
	sys, err := Start(Config{Store: store, Clock: clk, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		IdleAfter: -1, EffectTimeout: time.Hour, Env: EnvConfig{Machine: em, Drivers: DriverForAll(world), ReconcileEvery: -1, Worker: "w1"}})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sys.Stop(ctx)
	}()
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-1", Branch: "main", Revision: "r1"})
	require.NoError(t, err)
	require.Equal(t, "artifact", <-world.started)
	lease := func() time.Time {
		e, err := sys.Environment("env-1")
		require.NoError(t, err)
		require.NotNil(t, e.Attempt)
		return e.Attempt.Lease.ExpiresAt
	}
	first := lease()
	require.Equal(t, clk.Now().Add(2*time.Minute), first)
	// Five thirds of the lease: past its first expiry, renewed each time.
	for i := 1; i <= 5; i++ {
		clk.Advance(40 * time.Second)
		want := clk.Now().Add(2 * time.Minute)
		require.Eventually(t, func() bool { return lease().Equal(want) }, 10*time.Second, time.Millisecond, "renewal %d", i)
	}
	require.True(t, clk.Now().After(first), "the call outlived its first lease")
	e, err := sys.Environment("env-1")
	require.NoError(t, err)
	require.Equal(t, uint64(1), e.Attempt.Lease.Generation, "one lease, renewed, never taken over")
	close(world.gate)
	require.Eventually(t, func() bool {
		e, err := sys.Environment("env-1")
		return err == nil && e.State != environment.Requested
	}, 10*time.Second, time.Millisecond, "the slow call's result committed")
	e, err = sys.Environment("env-1")
	require.NoError(t, err)
	for _, a := range e.Audit {
		require.NotEqual(t, "reject-stale-commit", a.Action, "no attempt was taken over: %+v", a)
	}
}

// leakyWorld works, and echoes a secret in everything it says.
type leakyWorld struct {
	secret   string
	observes *atomic.Int64 // observations so far: a test waits for more
}

func (l leakyWorld) Do(_ context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	if r.Op == "observe" {
		l.observes.Add(1)
	}
	obs := &driver.CapabilityObservation{Exists: r.Op != "remove", Owner: r.EnvID, Matches: true, RouteTarget: r.Generation,
		Detail: "connected with " + l.secret}
	if r.Capability == "artifact" {
		obs.Owner = ""
	}
	return driver.CapabilityResult{OK: true, Message: "token=" + l.secret, Observation: obs}, nil
}

// TestReceiptsNeverHoldSecrets: E13 keeps every driver call's input and
// output in the receipts, which the view shows (E17); a driver echoing one
// of the process's secrets never gets it into the record.
func TestReceiptsNeverHoldSecrets(t *testing.T) {
	const secret = "op-token-5f1e9c"
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	observes := &atomic.Int64{}
	sys := startEnvSystem(t, store, []string{secret}, EnvConfig{Drivers: DriverForAll(leakyWorld{secret: secret, observes: observes}),
		ReconcileEvery: 10 * time.Millisecond, Worker: "w1"})
	defer sys.Stop(context.Background())
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-1", Branch: "main", Revision: "r1"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		e, err := sys.Environment("env-1")
		return err == nil && e.State == environment.Ready
	}, 10*time.Second, 5*time.Millisecond)
	before := observes.Load()
	require.Eventually(t, func() bool { return observes.Load() >= before+8 }, 10*time.Second, 2*time.Millisecond, "a few reconciliations at rest")
	e, err := sys.Environment("env-1")
	require.NoError(t, err)
	raw, err := json.Marshal(e)
	require.NoError(t, err)
	require.Greater(t, len(e.Receipts), 5)
	require.Contains(t, string(raw), "[redacted]", "the driver's words are kept, scrubbed")
	require.NotContains(t, string(raw), secret)
}

// TestPendingNotificationsAreSentAfterARestart: E10. The sender's retries
// are timers in memory; a notification still in the outbox when the
// process stops is sent again by the next one, with the same identity.
// Found by the simulator's end-of-run E10 oracle (6 of 100 seeds).
func TestPendingNotificationsAreSentAfterARestart(t *testing.T) {
	var mu sync.Mutex
	up := false
	var keys []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}))
	defer sink.Close()
	dir := t.TempDir()
	start := func() (*System, *persistence.Store) {
		store, err := persistence.Open(dir, persistence.Options{})
		require.NoError(t, err)
		return startEnvSystem(t, store, nil, EnvConfig{Drivers: DriverForAll(slowWorld{}), ReconcileEvery: 20 * time.Millisecond,
			Worker: "w1", Notifier: &driver.Webhook{Endpoint: sink.URL}, NotifyBackoff: time.Hour}), store
	}
	sys, store := start()
	_, err := sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-1", Branch: "main", Revision: "r1"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		e, err := sys.Environment("env-1")
		return err == nil && e.State == environment.Ready && len(e.Outbox) == 1 && e.Outbox[0].Attempts == 1
	}, 10*time.Second, 5*time.Millisecond, "ready; the first delivery failed; the next try is an hour away")
	sys.Stop(context.Background())
	require.NoError(t, store.Close())

	mu.Lock()
	up = true
	mu.Unlock()
	sys, store = start()
	defer func() { sys.Stop(context.Background()); store.Close() }()
	require.Eventually(t, func() bool {
		e, err := sys.Environment("env-1")
		return err == nil && e.Outbox[0].Delivered
	}, 10*time.Second, 5*time.Millisecond, "sent again by the new process")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"env-1-1"}, keys, "the same identity")
}

// TestRefusedCreatesSpendNoRouteGeneration: thirty creates of
// one id racing: one is created, the others are refused with 409 before a
// route generation is given out for them, so the branch's next preview
// gets generation 2, not 31; and a new process gives out the next one
// after the last its store holds.
func TestRefusedCreatesSpendNoRouteGeneration(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	cfg := Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		IdleAfter: -1, Env: EnvConfig{Drivers: DriverForAll(slowWorld{delay: time.Millisecond}), ReconcileEvery: -1, Worker: "w1"}}
	sys, err := Start(cfg)
	require.NoError(t, err)
	var created, conflicts atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-x", Branch: "b", Revision: "r1"})
			switch {
			case err == nil:
				created.Add(1)
			case errors.Is(err, errs.Conflict):
				conflicts.Add(1)
			default:
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), created.Load())
	require.Equal(t, int64(29), conflicts.Load())
	e, err := sys.Environment("env-x")
	require.NoError(t, err)
	require.Equal(t, uint64(1), e.Generation, "the one real create got the branch's first generation")
	y, err := sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-y", Branch: "b", Revision: "r1"})
	require.NoError(t, err)
	require.Equal(t, uint64(2), y.Generation, "refused creates spent no generation")
	sys.Stop(context.Background())

	sys, err = Start(cfg)
	require.NoError(t, err)
	defer sys.Stop(context.Background())
	z, err := sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-z", Branch: "b", Revision: "r1"})
	require.NoError(t, err)
	require.Equal(t, uint64(3), z.Generation, "a new process reads the branch's last generation from the store")
}

// commitLog records the environments' commits (Config.Hooks).
type commitLog struct {
	mu      sync.Mutex
	commits []envCommit
}

type envCommit = runtime.Committed[record.Environment, environment.Event, environment.Outcome]

func (c *commitLog) hooks() Hooks {
	return Hooks{Env: func(x envCommit) {
		c.mu.Lock()
		c.commits = append(c.commits, x)
		c.mu.Unlock()
	}}
}

func (c *commitLog) writes(id string) []envCommit {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []envCommit
	for _, x := range c.commits {
		if x.ID == id && x.Wrote {
			out = append(out, x)
		}
	}
	return out
}

// firstCall records what had been committed when the first driver call
// came, then answers as a world where everything works.
type firstCall struct {
	log   *commitLog
	once  sync.Once
	seen  chan []envCommit
	envID string
}

func (f *firstCall) Do(_ context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	f.once.Do(func() { f.seen <- f.log.writes(f.envID) })
	return worksResult(r), nil
}

// TestE8ACreateReachesItsFirstDriverCallAfterItsBranchAnswers: a create is
// the environment's own first step, asking its branch (a kind of its own)
// for the route generation; the branch's answer is the step that records
// the generation and the first attempt's intent together, so the preview
// makes two commits before its first driver call, and no mailbox waits on
// another meanwhile.
func TestE8ACreateReachesItsFirstDriverCallAfterItsBranchAnswers(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	log := &commitLog{}
	world := &firstCall{log: log, seen: make(chan []envCommit, 1), envID: "env-1"}
	sys, err := Start(Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		IdleAfter: -1, Hooks: log.hooks(), Env: EnvConfig{Drivers: DriverForAll(world), ReconcileEvery: -1, Worker: "w1"}})
	require.NoError(t, err)
	defer sys.Stop(context.Background())
	e, err := sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-1", Branch: "main", Revision: "r1"})
	require.NoError(t, err)
	require.NotNil(t, e.Attempt, "the create's answer already holds the first attempt's intent (E5)")
	var before []envCommit
	select {
	case before = <-world.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("no driver call")
	}
	require.Len(t, before, 2, "two commits before the first driver call")
	require.IsType(t, environment.Create{}, before[0].Event)
	require.IsType(t, environment.GenerationGiven{}, before[1].Event)
	require.Equal(t, uint64(0), before[0].After.Env.Generation, "the create waits for its branch")
	require.NotNil(t, before[1].After.Env.Attempt, "the given generation's step holds the first intent (E5)")
	g, err := record.BranchGeneration(store, "main")
	require.NoError(t, err)
	require.Equal(t, uint64(1), g, "the branch's generation is durable before the preview uses it")
}

// TestEnvironmentCommandOnAnUnknownIDIsNotFound: a removal or an
// action on an environment that never existed is answered not-found at
// once, not after the ask timeout.
func TestEnvironmentCommandOnAnUnknownIDIsNotFound(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	sys, err := Start(Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		IdleAfter: -1, AskTimeout: time.Hour, Env: EnvConfig{ReconcileEvery: -1}})
	require.NoError(t, err)
	defer sys.Stop(context.Background())
	for _, ev := range []environment.Event{environment.RemoveEnv{Reason: "x"}, environment.Action{Name: "resume", Actor: "a", Reason: "x"}} {
		_, err := sys.EnvironmentCommand(context.Background(), "nope", ev)
		require.ErrorIs(t, err, errs.NotFound, "%T", ev)
	}
}

// worksWorld answers every capability as a world where everything works,
// at once.
type worksWorld struct{}

func (worksWorld) Do(_ context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	return worksResult(r), nil
}

// TestE18GoldenAndProductionProvisionCommitAlike: the golden provisioning
// in a world where everything works (environment/testdata/provision_clean)
// shows the writes the production path makes, no fewer: the same number of
// commits from the create to ready, one per state boundary (the
// shell's Observe sent the next Advance, a second commit per boundary the
// golden files never showed).
func TestE18GoldenAndProductionProvisionCommitAlike(t *testing.T) {
	golden, err := os.ReadFile("environment/testdata/provision_clean")
	require.NoError(t, err)
	want := 0
	for _, line := range strings.Split(string(golden), "\n") {
		if strings.HasPrefix(line, "write: ") && line != "write: none" {
			want++
		}
	}
	require.Greater(t, want, 10, "the golden walk reaches ready")

	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	log := &commitLog{}
	sys, err := Start(Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		IdleAfter: -1, Hooks: log.hooks(), Env: EnvConfig{Drivers: DriverForAll(worksWorld{}), ReconcileEvery: -1, Worker: "w1"}})
	require.NoError(t, err)
	defer sys.Stop(context.Background())
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-1", Branch: "main", Revision: "r1"})
	require.NoError(t, err)
	toReady := func() int {
		for i, c := range log.writes("env-1") {
			if c.After.Env.State == environment.Ready {
				return i + 1
			}
		}
		return 0
	}
	require.Eventually(t, func() bool { return toReady() > 0 }, 10*time.Second, time.Millisecond, "ready")
	require.Equal(t, want, toReady(), "commits from the create to ready: the golden file's and production's")
}

// seedWorld works like worksWorld and keeps the seed each database apply
// was asked to copy.
type seedWorld struct {
	mu    *sync.Mutex
	seeds *[]string
}

func (w seedWorld) Do(_ context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	if r.Capability == "database" && r.Op == "apply" {
		w.mu.Lock()
		*w.seeds = append(*w.seeds, r.DataFrom)
		w.mu.Unlock()
	}
	return worksResult(r), nil
}

// TestP20ACreateWithDataFromReachesTheDatabaseStep: an environment
// created with a seed's name keeps it in its record, and the database
// step's apply asks the driver to copy that seed, and no other step does;
// an invalid name is refused at the create.
func TestP20ACreateWithDataFromReachesTheDatabaseStep(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	var mu sync.Mutex
	var seeds []string
	sys := startEnvSystem(t, store, nil, EnvConfig{Drivers: DriverForAll(seedWorld{mu: &mu, seeds: &seeds}), ReconcileEvery: -1, Worker: "w1"})
	defer sys.Stop(context.Background())
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-s", Branch: "main", Revision: "r1", DataFrom: "demo"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		e, err := sys.Environment("env-s")
		return err == nil && e.State == environment.Ready
	}, 10*time.Second, 5*time.Millisecond)
	e, err := sys.Environment("env-s")
	require.NoError(t, err)
	require.Equal(t, "demo", e.DataFrom)
	mu.Lock()
	require.Equal(t, []string{"demo"}, seeds, "one database apply, asked to copy the seed")
	mu.Unlock()

	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-t", Branch: "main", Revision: "r1", DataFrom: "Not A Seed"})
	require.ErrorIs(t, err, errs.Invalid)
}
