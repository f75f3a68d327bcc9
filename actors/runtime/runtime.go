package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// MaxInbox bounds the messages waiting for one entity. A marquee sees a
// handful of callbacks a minute; a thousand waiting means something is
// hammering it, and waiting longer would only time the callers out.
const MaxInbox = 1000

// maxHeld bounds the answers one entity holds until its state allows them
// (A10); a caller beyond it is told to retry rather than queued in memory.
const maxHeld = 64

// Fault points of a transition (Config.Fault).
const (
	FaultBeforePersist = "before-persist"
	FaultAfterPersist  = "after-persist"
	FaultAfterEffects  = "after-effects"
)

// Config wires a Runtime.
type Config struct {
	Store     *persistence.Store
	Clock     clock.Clock
	Scheduler Scheduler
	Logger    *slog.Logger
	Metrics   *Metrics
	// Failed, if set, sees every actor failure (a panic, as an error)
	// before the supervisor decides: the simulator's oracle. Each kind's
	// steps are seen through Entities.OnCommit.
	Failed func(actor string, err error)
	// Fault, if set, is called at the named points of every transition
	// that writes; tests and the simulator panic there to show that a
	// crash at each point is restarted into reconciliation, and an error
	// at FaultBeforePersist is a failed write.
	Fault func(point, id string) error
	// Cluster makes this runtime one node's: it acts only for the shards
	// it owns, fences every commit and confirms every answer.
	// Nil is SingleNode(), the null cluster of a process alone.
	Cluster Cluster
	// AskTimeout bounds how long a caller waits for an answer.
	AskTimeout time.Duration
	// RestartLimit failures within RestartWindow park an actor instead of
	// restarting it again.
	RestartLimit  int
	RestartWindow time.Duration
	// IdleAfter passivates an entity that has had no message for this
	// long (its Kind agreeing); negative: never.
	IdleAfter time.Duration
	// DeliveryRetention is how long an entity's record keeps a delivery
	// it answered, at most persistence.MaxDeliveries of them; 72 h
	// if zero.
	DeliveryRetention time.Duration
	// Host, if set, is the actor system this runtime runs on, shared with
	// the runtimes of the same process before and after it; nil: one of
	// its own, shut down by Stop.
	Host *Host
}

// Host is an actor system that runtimes run on one after another. The
// simulator starts a process again after every crash, dozens of times a
// seed, and a new actor system costs protoactor's process registry
// (tens of thousands of small maps), a large share of the simulator's CPU.
// A runtime on a
// Host names its registry apart from its predecessors' and leaves the
// system running when it stops; a crashed predecessor's actors stay
// registered, and its scheduler, which alone would run them, is gone.
type Host struct {
	as    *actor.ActorSystem
	count atomic.Int64

	mu       sync.Mutex
	runtimes []*Runtime // started on it since its last Reset
}

// NewHost makes a Host.
func NewHost() *Host { return &Host{as: newActorSystem()} }

// Reset unregisters every actor the Host's runtimes left behind, so that
// a runtime of another world can run on it: the simulator carries its
// Hosts from seed to seed, since making one is a twentieth of its CPU.
// Only once none of those runtimes is stepped again.
func (h *Host) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	reg := h.as.ProcessRegistry
	for _, rt := range h.runtimes {
		rt.reg.mu.Lock()
		for _, e := range rt.reg.byPID {
			reg.Remove(e.pid)
		}
		rt.reg.mu.Unlock()
		reg.Remove(rt.registry)
	}
	h.runtimes = nil
	// Names start again as on a new Host; an actor Reset missed would
	// make the next runtime's start fail on its name, not leak unseen.
	h.count.Store(0)
}

// adopt records a runtime started on the Host, for Reset.
func (h *Host) adopt(rt *Runtime) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runtimes = append(h.runtimes, rt)
}

func newActorSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler) // ours log; the library's would only repeat
	}))
}

// Runtime runs every entity of every registered kind.
type Runtime struct {
	cfg      Config
	log      *slog.Logger
	as       *actor.ActorSystem
	registry *actor.PID
	reg      registryState
	kinds    map[string]kindOps
	timers   wakeTimers
	// single is a process alone (Config.Cluster is SingleNode): the only
	// writer of its store, it neither fences, guards nor confirms.
	single   bool
	stopping atomic.Bool
	// effects counts effects in flight (outside every mailbox); retries
	// internal events waiting to be tried again after a failed write.
	effects, retries atomic.Int64
	// observing counts Observe hooks running (observe), and
	// sentWhileObserving the messages routed meanwhile (SentWhileObserving).
	observing          atomic.Int32
	sentWhileObserving atomic.Int64
	// unsettled are the commits whose outcome is unknown and that could
	// not be made final yet, by entity.
	unsettled struct {
		sync.Mutex
		m map[Key]persistence.Fence
	}
	// settled is nudged whenever work in flight may have reached zero, so
	// that Stop waits on events, not on a clock (a manual clock's ticker
	// never fires).
	settled chan struct{}
}

