// Package actors is warden's shell: its three kinds of entity (marquees,
// admission pools, preview environments) on the runtime (actors/runtime),
// one page each (marquee_kind.go, pool.go, environment_kind.go: the record and its
// codec, the machine lifted to it, its effects), and the System that
// starts them, recovers them, and answers the HTTP layer through a small
// typed API (api.go). The rules are the pure machines' (actors/marquee,
// actors/admission, actors/environment); the shell only persists, acts and
// answers, in that order.
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// Config wires a System.
type Config struct {
	Store *persistence.Store
	// Sealer seals the secrets a marquee's record holds before they are
	// written; nil keeps them in clear (tests, the simulator).
	Sealer  *trust.Sealer
	Clock   clock.Clock
	Machine marquee.Machine
	// Pools maps pool name to limit.
	Pools        map[string]int
	Dispatcher   driver.Dispatcher
	Bootstrapper driver.Bootstrapper
	ControlPlane driver.ControlPlane
	// CallbackURL is sent to every workflow run.
	CallbackURL string
	// CallbackKeys, when set, derive each dispatch's scoped callback
	// credential, valid for CallbackTokenTTL (zero: 24 hours).
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
	// timer reactivates it from its record. Zero means 10 minutes;
	// negative means never.
	IdleAfter time.Duration
	// Fault, if set, is called at the named points of every transition
	// that writes (runtime.FaultBeforePersist, FaultAfterPersist,
	// FaultAfterEffects): tests and the simulator panic there to prove a
	// crash at each point is restarted into reconciliation; an error at
	// FaultBeforePersist is a failed write.
	Fault func(point, id string) error
	// Scheduler runs the actors and effects (nil: goroutines); Hooks see
	// every step and failure. The simulator gives both.
	Scheduler runtime.Scheduler
	Hooks     Hooks
	// Host, if set, is the actor system shared with this process's
	// earlier and later starts (runtime.Host; the simulator's).
	Host *runtime.Host
	// Steps are the pure steps the System runs; a nil one is its machine's
	// own (the simulator runs a planted bug in one).
	Steps Steps
	// Env configures preview environments.
	Env EnvConfig
	// Secrets are the process's own secret values (tokens); driver output
	// is scrubbed of them before it is logged or kept in history.
	Secrets []string
	// Cluster makes this system one node of a cluster (C2-C4): it acts
	// only for the shards it owns, fences every commit, and hands
	// cross-entity messages for other shards to their owners. Nil is the
	// single node (runtime.SingleNode).
	Cluster Cluster
	// DedupRetention is how long a delivery's record is kept to answer
	// its repeats (M20; 72 h when zero). Older ones are pruned every
	// PruneEvery on the runtime's clock, so the simulator runs it too.
	DedupRetention time.Duration
	// Reserve, when set, refuses new work (creates, redeploys) while the
	// store's disk is below its space reserve; lifecycles under way
	// still commit.
	Reserve interface{ Check() error }
}

// Hooks see each kind's steps as they are taken (after their commit, or at
// once when they wrote nothing) and every actor failure: the simulator's
// oracles and the tests that count commits. A nil one sees nothing.
type Hooks struct {
	Marquee func(runtime.Committed[record.Marquee, marquee.Event, marquee.Outcome])
	Pool    func(runtime.Committed[record.Pool, admission.Event, admission.Outcome])
	Env     func(runtime.Committed[record.Environment, environment.Event, environment.Outcome])
	Branch  func(runtime.Committed[record.Branch, environment.NextGeneration, environment.BranchOutcome])
	Failed  func(actor string, err error)
}

// Cluster is what the System needs from a cluster node (C2-C4).
type Cluster = runtime.Cluster

// The kinds' pure steps, as a caller may wrap them.
type (
	MarqueeStep func(s marquee.State, ev marquee.Event, now time.Time) (marquee.State, marquee.Outcome)
	PoolStep    func(p admission.Pool, ev admission.Event, now time.Time) (admission.Pool, admission.Outcome)
	EnvStep     func(e environment.Env, ev environment.Event, now time.Time) (environment.Env, environment.Outcome)
)

// Steps are the kinds' pure steps, by kind.
type Steps struct {
	Marquee MarqueeStep
	Pool    PoolStep
	Env     EnvStep
}

// System is the running shell.
type System struct {
	// rounds are the environments' at-rest observation rounds in flight
	// (observeRound), by id.
	rounds   sync.Map
	cfg      Config
	rt       *runtime.Runtime
	log      *slog.Logger
	marquees *marquees
	pools    *pools
	envs     *environments
	branches *branches
	census   *census
	ready    atomic.Bool
	// stopWatch ends the platform's watch (EnvConfig.Watcher).
	stopWatch context.CancelFunc
}

// The kinds' names: in keys, logs, metrics, and the messages a step's
// outcome carries (entity.Message.Kind).
const (
	marqueeKindName = "marquee"
	poolKindName    = "pool"
	envKindName     = "environment"
	branchKindName  = "branch"
)

