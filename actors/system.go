// Package actors is warden's actor shell on protoactor-go. A registry actor
// (the supervisor) activates one actor per marquee and one per admission
// pool on demand; each entity actor serializes its entity's transitions in
// its mailbox. For every message an entity actor runs the pure machine
// (actors/marquee, actors/admission), writes the new snapshot, history,
// dedup record, admission change and wake-index entry as one synced Pebble
// batch, then starts the effects on goroutines outside the mailbox (their
// results come back as messages that carry their generation), then answers.
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/trust"
	"github.com/wardenhq/warden/persistence"

	"github.com/wardenhq/warden/actors/errs"
)

// Errors the HTTP layer maps to status codes.
var (
	ErrNotFound    error = errs.NotFound
	ErrUnavailable error = errs.Unavailable
	// ErrIdempotencyKeyReused: a delivery id came again with another body
	// (T5), 409.
	ErrIdempotencyKeyReused error = errs.IdempotencyKeyReused
	// ErrOverloaded: the entity's mailbox is past MaxInbox; the caller is
	// told to come back rather than queued without bound.
	ErrOverloaded error = errs.Overloaded
)

// MaxInbox bounds the messages waiting for one entity actor. A marquee sees
// a handful of callbacks per minute; a thousand waiting means something is
// hammering it, and waiting longer would only time the callers out.
const MaxInbox = 1000

// Config wires a System.
type Config struct {
	Store   *persistence.Store
	Clock   clock.Clock
	Machine marquee.Machine
	// Pools maps pool name to limit (A1).
	Pools        map[string]int
	Dispatcher   driver.Dispatcher
	Bootstrapper driver.Bootstrapper
	ControlPlane driver.ControlPlane
	// CallbackURL is sent to every workflow run.
	CallbackURL string
	// CallbackKeys, when set, derive each dispatch's scoped callback
	// credential (T1), valid for CallbackTokenTTL (zero: 24 hours).
	CallbackKeys     *trust.Keyring
	CallbackTokenTTL time.Duration
	Logger           *slog.Logger
	Metrics          *Metrics
	// EffectTimeout bounds one driver call.
	EffectTimeout time.Duration
	// AskTimeout bounds how long a caller waits for an actor's answer.
	AskTimeout time.Duration
	// RestartLimit failures within RestartWindow park an actor instead of
	// restarting it again.
	RestartLimit  int
	RestartWindow time.Duration
	// IdleAfter passivates an entity actor that has had no message for this
	// long: it is stopped and its memory released; the next message or due
	// timer reactivates it from its snapshot. Zero means 10 minutes;
	// negative means never.
	IdleAfter time.Duration
	// Fault, if set, is called at named points of every marquee transition
	// (FaultBeforePersist, FaultAfterPersist, FaultAfterEffects). Tests and
	// the simulator panic there to prove that a crash at each step is
	// restarted into reconciliation; an error returned at
	// FaultBeforePersist is a failed write. Production leaves it nil.
	Fault func(point, marqueeID string) error
	// Sim, when set, runs the system inside the deterministic simulator.
	Sim *SimHooks
	// Env configures preview environments (issue 5, in progress).
	Env EnvConfig
	// Secrets are the process's own secret values (tokens); driver output
	// is scrubbed of them before it is logged or kept in history.
	Secrets []string
	// Cluster, when set, makes this system one node of a cluster (C2-C4):
	// it acts only for the shards it owns, fences every commit, and hands
	// cross-entity messages for other shards to their owners. Nil is the
	// single-node default.
	Cluster Cluster
	// Reserve, when set, refuses new work (creates, redeploys) while the
	// store's disk is below its space reserve (S9); lifecycles under way
	// still commit.
	Reserve interface{ Check() error }
	// Plant disables one guard on purpose (see sim/planted.go); only the
	// simulator's planted-bug runs set it.
	Plant string
}