// nudge tells a waiting Stop to look again; before Stop, every message
// would pay for a channel send nobody reads.
func (rt *Runtime) nudge() {
	if !rt.stopping.Load() {
		return
	}
	select {
	case rt.settled <- struct{}{}:
	default:
	}
}

// New builds a runtime; kinds are registered with Register before the
// first message.
func New(cfg Config) (*Runtime, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Scheduler == nil {
		cfg.Scheduler = Goroutines(30*time.Second, cfg.Clock)
	}
	if cfg.DeliveryRetention == 0 {
		cfg.DeliveryRetention = 72 * time.Hour
	}
	if cfg.AskTimeout == 0 {
		cfg.AskTimeout = 10 * time.Second
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = 10 * time.Minute
	}
	if cfg.RestartLimit == 0 {
		cfg.RestartLimit, cfg.RestartWindow = 5, time.Minute
	}
	if cfg.Cluster == nil {
		cfg.Cluster = SingleNode()
	}
	_, single := cfg.Cluster.(singleNode)
	rt := &Runtime{cfg: cfg, log: cfg.Logger, kinds: map[string]kindOps{}, single: single, settled: make(chan struct{}, 1)}
	rt.reg.entries = map[Key]*entry{}
	rt.reg.byPID = map[string]*entry{}
	name := "registry"
	if cfg.Host != nil {
		rt.as = cfg.Host.as
		name = fmt.Sprintf("registry-%d", cfg.Host.count.Add(1))
	} else {
		rt.as = newActorSystem()
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &registry{rt: rt} },
		append([]actor.PropsOption{actor.WithSupervisor(&boundedRestart{rt: rt})}, actorOptions(cfg.Scheduler)...)...)
	pid, err := rt.as.Root.SpawnNamed(props, name)
	if err != nil {
		return nil, fmt.Errorf("spawn registry: %w", err)
	}
	rt.registry = pid
	if cfg.Host != nil {
		cfg.Host.adopt(rt)
	}
	cfg.Metrics.current.Store(rt)
	return rt, nil
}

// Now is the runtime's clock.
func (rt *Runtime) Now() time.Time { return rt.cfg.Clock.Now() }

// Clock is the runtime's clock.
func (rt *Runtime) Clock() clock.Clock { return rt.cfg.Clock }

// Store is the runtime's store.
func (rt *Runtime) Store() *persistence.Store { return rt.cfg.Store }

// Logger is the runtime's logger.
func (rt *Runtime) Logger() *slog.Logger { return rt.log }

// Stopping reports whether Stop has begun.
func (rt *Runtime) Stopping() bool { return rt.stopping.Load() }

// SentWhileObserving counts the messages routed while some step's Observe
// ran. Observe is for logs and metrics and sends nothing (a step's
// messages are its outcome's, sent after the commit and the ownership
// check); where one thread runs every turn (the simulator, which holds it
// at zero) a count here is an Observe that sent. Under production's
// workers other actors route meanwhile, so nothing reads it there.
func (rt *Runtime) SentWhileObserving() int64 { return rt.sentWhileObserving.Load() }

// Go runs an effect outside every mailbox, counted until it returns (Stop
// waits for it).
func (rt *Runtime) Go(e Effect) {
	rt.effects.Add(1)
	run := e.Run
	e.Run = func(ctx context.Context) {
		defer rt.nudge()
		defer rt.effects.Add(-1)
		run(ctx)
	}
	rt.cfg.Scheduler.Go(e)
}

// Every runs f every d until Stop, counted as work in flight while it runs
// so that Stop either waits for it or it sees the stop and returns.
func (rt *Runtime) Every(d time.Duration, f func()) {
	if d <= 0 {
		return
	}
	var arm func()
	arm = func() {
		if rt.stopping.Load() {
			return
		}
		stop := rt.cfg.Clock.AfterFunc(d, func() {
			rt.effects.Add(1)
			defer rt.nudge()
			defer rt.effects.Add(-1)
			if rt.stopping.Load() {
				return
			}
			f()
			arm()
		})
		rt.timers.addPeriodic(stop)
	}
	arm()
}

// StartIdleSweep offers passivation every half IdleAfter to each entity
// that has had no message for IdleAfter (its Kind decides): one timer for
// the whole runtime, not one per actor, whose timer and closure would be an
// eighth of an actor's memory.
func (rt *Runtime) StartIdleSweep() {
	if rt.cfg.IdleAfter < 0 {
		return
	}
	rt.Every(rt.cfg.IdleAfter/2, rt.sweepIdle)
}

