package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

// recordingDispatcher stands in for GitHub: it records every dispatch.
type recordingDispatcher struct {
	mu   sync.Mutex
	sent []driver.DispatchRequest
}

func (d *recordingDispatcher) Dispatch(_ context.Context, r driver.DispatchRequest) (driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent = append(d.sent, r)
	return driver.Run{}, nil
}

func (d *recordingDispatcher) gens(id string) []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []uint64
	for _, r := range d.sent {
		if r.MarqueeID == id {
			out = append(out, r.Generation)
		}
	}
	return out
}

type okBootstrap struct{}

func (okBootstrap) Bootstrap(context.Context, driver.BootstrapRequest) error { return nil }

type noChats struct{}

func (noChats) Chats(context.Context, string) (driver.Chats, error)       { return driver.Chats{}, nil }
func (noChats) TeardownPlaygrounds(context.Context, string, uint64) error { return nil }

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	t          testing.TB
	dir        string
	clock      *clock.Manual
	disp       *recordingDispatcher
	store      *persistence.Store
	sys        *System
	fault      atomic.Pointer[func(point, id string)]
	writeFault atomic.Pointer[func(point, id string) error]
	idleAfter  time.Duration
	pool       int // the default pool's limit; 0: 1
}

func newHarness(t testing.TB, opts ...func(*harness)) *harness {
	h := &harness{t: t, dir: t.TempDir(), clock: clock.NewManual(start), disp: &recordingDispatcher{}, idleAfter: -1}
	for _, o := range opts {
		o(h)
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	store, err := persistence.Open(h.dir, persistence.Options{})
	require.NoError(h.t, err)
	sys, err := Start(Config{Store: store, Clock: h.clock, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": max(1, h.pool)}, Dispatcher: h.disp, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		AskTimeout: time.Second, RestartLimit: 3, RestartWindow: time.Minute, IdleAfter: h.idleAfter,
		Fault: func(p, id string) error {
			if f := h.fault.Load(); f != nil {
				(*f)(p, id)
			}
			if f := h.writeFault.Load(); f != nil {
				return (*f)(p, id)
			}
			return nil
		}})
	require.NoError(h.t, err)
	h.store, h.sys = store, sys
}

func (h *harness) stop() {
	if h.sys == nil {
		return
	}
	h.sys.Stop(context.Background())
	require.NoError(h.t, h.store.Close())
	h.sys = nil
}

func (h *harness) restart() { h.stop(); h.start() }

func (h *harness) state(id string) marquee.State {
	st, err := h.sys.Marquee(id)
	require.NoError(h.t, err)
	return st
}

// quiet waits until every routed message has been handled, so that moving
// the manual clock finds the actors at rest.
func (h *harness) quiet() {
	h.t.Helper()
	h.eventually("actors quiet", func() bool { return h.sys.Load().Queued == 0 })
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	require.Eventually(h.t, cond, 5*time.Second, time.Millisecond, what)
}

// TestM3M21M23I2StuckRetryIsDurableAndFiresOnce: M21, M3, M23. The retry deadline is
// persisted in the wake index with the snapshot; after a restart with the
// process down past it, it fires once, late, under a new generation.
func TestM3M21M23I2StuckRetryIsDurableAndFiresOnce(t *testing.T) {
	h := newHarness(t)
	_, err := h.sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	h.eventually("dispatched", func() bool { return len(h.disp.gens("m-1")) == 1 })
	h.eventually("dispatch recorded", func() bool { return h.state("m-1").Attempt.Dispatch == marquee.DispatchSent })

	h.stop()
	h.clock.Advance(7 * time.Minute) // down past the 5-minute stale mark
	h.start()
	h.eventually("retried once after restart", func() bool { return len(h.disp.gens("m-1")) == 2 })
	require.Equal(t, []uint64{1, 2}, h.disp.gens("m-1"), "I2: the retry took a fresh generation")
	h.eventually("retry recorded", func() bool { return h.state("m-1").RetryCount == 1 })

	h.restart()
	require.NoError(t, h.sys.Activate(context.Background(), "m-1")) // loaded and reconciled
	h.eventually("quiescent after the restart", atRest(h.sys))
	require.Equal(t, []uint64{1, 2}, h.disp.gens("m-1"), "M23: a fired deadline never fires twice")

	// The next retry is due one minute after the first (M21).
	h.clock.Advance(59 * time.Second)
	h.eventually("quiescent a second early", atRest(h.sys))
	require.Len(t, h.disp.gens("m-1"), 2)
	h.clock.Advance(2 * time.Second)
	h.eventually("second retry", func() bool { return len(h.disp.gens("m-1")) == 3 })
}

// TestProvisioningTimeoutFires: M22 through the shell's timer.
func TestProvisioningTimeoutFires(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, err := h.sys.Create(ctx, marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	h.eventually("dispatched", func() bool { return len(h.disp.gens("m-1")) == 1 })
	for i := 0; i < 8; i++ { // a chatty attempt: a callback every 4 minutes is never stuck
		_, err := h.sys.Callback(ctx, cbReq("m-1", "", marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.VMStarting}))
		require.NoError(t, err)
		h.clock.Advance(4 * time.Minute)
	}
	h.eventually("timed out", func() bool { return h.state("m-1").Lifecycle == marquee.Failed })
	require.Equal(t, marquee.Errored, h.state("m-1").Serving)
	require.Len(t, h.disp.gens("m-1"), 1, "a chatty attempt is not retried")
}

// TestPoolRecoveryReconcilesReservedJobs: A7. A reserved record whose owner
// has settled (its release was lost in a crash) is released on recovery and
// the next queued job admitted.
func TestPoolRecoveryReconcilesReservedJobs(t *testing.T) {
	h := newHarness(t)
	h.stop()
	store, err := persistence.Open(h.dir, persistence.Options{})
	require.NoError(t, err)
	b := store.NewBatch()
	failed := marquee.State{ID: "m-1", Kind: marquee.Tutorial, Pool: "default", Serving: marquee.Errored, Lifecycle: marquee.Failed, Generation: 1, DispatchedGeneration: 1}
	record.PutMarquee(b, nil, record.Marquee{State: failed})
	waiting := marquee.State{ID: "m-2", Kind: marquee.Tutorial, Pool: "default", Serving: marquee.Disabled, Lifecycle: marquee.Provisioning,
		Attempt: &marquee.Attempt{Action: marquee.ActionApply, Dispatch: marquee.DispatchWaiting}, Admission: &marquee.Admission{Pool: "default", Status: marquee.AdmissionQueued, Sequence: 2}}
	record.PutMarquee(b, nil, record.Marquee{State: waiting})
	b.Put(persistence.AdmissionKey("default", "m-1"), admission.Job{ID: "m-1", Sequence: 1, Status: admission.Reserved, Since: start})
	b.Put(persistence.AdmissionKey("default", "m-2"), admission.Job{ID: "m-2", Sequence: 2, Status: admission.Queued, Since: start})
	b.Set([]byte("a/default/m-9"), []byte("garbage"))
	b.Put(persistence.PoolKey("default"), record.PoolMeta{NextSequence: 3})
	require.NoError(t, b.Commit())
	require.NoError(t, store.Close())

	h.start()
	h.eventually("m-2 admitted and dispatched", func() bool { return len(h.disp.gens("m-2")) == 1 })
	v, err := h.sys.Pool(context.Background(), "default")
	require.NoError(t, err)
	require.Equal(t, []PoolJob{{Job: "m-2", Sequence: 2, Since: start}}, v.Reserved)
	require.Len(t, v.Malformed, 1, "A8: the malformed record is reported")
	require.Equal(t, "a/default/m-9", v.Malformed[0].Key)
}

// TestCrashAtEachStepIsReconciled panics inside the actor at each step of a
// transition; the supervisor restarts it, the snapshot is reloaded and the
// in-flight work reconciled, so the marquee still ends up dispatched.
func TestCrashAtEachStepIsReconciled(t *testing.T) {
	for _, point := range []string{runtime.FaultBeforePersist, runtime.FaultAfterPersist, runtime.FaultAfterEffects} {
		t.Run(point, func(t *testing.T) {
			h := newHarness(t)
			var fired atomic.Bool
			f := func(p, id string) {
				if p == point && id == "m-1" && fired.CompareAndSwap(false, true) {
					panic("injected at " + p)
				}
			}
			h.fault.Store(&f)
			_, err := h.sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
			if point == runtime.FaultBeforePersist {
				require.Error(t, err, "nothing was persisted, so nothing is answered as done")
				_, err = h.sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
			}
			if err != nil {
				require.ErrorIs(t, err, errs.Unavailable)
			}
			h.eventually("dispatched after the restart", func() bool {
				st, err := h.sys.Marquee("m-1")
				return err == nil && st.Attempt != nil && st.Attempt.Dispatch == marquee.DispatchSent
			})
			st := h.state("m-1")
			sent := h.disp.gens("m-1")
			require.Contains(t, sent, st.Generation)
			for i := 1; i < len(sent); i++ {
				require.Greater(t, sent[i], sent[i-1], "I2")
			}
			var restarts int
			for _, a := range h.sys.Actors() {
				if a.ID == "m-1" {
					restarts = a.Restarts
				}
			}
			require.Equal(t, 1, restarts)
		})
	}
}

// TestRestartLoopIsBounded: an actor that fails every time is parked after
// RestartLimit restarts and shown as failing, never restarted forever.
func TestRestartLoopIsBounded(t *testing.T) {
	h := newHarness(t)
	_, err := h.sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	f := func(p, id string) {
		if id == "m-1" && p == runtime.FaultBeforePersist {
			panic("always")
		}
	}
	h.fault.Store(&f)
	for i := 0; i < 6; i++ {
		_, _ = h.sys.Callback(context.Background(), cbReq("m-1", "", marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.VMStarting}))
	}
	var info ActorInfo
	for _, a := range h.sys.Actors() {
		if a.ID == "m-1" {
			info = a
		}
	}
	require.True(t, info.Parked, "%+v", info)
	require.Equal(t, 4, info.Restarts)
	require.Contains(t, info.LastFailure, "always")
	_, err = h.sys.Callback(context.Background(), cbReq("m-1", "", marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.VMStarting}))
	require.ErrorContains(t, err, "parked")
}

