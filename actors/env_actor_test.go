package actors

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
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
	obs := &driver.CapabilityObservation{Exists: r.Op != "remove", Owner: r.EnvID, Matches: true, RouteTarget: r.Generation}
	if r.Capability == "artifact" {
		obs.Owner = ""
	}
	return driver.CapabilityResult{OK: true, Observation: obs}, nil
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

// TestLeaseIsRenewedDuringLongEffects: E7. An effect slower than the lease
// keeps its lease by renewal; nobody takes the attempt over and no commit is
// refused as stale.
func TestLeaseIsRenewedDuringLongEffects(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	em := environment.Machine{Config: environment.DefaultConfig()}
	em.Config.LeaseFor = 120 * time.Millisecond
	sys := startEnvSystem(t, store, nil, EnvConfig{Machine: em, Drivers: DriverForAll(slowWorld{delay: 150 * time.Millisecond}),
		ReconcileEvery: -1, Worker: "w1"})
	defer func() {
		// Bounded: if leases were not renewed, work would never stop.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sys.Stop(ctx)
	}()
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-1", Branch: "main", Revision: "r1"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		e, err := sys.Environment("env-1")
		return err == nil && e.State == environment.DataReady
	}, 10*time.Second, 5*time.Millisecond)
	e, err := sys.Environment("env-1")
	require.NoError(t, err)
	for _, a := range e.Audit {
		require.NotEqual(t, "reject-stale-commit", a.Action, "no attempt was taken over: %+v", a)
	}
	require.Len(t, e.Receipts, 3, "artifact, database, migrations verified once each")
}

// leakyWorld works, and echoes a secret in everything it says.
type leakyWorld struct{ secret string }

func (l leakyWorld) Do(_ context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
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
	sys := startEnvSystem(t, store, []string{secret}, EnvConfig{Drivers: DriverForAll(leakyWorld{secret: secret}),
		ReconcileEvery: 10 * time.Millisecond, Worker: "w1"})
	defer sys.Stop(context.Background())
	_, err = sys.CreateEnvironment(context.Background(), environment.Create{ID: "env-1", Branch: "main", Revision: "r1"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		e, err := sys.Environment("env-1")
		return err == nil && e.State == environment.Ready
	}, 10*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // a few reconciliations at rest
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
			Worker: "w1", NotifyEndpoint: sink.URL, NotifyBackoff: time.Hour}), store
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