// Start builds the runtime and its kinds, recovers every pool and
// wakes every entity whose wake-index entry is due, then reports
// ready. On a read-only store recovery waits for Resume.
func Start(cfg Config) (*System, error) {
	cfg = withDefaults(cfg)
	rt, err := runtime.New(runtime.Config{Store: cfg.Store, Clock: cfg.Clock, Scheduler: cfg.Scheduler, Logger: cfg.Logger,
		Metrics: cfg.Metrics.Runtime, Failed: cfg.Hooks.Failed, Fault: cfg.Fault, Cluster: cfg.Cluster, AskTimeout: cfg.AskTimeout,
		RestartLimit: cfg.RestartLimit, RestartWindow: cfg.RestartWindow, IdleAfter: cfg.IdleAfter, Host: cfg.Host,
		DeliveryRetention: cfg.DedupRetention})
	if err != nil {
		return nil, err
	}
	s := &System{cfg: cfg, rt: rt, log: cfg.Logger}
	s.marquees = runtime.Register(rt, runtime.Kind[record.Marquee, marquee.Event, marquee.Outcome](
		marqueeKind{MarqueeWrites: record.MarqueeWrites{Sealer: cfg.Sealer}, sys: s, step: cfg.Steps.Marquee}))
	s.pools = runtime.Register(rt, runtime.Kind[record.Pool, admission.Event, admission.Outcome](
		poolKind{sys: s, step: cfg.Steps.Pool}))
	s.envs = runtime.Register(rt, runtime.Kind[record.Environment, environment.Event, environment.Outcome](
		envKind{sys: s, step: cfg.Steps.Env}))
	s.branches = runtime.Register(rt, runtime.Kind[record.Branch, environment.NextGeneration, environment.BranchOutcome](branchKind{sys: s}))
	s.marquees.OnCommit(cfg.Hooks.Marquee)
	s.pools.OnCommit(cfg.Hooks.Pool)
	s.envs.OnCommit(cfg.Hooks.Env)
	s.branches.OnCommit(cfg.Hooks.Branch)
	s.census = newCensus(s)
	if err := cfg.Metrics.Registry.Register(s.census); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if cfg.Store.Health().ReadOnly() != nil {
		// A read-only store: reads are served from it; recovery, which
		// would write, waits until Resume.
		s.log.Warn("started read-only: recovery waits until the store is writable")
		s.rt.Every(ReadOnlyRetry, s.tryWritable)
		return s, nil
	}
	if err := s.resume(); err != nil {
		rt.Shutdown()
		return nil, err
	}
	return s, nil
}

// SentWhileObserving is the runtime's count of messages routed while a
// step was observed (runtime.Runtime.SentWhileObserving): the simulator,
// where one thread runs every turn, holds it at zero.
func (s *System) SentWhileObserving() int64 { return s.rt.SentWhileObserving() }

func withDefaults(cfg Config) Config {
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
	if cfg.Steps.Marquee == nil {
		cfg.Steps.Marquee = cfg.Machine.Step
	}
	if cfg.Steps.Pool == nil {
		cfg.Steps.Pool = admission.Step
	}
	if cfg.Scheduler == nil {
		cfg.Scheduler = runtime.Goroutines(cfg.EffectTimeout, cfg.Clock)
	}
	if cfg.DedupRetention == 0 {
		cfg.DedupRetention = 72 * time.Hour
	}
	if cfg.CallbackTokenTTL == 0 {
		cfg.CallbackTokenTTL = 24 * time.Hour
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
	cfg.Env.Machine.Config.Worker = cfg.Env.Worker // the owner of the attempts the machine begins on its own
	if cfg.Steps.Env == nil {
		cfg.Steps.Env = cfg.Env.Machine.Step
	}
	if cfg.Cluster == nil {
		cfg.Cluster = runtime.SingleNode()
	}
	return cfg
}

// Resume finishes a read-only start once the store is writable again:
// recovery runs then, once, as it would have at start.
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
	s.rt.StartIdleSweep()
	s.rt.Every(PruneEvery, s.pruneDedup)
	s.rt.Every(PoolReconcileEvery, s.reconcilePools)
	if s.cfg.Env.ReconcileEvery > 0 {
		// The first round is now: whatever happened to the platform while
		// no warden ran (make previews stopped, a host rebooted) is seen at
		// start, not a round later.
		s.reconcileSweep()
		s.rt.Every(s.cfg.Env.ReconcileEvery, s.reconcileSweep)
	}
	if w := s.cfg.Env.Watcher; w != nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopWatch = cancel
		go s.watch(ctx, w)
	}
	return nil
}

// ReadOnlyRetry is how often a store that started read-only is tried
// read-write again.
const ReadOnlyRetry = 10 * time.Second