// SimHooks let the simulator own every source of concurrency: actors run
// one message per step on its dispatcher, a caller waiting for an answer
// pumps that dispatcher instead of blocking, effects are handed to it
// instead of started on goroutines, and every durable transition is shown
// to its oracles.
type SimHooks struct {
	Dispatcher actor.Dispatcher
	Mailbox    actor.MailboxProducer
	// Pump runs one queued actor step; false when nothing is queued.
	Pump func() bool
	// Effect receives a driver call to run when the simulator decides.
	Effect func(run func(ctx context.Context))
	// Committed sees every step of every kind that the runner took, after
	// its commit (or at once, when it wrote nothing): one hook for the
	// oracles, whatever the entity.
	Committed func(c Commit)
	// ActorFailed sees every actor failure (a panic) before the supervisor
	// decides, so the simulator can tell injected ones from bugs.
	ActorFailed func(actor string, reason any)
	// EnvEffect, when set, receives an environment driver call instead of
	// Effect, with its request, so the simulator can pause a worker past
	// its lease (E7). It answers whether the worker renews its lease while
	// the call runs: a paused worker's renewals pause with it.
	EnvEffect func(req driver.CapabilityRequest, run func(ctx context.Context)) (renews bool)
}

// Commit is one step the runner took, shown to the simulator's oracles:
// Event is the machine's event, Before and After the durable record
// (persistence.MarqueeRecord, admission.Pool, persistence.EnvRecord,
// environment.Branch), Ready the step's entity.Ready (marquee.Ready,
// admission.Ready, environment.Outcome, environment.BranchReady); Wrote
// says whether it was written.
type Commit struct {
	Kind          string
	ID            string
	Event         any
	Before, After any
	Ready         any
	Wrote         bool
}

// committed shows a durable transition to the simulator, if it watches.
func (s *System) committed(k kind, id string, ev, before, after, ready any, wrote bool) {
	if h := s.cfg.Sim; h != nil && h.Committed != nil {
		h.Committed(Commit{Kind: string(k), ID: id, Event: ev, Before: before, After: after, Ready: ready, Wrote: wrote})
	}
}

// fault calls the fault hook at a named point of a transition (tests and
// the simulator inject crashes and failed writes there).
func (s *System) fault(point, id string) error {
	if f := s.cfg.Fault; f != nil {
		return f(point, id)
	}
	return nil
}

// maxInternalRetries bounds how often an internal event (an effect's
// result, a reconciliation, a due deadline, a pool's decision, a lease
// renewal) is tried again when its transition cannot be persisted: 1 s
// doubling, about a minute in all. Nobody else would resend it, so
// dropping it after one failed write would lose it (a slot never released,
// a result never seen).
const maxInternalRetries = 6

// retryEvent is an internal event whose transition could not be
// persisted, routed to its entity again after a back-off. Every kind of
// actor handles it the same way: apply ev with the next attempt number.
type retryEvent struct {
	ev      any
	attempt int
}

// retryLater schedules an internal event of any kind of entity again
// after a failed write (the same policy for every kind), or gives up
// after maxInternalRetries with an error in the log.
func (s *System) retryLater(k kind, id string, ev any, attempt int, err error) {
	if attempt >= maxInternalRetries {
		s.log.Error("transition not persisted; giving up", "kind", k, "id", id, "event", fmt.Sprintf("%T", ev), "attempts", attempt+1, "err", err)
		return
	}
	s.log.Warn("transition not persisted; will retry", "kind", k, "id", id, "event", fmt.Sprintf("%T", ev), "err", err)
	s.retries.Add(1)
	s.cfg.Clock.AfterFunc(time.Second<<attempt, func() {
		s.route(k, id, retryEvent{ev: ev, attempt: attempt + 1})
	})
}

// PlantAnswerBeforePersist is the planted bug that answers a callback
// before its transition is durable (I5); see sim/planted.go.
const PlantAnswerBeforePersist = "persist-before-answer"

// Fault points of a marquee transition.
const (
	FaultBeforePersist = "before-persist"
	FaultAfterPersist  = "after-persist"
	FaultAfterEffects  = "after-effects"
)