func (rt *Runtime) sweepIdle() {
	cutoff := rt.cfg.Clock.Now().Add(-rt.cfg.IdleAfter).UnixNano()
	var idle []*actor.PID
	rt.reg.mu.Lock()
	for _, e := range rt.reg.entries {
		if e.pid != nil && !e.passivating && !e.parked() && e.inbox.Load() == 0 && e.lastRouted.Load() <= cutoff {
			idle = append(idle, e.pid)
		}
	}
	rt.reg.mu.Unlock()
	// In name order: the simulator's runs must not depend on map order.
	sort.Slice(idle, func(i, j int) bool { return idle[i].Id < idle[j].Id })
	for _, pid := range idle {
		rt.as.Root.Send(pid, idleMsg{})
	}
}

// Stop refuses new work, lets effects in flight finish and their results
// land in their mailboxes (so a graceful stop leaves no outcome unknown),
// then stops every actor after the message in hand. ctx bounds the wait.
func (rt *Runtime) Stop(ctx context.Context) {
	if rt.stopping.Swap(true) {
		return
	}
wait:
	for l := rt.Load(); l.Queued > 0 || l.Effects > 0; l = rt.Load() {
		select {
		case <-rt.settled:
		case <-ctx.Done():
			rt.log.Warn("stopping with work in flight", "effects", l.Effects, "messages", l.Queued)
			break wait
		}
	}
	rt.timers.stopAll()
	_ = rt.as.Root.StopFuture(rt.registry).Wait()
	rt.Shutdown()
}

// Shutdown stops the actor system at once (a start that failed), unless
// it is a Host's, which outlives its runtimes.
func (rt *Runtime) Shutdown() {
	if rt.cfg.Host == nil {
		rt.as.Shutdown()
	}
}

// Load is what a runtime has in flight: scraped as its gauges, and what
// a caller waits on to find it at rest (all zero but Live).
type Load struct {
	// Live entity actors: activated, not passivated.
	Live int
	// Queued messages routed to entities and not yet handled (a parked
	// actor's excluded: its mailbox is never handled).
	Queued int64
	// Effects started and not finished.
	Effects int64
	// Retries: internal events whose write failed, waiting to be tried
	// again.
	Retries int64
}

// Load reads what is in flight now. Queued is read before Effects: a
// handler starts its effects before its message counts as handled
// (entry.handled is deferred), so no message queued and then no effect
// means nothing is left to land.
func (rt *Runtime) Load() Load {
	rt.reg.mu.Lock()
	l := Load{Live: len(rt.reg.entries)}
	for _, e := range rt.reg.entries {
		if !e.parked() { // a parked actor's mailbox is never handled
			l.Queued += e.inbox.Load()
		}
	}
	rt.reg.mu.Unlock()
	l.Effects, l.Retries = rt.effects.Load(), rt.retries.Load()
	return l
}

// fault calls the fault hook at a named point.
func (rt *Runtime) fault(point, id string) error {
	if f := rt.cfg.Fault; f != nil {
		return f(point, id)
	}
	return nil
}

// maxInternalRetries bounds how often an internal event (an effect's
// result, a reconciliation, a due deadline, a pool's decision) is tried
// again when its transition cannot be persisted: 1 s doubling, about a
// minute in all. Nobody else would resend it, so dropping it after one
// failed write would lose it (a slot never released, a result never seen).
const maxInternalRetries = 6

// retryLater sends an internal event again after a back-off, or gives up
// after maxInternalRetries with an error in the log.
func (rt *Runtime) retryLater(k Key, ev any, attempt int, err error, resend func(attempt int)) {
	if attempt >= maxInternalRetries {
		rt.log.Error("transition not persisted; giving up", "kind", k.Kind, "id", k.ID, "event", fmt.Sprintf("%T", ev), "attempts", attempt+1, "err", err)
		return
	}
	if rt.cfg.Store.Health().Failed() == nil {
		rt.log.Warn("transition not persisted; will retry", "kind", k.Kind, "id", k.ID, "event", fmt.Sprintf("%T", ev), "err", err)
	}
	rt.retries.Add(1)
	rt.cfg.Clock.AfterFunc(time.Second<<attempt, func() { resend(attempt + 1) })
}

// owns reports whether this node may act for the entity now.
func (rt *Runtime) owns(k Key) bool {
	_, err := rt.fenceOf(k)
	return err == nil
}

// Owns is owns for the kinds (a pool's view read from the store when
// another node holds it).
func (rt *Runtime) Owns(k Key) bool { return rt.owns(k) }

// fenceOf is the fence a commit of the entity carries. A single node owns
// every entity and fences nothing, and answers here without asking its
// null cluster: its turns run no code of the cluster's (cluster.go).
func (rt *Runtime) fenceOf(k Key) (persistence.Fence, error) {
	if rt.single {
		return persistence.Fence{}, nil
	}
	c := rt.cfg.Cluster
	return c.Fence(c.Shard(k.Kind, k.ID))
}