// tryWritable reopens a read-only store read-write and, once it is,
// recovers. It does nothing once the system is ready.
func (s *System) tryWritable() {
	if s.ready.Load() {
		return
	}
	ok, err := s.cfg.Store.TryWritable()
	if err != nil {
		s.log.Error("the read-only store could not be reopened", "err", err)
		return
	}
	if !ok {
		return
	}
	if err := s.Resume(); err != nil {
		s.log.Error("recovery after the store became writable failed", "err", err)
		return
	}
	s.log.Info("store writable: recovered and ready")
}

// PruneEvery is how often delivery records past their retention go.
const PruneEvery = time.Hour

// pruneDedup forgets deliveries older than the retention.
func (s *System) pruneDedup() {
	n, err := s.cfg.Store.PruneDedup(s.cfg.Clock.Now().Add(-s.cfg.DedupRetention))
	switch {
	case err != nil:
		s.log.Warn("dedup prune failed", "err", err)
	case n > 0:
		s.log.Info("dedup records pruned", "count", n)
	}
}

// watch follows the platform's own events: an environment whose
// platform changed under it is observed at once. A watch that ends with an
// error is started again after a second, for as long as the system runs.
func (s *System) watch(ctx context.Context, w driver.Watcher) {
	changed := func(id string) {
		// Only environments of this store: the platform may run another
		// warden's previews beside these.
		if environment.ValidID(id) {
			if ok, err := s.cfg.Store.Has(persistence.EnvKey(id)); ok && err == nil {
				s.envs.InTurn(id, s.reconcileTurn)
			}
		}
	}
	for ctx.Err() == nil {
		if err := w.Watch(ctx, changed); err != nil && ctx.Err() == nil {
			s.log.Warn("platform events: watch ended; the reconcile rounds still observe every environment", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// recover recovers every shard this node owns at start: a single node
// its one, a cluster node none yet (it recovers each as it takes it,
// AcquireShard).
func (s *System) recover() error {
	for _, shard := range s.cfg.Cluster.Owned() {
		if err := s.recoverShard(shard, true); err != nil {
			return err
		}
	}
	return nil
}

// recoverShard activates the shard's pools (rebuilt from storage) and
// wakes its entities with a wake-index entry: due ones now, later ones by
// timer. wait: the pools are rebuilt before it returns, and a
// failure is its error (a start); otherwise they are rebuilt in the
// background, their failures logged (a shard taken while serving).
func (s *System) recoverShard(shard int, wait bool) error {
	pools := 0
	for _, name := range s.poolNames() {
		if s.rt.Shard(s.pools.Key(name)) != shard {
			continue
		}
		pools++
		recoverPool := func() error {
			_, err := s.pools.Ask(context.Background(), name, runtime.Request[admission.Event]{Mode: runtime.Read})
			return err
		}
		if wait {
			if err := recoverPool(); err != nil {
				return fmt.Errorf("recover pool %s: %w", name, err)
			}
			continue
		}
		// Activated, not waited for: its Started recovers it while the
		// node's tick, which took the shard, goes on.
		s.pools.InTurn(name, func(*poolHandle) {})
	}
	wakes, err := s.rt.ArmWakes(func(k runtime.Key) bool { return s.rt.Shard(k) == shard })
	if err != nil {
		return err
	}
	s.log.Info("recovered", "shard", shard, "pools", pools, "wakes", wakes)
	return nil
}

// reconcileSweep gives every stored environment its reconciler's turn:
// each decides from its own record (an attempt in flight is its
// lease's business).
func (s *System) reconcileSweep() {
	ids, err := listEnvIDs(s.cfg.Store)
	if err != nil {
		s.warnStore("reconciler: list environments", err)
	}
	for _, id := range ids {
		s.envs.InTurn(id, s.reconcileTurn)
	}
}

// reconcileTurn is an environment's reconciler's turn, in its
// mailbox.
func (s *System) reconcileTurn(h *envHandle) { envKind{sys: s}.reconcile(h) }

// poolNames are the configured pools, in order.
func (s *System) poolNames() []string {
	names := make([]string, 0, len(s.cfg.Pools))
	for n := range s.cfg.Pools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// observeDriver times one driver call by driver and outcome.
func (s *System) observeDriver(name string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s.cfg.Metrics.Drivers.WithLabelValues(name, outcome).Observe(s.cfg.Clock.Since(start).Seconds())
}

// warnStore logs a failed read or write of the background work (census,
// reconciler), unless the store is sealed: that was said once, as one
// ERROR line, and repeating it every sweep would bury it.
func (s *System) warnStore(msg string, err error) {
	if s.cfg.Store.Health().Failed() != nil {
		return
	}
	s.log.Warn(msg, "err", err)
}

// newWork is nil while new work may start: the disk is above its space
// reserve.
func (s *System) newWork() error {
	if s.cfg.Reserve == nil {
		return nil
	}
	return s.cfg.Reserve.Check()
}

// eventName is an event's type name without its package, for logs.
func eventName(ev any) string {
	s := fmt.Sprintf("%T", ev)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return s[i+1:]
		}
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