// System is the running shell.
type System struct {
	cfg      Config
	as       *actor.ActorSystem
	registry *actor.PID
	reg      *registryState
	ready    atomic.Bool
	stopping atomic.Bool
	// effects counts driver calls in flight (outside every mailbox).
	effects atomic.Int64
	// retries counts internal events waiting to be tried again after a
	// failed write.
	retries atomic.Int64
	timers  wakeTimers
	props   map[kind]*actor.Props
	log     *slog.Logger
}

// Start builds the actor system, recovers every pool (A7) and wakes every
// entity whose wake-index entry is due (M23), then reports ready.
func Start(cfg Config) (*System, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.EffectTimeout == 0 {
		cfg.EffectTimeout = 30 * time.Second
	}
	if cfg.CallbackTokenTTL == 0 {
		cfg.CallbackTokenTTL = 24 * time.Hour
	}
	if cfg.AskTimeout == 0 {
		cfg.AskTimeout = 10 * time.Second
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = 10 * time.Minute
	}
	if cfg.Env.Machine.Config.LeaseFor == 0 {
		cfg.Env.Machine = environment.Machine{Config: environment.DefaultConfig()}
	}
	if cfg.Env.NotifyBackoff == 0 {
		cfg.Env.NotifyBackoff = 30 * time.Second
	}
	if cfg.Env.ReconcileEvery == 0 {
		cfg.Env.ReconcileEvery = 30 * time.Second
	}
	if cfg.Env.Worker == "" {
		cfg.Env.Worker = "warden"
	}
	if cfg.RestartLimit == 0 {
		cfg.RestartLimit = 5
		cfg.RestartWindow = time.Minute
	}
	s := &System{cfg: cfg, log: cfg.Logger}
	s.as = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler) // ours log; the library's would only repeat
	}))
	s.reg = &registryState{entries: map[key]*entry{}}
	if cfg.Sim == nil {
		// The census reads the store when scraped; the simulator has no
		// scraper and must not read a wall clock.
		var already prometheus.AlreadyRegisteredError
		if err := cfg.Metrics.Registry.Register(newStateCounts(s)); err != nil && !errors.As(err, &already) {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	// One Props per kind, shared by every spawn; a lock-free mailbox holds
	// no preallocated ring, which matters at a million marquees.
	opts := []actor.PropsOption{actor.WithMailbox(actor.UnboundedLockfree())}
	if cfg.Sim != nil {
		opts = []actor.PropsOption{actor.WithMailbox(cfg.Sim.Mailbox), actor.WithDispatcher(cfg.Sim.Dispatcher)}
	}
	s.props = map[kind]*actor.Props{
		kindMarquee: actor.PropsFromProducer(func() actor.Actor { return &marqueeActor{sys: s} }, opts...),
		kindPool:    actor.PropsFromProducer(func() actor.Actor { return &poolActor{sys: s} }, opts...),
		kindEnv:     actor.PropsFromProducer(func() actor.Actor { return &envActor{sys: s} }, opts...),
		kindBranch:  actor.PropsFromProducer(func() actor.Actor { return &branchActor{sys: s} }, opts...),
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &registry{sys: s} },
		append([]actor.PropsOption{actor.WithSupervisor(&boundedRestart{sys: s})}, opts...)...)
	pid, err := s.as.Root.SpawnNamed(props, "registry")
	if err != nil {
		return nil, fmt.Errorf("spawn registry: %w", err)
	}
	s.registry = pid
	if cfg.Store.Health().ReadOnly() != nil {
		// A read-only store (S4): reads are served from it; recovery, which
		// would write, waits until Resume.
		s.log.Warn("started read-only: recovery waits until the store is writable")
		return s, nil
	}
	if err := s.resume(); err != nil {
		s.as.Shutdown()
		return nil, err
	}
	return s, nil
}