// refusal is why a request cannot be asked now: stopping, or a store that
// failed or is read-only (answered at once, by its cause, S2).
func (rt *Runtime) refusal() error {
	if rt.stopping.Load() {
		return errs.Unavailable
	}
	if f := rt.cfg.Store.Health().Problem(); f != nil {
		return f
	}
	return nil
}

var errNoWireForm = errors.New("this kind's events do not cross nodes")

// errMoving is a refusal for an entity this node does not own now.
func errMoving(k Key) error {
	return fmt.Errorf("%w: %s %s is not owned by this node", errs.Moving, k.Kind, k.ID)
}

// wakeTimers holds at most one armed timer per entity: the in-memory twin
// of the wake index. The runtime owns them, not the actors, so a
// passivated entity's deadline still fires and reactivates it; the wake
// index covers the same deadline across a restart (M23). Firing only
// routes a wake: the actor checks against its record what is really due,
// so an early, late or repeated wake never fires a deadline twice.
type wakeTimers struct {
	mu       sync.Mutex
	timers   map[Key]armed
	periodic []func() bool
}

// armed is an entity's timer. A wake moved later keeps the timer already
// set, which goes off at fires and sets itself again for at: a steady
// callback moves its marquee's deadline later with every step, and
// stopping and starting a runtime timer each time was the largest cost
// of arming (docs/decisions, "The durable path's CPU").
type armed struct {
	at    time.Time // the wake the entity asked for
	fires time.Time // when the timer set goes off: at, or before it
	stop  func() bool
}

// wakeMsg: a deadline of the entity may be due.
type wakeMsg struct{}

func (wakeMsg) fail(error)      {}
func (wakeMsg) activates() bool { return false }

// armWake sets the entity's timer to at, replacing an earlier one; a zero
// at disarms.
func (rt *Runtime) armWake(k Key, at time.Time) {
	t := &rt.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timers == nil {
		t.timers = map[Key]armed{}
	}
	if old, ok := t.timers[k]; ok {
		if old.at.Equal(at) {
			return
		}
		if !at.IsZero() && !old.fires.After(at) {
			old.at = at
			t.timers[k] = old
			return
		}
		old.stop()
		delete(t.timers, k)
	}
	if at.IsZero() {
		return
	}
	rt.startTimer(k, at)
}

// startTimer sets k's timer to go off at at; t.mu is held.
func (rt *Runtime) startTimer(k Key, at time.Time) {
	t := &rt.timers
	d := max(at.Sub(rt.cfg.Clock.Now()), 0)
	stop := rt.cfg.Clock.AfterFunc(d, func() { rt.timerFired(k, at) })
	t.timers[k] = armed{at: at, fires: at, stop: stop}
}

// timerFired routes a wake to k, unless its wake was moved later while
// the timer ran: then the timer is set again for the wake asked for. A
// timer whose entry was replaced (its stop came too late) still routes
// its wake, which the actor finds early and harmless.
func (rt *Runtime) timerFired(k Key, fired time.Time) {
	t := &rt.timers
	t.mu.Lock()
	if cur, ok := t.timers[k]; ok && cur.fires.Equal(fired) {
		if cur.at.After(fired) {
			rt.startTimer(k, cur.at)
			t.mu.Unlock()
			return
		}
		delete(t.timers, k)
	}
	t.mu.Unlock()
	rt.route(k, wakeMsg{})
}

func (t *wakeTimers) addPeriodic(stop func() bool) {
	t.mu.Lock()
	t.periodic = append(t.periodic, stop)
	t.mu.Unlock()
}

func (t *wakeTimers) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, a := range t.timers {
		a.stop()
		delete(t.timers, k)
	}
	for _, stop := range t.periodic {
		stop()
	}
	t.periodic = nil
}

// ArmWakes arms a timer for every wake-index entry of an entity keep
// accepts, and says how many: due ones fire now, the others stay on disk
// until their time. Start-up and a shard's recovery run it.
func (rt *Runtime) ArmWakes(keep func(Key) bool) (int, error) {
	wakes, err := rt.cfg.Store.Wakes(time.Unix(0, 1<<62))
	if err != nil {
		return 0, fmt.Errorf("read wake index: %w", err)
	}
	byLetter := map[string]string{}
	for name, k := range rt.kinds {
		if l := k.wakeLetter(); l != "" {
			byLetter[l] = name
		}
	}
	n := 0
	for _, w := range wakes {
		kind, ok := byLetter[w.Letter]
		if !ok {
			continue
		}
		k := Key{Kind: kind, ID: w.ID}
		if keep(k) {
			rt.armWake(k, w.At)
			n++
		}
	}
	return n, nil
}