// TestConcurrentAdmissionsNeverExceedLimit: I7 through the real actors:
// many creates at once against limit 1.
func TestConcurrentAdmissionsNeverExceedLimit(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.sys.Create(context.Background(), marquee.Create{ID: fmt.Sprintf("m-%02d", i), Kind: marquee.Tutorial})
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	v, err := h.sys.Pool(context.Background(), "default")
	require.NoError(t, err)
	require.Len(t, v.Reserved, 1, "I7")
	require.Len(t, v.Queued, 19)
	for i := 1; i < len(v.Queued); i++ {
		require.Less(t, v.Queued[i-1].Sequence, v.Queued[i].Sequence)
	}
}

func live(h *harness, id string) bool {
	for _, a := range h.sys.Actors() {
		if a.ID == id {
			return true
		}
	}
	return false
}

// TestPassivationReleasesAndReactivates: an idle actor is stopped; the next
// message reactivates it from its snapshot, and a due deadline of a
// passivated entity still fires (the System owns the timers).
func TestPassivationReleasesAndReactivates(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.idleAfter = time.Minute })
	ctx := context.Background()
	_, err := h.sys.Create(ctx, marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	h.eventually("dispatch recorded", func() bool { return h.state("m-1").Attempt.Dispatch == marquee.DispatchSent })
	require.True(t, live(h, "m-1"))
	h.quiet()

	h.clock.Advance(61 * time.Second)
	h.eventually("passivated", func() bool { return !live(h, "m-1") })

	// A message reactivates it; its state is the snapshot's.
	ans, err := h.sys.Callback(ctx, cbReq("m-1", "d-1", marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.SSHConfiguring}))
	require.NoError(t, err)
	require.Contains(t, string(ans.Body), `"result":"applied"`)
	require.True(t, live(h, "m-1"))
	h.quiet()

	// Passivated again (the sweep runs every half idle period, so an idle
	// actor goes between 1 and 1.5 idle periods), a due deadline (the stuck
	// retry, M21) reactivates it.
	h.clock.Advance(91 * time.Second)
	h.eventually("passivated again", func() bool { return !live(h, "m-1") })
	h.clock.Advance(4 * time.Minute) // past the stale mark: last callback + 5 minutes
	h.eventually("retried by a timer while passivated", func() bool { return len(h.disp.gens("m-1")) == 2 })
}