// Resume finishes a read-only start once the store is writable again
// (S4): recovery runs then, once, as it would have at start.
func (s *System) Resume() error {
	if s.ready.Load() {
		return nil
	}
	return s.resume()
}

func (s *System) resume() error {
	if err := s.recover(); err != nil {
		return err
	}
	s.ready.Store(true)
	s.armIdleSweep()
	s.armReconcileSweep()
	return nil
}

// armIdleSweep schedules the idle sweep: one timer for the whole system, not
// one per actor (a timer and its closure would be an eighth of an actor's
// memory budget). Every IdleAfter/2 it offers passivation to each marquee
// and branch actor that has had no message for IdleAfter (environment
// actors stay: the reconciler visits them anyway).
func (s *System) armIdleSweep() {
	if s.cfg.IdleAfter < 0 || s.stopping.Load() {
		return
	}
	stop := s.cfg.Clock.AfterFunc(s.cfg.IdleAfter/2, func() {
		cutoff := s.cfg.Clock.Now().Add(-s.cfg.IdleAfter).UnixNano()
		var idle []*actor.PID
		s.reg.mu.Lock()
		for k, e := range s.reg.entries {
			if (k.kind == kindMarquee || k.kind == kindBranch) && e.pid != nil && !e.passivating && !e.restart.parked &&
				e.inbox.Load() == 0 && e.lastRouted.Load() <= cutoff {
				idle = append(idle, e.pid)
			}
		}
		s.reg.mu.Unlock()
		// Deterministic order for the simulator: by actor name.
		sort.Slice(idle, func(i, j int) bool { return idle[i].Id < idle[j].Id })
		for _, pid := range idle {
			s.as.Root.Send(pid, idleCheck{})
		}
		s.armIdleSweep()
	})
	s.timers.mu.Lock()
	s.timers.sweepStop = stop
	s.timers.mu.Unlock()
}

// recover activates every pool (rebuilt from storage, A7) and wakes every
// entity with a wake-index entry: due ones now, later ones by timer.
func (s *System) recover() error {
	if s.cfg.Cluster != nil {
		// A cluster node recovers each shard when it acquires it
		// (AcquireShard); it owns nothing yet.
		return nil
	}
	names := s.poolNames()
	for _, n := range names {
		if err := s.askPool(n, func(reply chan<- any) any { return poolPing{reply: reply} }); err != nil {
			return fmt.Errorf("recover pool %s: %w", n, err)
		}
	}
	wakes, err := s.armWakes(func(key) bool { return true })
	if err != nil {
		return err
	}
	s.log.Info("recovered", "pools", len(names), "wakes", wakes)
	return nil
}

// armWakes arms a timer for every wake-index entry of an entity keep
// accepts, and says how many: due ones fire now, the others stay on disk
// until their time.
func (s *System) armWakes(keep func(key) bool) (int, error) {
	wakes, err := s.cfg.Store.Wakes(time.Unix(0, 1<<62))
	if err != nil {
		return 0, fmt.Errorf("read wake index: %w", err)
	}
	n := 0
	for _, w := range wakes {
		k := key{kindMarquee, w.ID}
		if w.Kind == persistence.KindEnvironment {
			k = key{kindEnv, w.ID}
		}
		if keep(k) {
			s.armWake(k, w.At)
			n++
		}
	}
	return n, nil
}

// poolNames are the configured pools, in order.
func (s *System) poolNames() []string {
	names := make([]string, 0, len(s.cfg.Pools))
	for n := range s.cfg.Pools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Ready reports whether recovery has finished and the system is not
// stopping.
func (s *System) Ready() bool { return s.ready.Load() && !s.stopping.Load() }

// Readiness says why the system takes no writes now: the store's failure
// or read-only reason (S2, S4), or that it is recovering or stopping; nil
// when it is ready.
func (s *System) Readiness() error {
	if f := s.cfg.Store.Health().Problem(); f != nil {
		return f
	}
	if !s.Ready() {
		return fmt.Errorf("%w: recovering or shutting down", ErrUnavailable)
	}
	return nil
}

// Readable says why reads cannot be served now: a sealed store (S5), or
// recovery that has not finished on a writable one. A read-only store is
// read (S4).
func (s *System) Readable() error {
	h := s.cfg.Store.Health()
	if f := h.Failed(); f != nil {
		return f
	}
	if h.ReadOnly() != nil && !s.stopping.Load() {
		return nil
	}
	return s.Readiness()
}

// Stop refuses new work, lets effects in flight finish and their results
// land in their mailboxes (so a graceful stop leaves no outcome unknown),
// then stops every actor after the message in hand. ctx bounds the wait.
func (s *System) Stop(ctx context.Context) {
	if s.stopping.Swap(true) {
		return // stopping twice is harmless
	}
	// Effects may start more work as their results are handled, so wait
	// until both counts are zero together (or ctx ends).
wait:
	for s.effects.Load() > 0 || s.pending() > 0 {
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			s.log.Warn("stopping with work in flight", "effects", s.effects.Load(), "messages", s.pending())
			break wait
		}
	}
	s.stopWakes()
	s.timers.mu.Lock()
	for _, stop := range []func() bool{s.timers.sweepStop, s.timers.reconcileStop} {
		if stop != nil {
			stop()
		}
	}
	s.timers.mu.Unlock()
	_ = s.as.Root.StopFuture(s.registry).Wait()
	s.as.Shutdown()
}

// Quiescent reports whether nothing is in flight: no driver call, no
// message waiting for an entity actor, no internal event waiting to be
// retried. With a manual clock it is how a test knows that "nothing
// happened" has had its chance to be false, instead of sleeping.
func (s *System) Quiescent() bool {
	return s.effects.Load() == 0 && s.pending() == 0 && s.retries.Load() == 0
}

// PendingRetries is how many internal events wait to be tried again after a
// failed write (the simulator's oracles wait for them).
func (s *System) PendingRetries() int64 { return s.retries.Load() }

// pending counts messages routed to entity actors and not yet handled.
func (s *System) pending() int64 {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	var n int64
	for _, e := range s.reg.entries {
		if !e.restart.parked { // a parked actor's mailbox is never handled
			n += e.inbox.Load()
		}
	}
	return n
}

// warnStore logs a failed read or write of the background work (census,
// reconciler), unless the store is sealed: that was said once, as one
// ERROR line, and repeating it every sweep would bury it (S2).
func (s *System) warnStore(msg string, err error) {
	if s.cfg.Store.Health().Failed() != nil {
		return
	}
	s.log.Warn(msg, "err", err)
}

// newWork is nil while new work may start: the disk is above its space
// reserve (S9).
func (s *System) newWork() error {
	if s.cfg.Reserve == nil {
		return nil
	}
	return s.cfg.Reserve.Check()
}

// Metrics returns the system's metrics.
func (s *System) Metrics() *Metrics { return s.cfg.Metrics }

// Store returns the durable record (read-only use by the HTTP layer).
func (s *System) Store() *persistence.Store { return s.cfg.Store }

// Machine returns the marquee machine (its config shapes views).
func (s *System) Machine() marquee.Machine { return s.cfg.Machine }

// Now is the system clock's time.
func (s *System) Now() time.Time { return s.cfg.Clock.Now() }

// --- asking actors ----------------------------------------------------------------

// ask routes a message built around a reply channel and waits for the
// answer, bounded by AskTimeout.
func (s *System) ask(ctx context.Context, k kind, id string, build func(reply chan<- any) any) (any, error) {
	if s.stopping.Load() {
		return nil, ErrUnavailable
	}
	if f := s.cfg.Store.Health().Problem(); f != nil {
		// Sealed or read-only: answered at once, by its cause (S2).
		return nil, f
	}
	fence, err := s.fenceOf(k, id)
	if err != nil {
		return s.askRemote(ctx, k, id, build)
	}
	before := s.instance(k, id)
	r, err := s.askLocal(ctx, k, id, build)
	return s.confirmed(ctx, k, id, before, fence.Epoch, r, err)
}