// TestMessagesRacingPassivationAreNeverLost sends callbacks while the clock
// keeps pushing the actor into passivation; every callback is answered and
// recorded.
func TestMessagesRacingPassivationAreNeverLost(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.idleAfter = time.Second })
	ctx := context.Background()
	_, err := h.sys.Create(ctx, marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	h.eventually("dispatch recorded", func() bool { return h.state("m-1").Attempt.Dispatch == marquee.DispatchSent })
	stop := make(chan struct{})
	var ticks sync.WaitGroup
	ticks.Add(1)
	go func() {
		defer ticks.Done()
		for {
			select {
			case <-stop:
				return
			default:
				h.clock.Advance(2 * time.Second) // more than an idle period per tick
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	passivated := func() float64 {
		return testutilCounter(h.sys.cfg.Metrics.Runtime.Passivations.WithLabelValues("marquee"))
	}
	// At least 300 callbacks, and on until several passivations really
	// happened between them (bounded).
	n := 0
	for ; n < 300 || (passivated() < 5 && n < 5000); n++ {
		ans, err := h.sys.Callback(ctx, cbReq("m-1", fmt.Sprintf("race-%d", n), marquee.Callback{Verb: marquee.VerbRebooted, Generation: 0}))
		require.NoError(t, err, "callback %d", n)
		require.NotEmpty(t, ans.Body)
		if n%3 == 0 {
			time.Sleep(100 * time.Microsecond) // leave idle windows for the sweep to find
		}
	}
	close(stop)
	ticks.Wait()
	// The record keeps the last persistence.MaxDeliveries (M20), each
	// written from the one before: an instance that had not read what its
	// predecessor wrote would have dropped some of them.
	ds, err := record.MarqueeDeliveries(h.store, "m-1")
	require.NoError(t, err)
	require.Len(t, ds, min(n, persistence.MaxDeliveries))
	for i := max(0, n-persistence.MaxDeliveries); i < n; i++ {
		_, ok := ds.Find(fmt.Sprintf("race-%d", i))
		require.True(t, ok, "callback %d was recorded with its delivery", i)
	}
	passivations := testutilCounter(h.sys.cfg.Metrics.Runtime.Passivations.WithLabelValues("marquee"))
	t.Logf("passivations during the race: %v", passivations)
	require.Greater(t, passivations, 0.0, "the race really raced")
}

func testutilCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

// TestActorCrashAfterSettleReleasesTheSlot is the bug the simulator found
// (seed 92): the bootstrap's success was persisted, then the actor crashed
// before the slot release started; the restarted actor must release it
// again (I9), or the pool keeps a settled marquee's slot.
func TestActorCrashAfterSettleReleasesTheSlot(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var afterPersist atomic.Int32
	f := func(p, id string) {
		// m-1's fifth commit is the bootstrap's success: create, admission,
		// dispatch result, deployed, bootstrap.
		if p == runtime.FaultAfterPersist && id == "m-1" && afterPersist.Add(1) == 5 {
			panic("crash between the commit and the release")
		}
	}
	h.fault.Store(&f)
	_, err := h.sys.Create(ctx, marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	_, err = h.sys.Create(ctx, marquee.Create{ID: "m-2", Kind: marquee.Tutorial})
	require.NoError(t, err)
	h.eventually("dispatch recorded", func() bool { return h.state("m-1").Attempt.Dispatch == marquee.DispatchSent })
	_, err = h.sys.Callback(ctx, cbReq("m-1", "", marquee.Callback{Verb: marquee.VerbDeployed, Generation: 1,
		Connection: &marquee.Connection{Host: "h", Port: 22, User: "root", SSHPrivateKey: "k", FreeDomain: "d"}}))
	require.NoError(t, err)
	h.eventually("m-1 provisioned", func() bool { return h.state("m-1").Lifecycle == marquee.Provisioned })
	h.eventually("the crash happened where intended", func() bool { return afterPersist.Load() >= 5 })
	h.eventually("slot released and m-2 admitted", func() bool { return len(h.disp.gens("m-2")) == 1 })
	v, err := h.sys.Pool(ctx, "default")
	require.NoError(t, err)
	require.Equal(t, "m-2", v.Reserved[0].Job)
}

// TestInternalEventSurvivesAFailedWrite is the bug the simulator found at
// seeds 2805, 3366, 4214 and 4973: an internal event (here the bootstrap's
// result) whose write fails is tried again after a back-off instead of being
// dropped; nobody else would send it again.
func TestInternalEventSurvivesAFailedWrite(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, err := h.sys.Create(ctx, marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	h.eventually("dispatch recorded", func() bool { return h.state("m-1").Attempt.Dispatch == marquee.DispatchSent })
	var writes atomic.Int32
	f := func(p, id string) error {
		// The first write (the deployed callback) succeeds; the next two
		// (the bootstrap result) fail: only the actor can try those again.
		if p == runtime.FaultBeforePersist && id == "m-1" {
			if n := writes.Add(1); n == 2 || n == 3 {
				return fmt.Errorf("injected write error")
			}
		}
		return nil
	}
	h.writeFault.Store(&f)
	_, err = h.sys.Callback(ctx, cbReq("m-1", "", marquee.Callback{Verb: marquee.VerbDeployed, Generation: 1,
		Connection: &marquee.Connection{Host: "h", Port: 22, User: "root", SSHPrivateKey: "k", FreeDomain: "d"}}))
	require.NoError(t, err)
	h.eventually("first retry scheduled", func() bool { return h.sys.Load().Retries == 1 && writes.Load() == 2 })
	h.quiet()
	h.clock.Advance(time.Second)
	h.eventually("second retry scheduled", func() bool { return h.sys.Load().Retries == 1 && writes.Load() == 3 })
	h.quiet()
	require.Equal(t, marquee.Provisioning, h.state("m-1").Lifecycle)
	h.clock.Advance(2 * time.Second)
	h.eventually("provisioned after the retries", func() bool { return h.state("m-1").Lifecycle == marquee.Provisioned })
	require.Zero(t, h.sys.Load().Retries)
}

// echoingBootstrap fails with everything it was given in its message, as a
// careless script printing its stdin to stderr would.
type echoingBootstrap struct{}

func (echoingBootstrap) Bootstrap(_ context.Context, r driver.BootstrapRequest) error {
	return fmt.Errorf("probe failed for %s with key %s", r.Host, r.SSHKey)
}

// TestDriverOutputNeverLeaksSecrets: secrets echoed by a driver are scrubbed
// before they reach history.
func TestDriverOutputNeverLeaksSecrets(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	disp := &recordingDispatcher{}
	sys, err := Start(Config{Store: store, Clock: clock.NewManual(start), Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: disp, Bootstrapper: echoingBootstrap{}, ControlPlane: noChats{}, IdleAfter: -1})
	require.NoError(t, err)
	defer sys.Stop(context.Background())
	ctx := context.Background()
	_, err = sys.Create(ctx, marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(disp.gens("m-1")) == 1 }, 5*time.Second, time.Millisecond)
	_, err = sys.Callback(ctx, cbReq("m-1", "", marquee.Callback{Verb: marquee.VerbDeployed, Generation: 1,
		Connection: &marquee.Connection{Host: "203.0.113.7", Port: 22, User: "root", SSHPrivateKey: "-----BEGIN SECRET KEY-----"}}))
	require.NoError(t, err)
	var detail string
	require.Eventually(t, func() bool {
		hist, _ := record.History(store, "m-1", 1)
		if len(hist) == 1 && hist[0].Source == marquee.SourceBootstrap {
			detail = hist[0].Detail
			return true
		}
		return false
	}, 5*time.Second, time.Millisecond)
	require.Contains(t, detail, "203.0.113.7", "the error is kept")
	require.NotContains(t, detail, "BEGIN SECRET KEY", "the secret is not")
	require.Contains(t, detail, "[redacted]")
}

func cbReq(id, delivery string, cb marquee.Callback) CallbackRequest {
	return CallbackRequest{MarqueeID: id, DeliveryID: delivery, BodyHash: [32]byte{byte(len(delivery))}, Auth: CallbackAuth{Mode: "shared"}, Callback: cb}
}

// atRest reports whether s has nothing in flight: no message queued for
// an entity, no effect, no internal event waiting to be retried.
func atRest(s *System) func() bool {
	return func() bool {
		l := s.Load()
		return l.Queued == 0 && l.Effects == 0 && l.Retries == 0
	}
}