// instanceMark is an entity actor instance and how many fenced commits it
// had made, when a request was sent to it.
type instanceMark struct {
	e       *entry
	commits int64
}

func (s *System) instance(k kind, id string) instanceMark {
	if s.cfg.Cluster == nil {
		return instanceMark{}
	}
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	e := s.reg.entries[key{k, id}]
	if e == nil {
		return instanceMark{}
	}
	return instanceMark{e: e, commits: e.commits.Load()}
}

// askLocal asks an actor of this node and waits for its answer.
func (s *System) askLocal(ctx context.Context, k kind, id string, build func(reply chan<- any) any) (any, error) {
	s.reg.mu.Lock()
	e := s.reg.entries[key{k, id}]
	s.reg.mu.Unlock()
	if e != nil && e.inbox.Load() >= MaxInbox {
		return nil, fmt.Errorf("%w: %s %s has %d messages waiting", ErrOverloaded, k, id, e.inbox.Load())
	}
	reply := make(chan any, 1)
	s.route(k, id, build(reply))
	if s.cfg.Sim != nil {
		// One thread: run the actors until the answer is there. An empty
		// queue with no answer means none will come (the actor crashed).
		for {
			select {
			case r := <-reply:
				if err, ok := r.(error); ok {
					return nil, err
				}
				return r, nil
			default:
			}
			if !s.cfg.Sim.Pump() {
				return nil, fmt.Errorf("%w: %s %s did not answer", ErrUnavailable, k, id)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AskTimeout)
	defer cancel()
	select {
	case r := <-reply:
		if err, ok := r.(error); ok {
			return nil, err
		}
		return r, nil
	case <-s.cfg.Store.Health().Sealed():
		// The store failed under the actor's write, which never returns
		// (S1): the caller hears why at once (S2).
		return nil, s.cfg.Store.Health().Failed()
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %s %s did not answer in time", ErrUnavailable, k, id)
	}
}

func (s *System) askPool(name string, build func(reply chan<- any) any) error {
	_, err := s.ask(context.Background(), kindPool, name, build)
	return err
}

// route sends msg to the entity. A live actor gets it directly; anything
// else (absent, parked) goes through the registry, which alone activates
// actors, so two activations of one entity can never race.
func (s *System) route(k kind, id string, msg any) {
	if !s.owns(k, id) {
		s.routeRemote(k, id, msg)
		return
	}
	kk := key{k, id}
	s.reg.mu.Lock()
	e := s.reg.entries[kk]
	direct := e != nil && e.pid != nil && !e.restart.parked && !e.passivating
	if direct {
		e.inbox.Add(1)
		e.lastRouted.Store(s.cfg.Clock.Now().UnixNano())
	}
	s.reg.mu.Unlock()
	if direct {
		s.cfg.Metrics.MailboxDepth.Inc()
		s.as.Root.Send(e.pid, msg)
		return
	}
	s.as.Root.Send(s.registry, routed{key: kk, msg: msg})
}

// goEffect runs one effect outside every mailbox, bounded by EffectTimeout.
func (s *System) goEffect(f func(ctx context.Context)) {
	if s.cfg.Sim != nil {
		s.cfg.Sim.Effect(f)
		return
	}
	s.effects.Add(1)
	go func() {
		defer s.effects.Add(-1)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.EffectTimeout)
		defer cancel()
		f(ctx)
	}()
}

// mintCallbackToken derives the scoped credential of one dispatch (T1); ""
// when no signing keys are configured.
func (s *System) mintCallbackToken(marqueeID string, generation uint64) string {
	if s.cfg.CallbackKeys == nil {
		return ""
	}
	return trust.MintScoped(s.cfg.CallbackKeys, marqueeID, generation, s.cfg.Clock.Now().Add(s.cfg.CallbackTokenTTL))
}
