package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/persistence"
)

// Messages to an environment actor.
type (
	envCreate struct {
		create environment.Create
		reply  chan<- any
	}
	envCommand struct {
		ev    environment.Event
		reply chan<- any
	}
	// envReserve claims an absent id for one create before the branch
	// gives out a route generation: a create refused as a duplicate must
	// not spend one (issue 10). envUnreserve gives the claim back.
	envReserve   struct{ reply chan<- any }
	envUnreserve struct{}
	// envEvent is an effect's result or the actor's own next step.
	envEvent struct{ ev environment.Event }
	// envReconcile: the reconciler's turn (E14).
	envReconcile struct{}
	// envResend: a notification's next delivery attempt.
	envResend struct {
		n       environment.Notification
		attempt int
	}
)

// DriverForAll serves every capability the lifecycle calls with one driver
// (an exec script, or an in-process world, that reads the capability from
// the request).
func DriverForAll(d driver.Capability) map[environment.Capability]driver.Capability {
	out := map[environment.Capability]driver.Capability{}
	for _, c := range environment.StepCapabilities {
		out[c] = d
	}
	return out
}

// EnvConfig wires the environment side of the System.
type EnvConfig struct {
	Machine environment.Machine
	// Drivers by capability (E13); a missing one makes its steps fail as
	// configuration errors.
	Drivers map[environment.Capability]driver.Capability
	// Notifier delivers the outbox (E10, W7): a webhook, or GitHub's
	// commit statuses and pull-request comments; nil means none are sent
	// (they stay in the outbox, shown in the view).
	Notifier driver.Notifier
	// Worker names this process as a lease owner (E7).
	Worker string
	// ExclusiveStore says no other process can write an environment's
	// records while this one runs its actor: a lone warden holds Pebble's
	// lock; a cluster node owns the environment's shard, and every write of
	// another node is fenced out (C3). A lease owner other than Worker found
	// when the actor loads is then a process that can no longer commit (an
	// earlier incarnation, or the shard's previous owner), and its leases
	// end at once instead of at their expiry (issue 10, C5); its driver call
	// still in flight is refused by the lease generation (E7). False only
	// where another writer may be alive: a test's shared store.
	ExclusiveStore bool
	// NotifyBackoff is the first wait after a failed delivery, doubling
	// (zero means 30 seconds).
	NotifyBackoff time.Duration
	// ReconcileEvery is how often environments at rest are observed
	// (E14): zero means 30 seconds, negative never.
	ReconcileEvery time.Duration
}

// envActor is one preview environment: it is its own worker, taking one
// eligible transition at a time, recording intent before every effect.
type envActor struct {
	sys      *System
	id       string
	entry    *entry
	run      runner[persistence.EnvRecord, environment.Event, environment.Verdict, environment.Effect, entity.None]
	exists   bool
	reserved bool // a create holds this id while it asks its branch
}

// env is the environment as last committed.
func (a *envActor) env() environment.Env { return a.run.rec.Env }

func (a *envActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		a.id, a.entry = a.sys.entityOf(ctx.Self(), kindEnv)
		a.run = runner[persistence.EnvRecord, environment.Event, environment.Verdict, environment.Effect, entity.None]{
			sys: a.sys, entry: a.entry, key: key{kindEnv, a.id}, step: a.step, stage: a.stage, start: a.start, after: a.observe}
		a.load()
		return
	case idleCheck, actor.SystemMessage, actor.AutoReceiveMessage, *actor.Restarting, *actor.Stopping:
		return
	}
	defer a.entry.handled(a.sys.cfg.Metrics)
	switch m := ctx.Message().(type) {
	case envReserve:
		switch {
		case a.exists:
			m.reply <- fmt.Errorf("%w: environment %s already exists", environment.ErrConflict, a.id)
		case a.reserved:
			m.reply <- fmt.Errorf("%w: environment %s is being created", environment.ErrConflict, a.id)
		default:
			a.reserved = true
			m.reply <- true
		}
	case envUnreserve:
		a.reserved = false
	case envCreate:
		a.reserved = false
		if a.exists {
			m.reply <- fmt.Errorf("%w: environment %s already exists", environment.ErrConflict, a.id)
			return
		}
		e, rd := a.sys.cfg.Env.Machine.Create(m.create, a.sys.cfg.Clock.Now())
		if rd.Err != nil {
			m.reply <- rd.Err
			return
		}
		if err := a.run.commit(m.create, persistence.EnvRecord{Env: e, WakeAt: rd.Wake}, rd, nil); err != nil {
			m.reply <- err
			return
		}
		a.exists = true
		m.reply <- a.env()
		a.next()
	case envCommand:
		if !a.exists {
			m.reply <- fmt.Errorf("%w: environment %s", ErrNotFound, a.id)
			return
		}
		rd, err := a.apply(m.ev)
		if err == nil {
			err = rd.Err
		}
		if err != nil {
			m.reply <- err
			return
		}
		m.reply <- a.env()
	case envEvent:
		a.internal(m.ev, 0)
	case retryEvent:
		a.sys.retries.Add(-1)
		a.internal(m.ev.(environment.Event), m.attempt)
	case wake:
		a.due()
	case envReconcile:
		a.reconcile()
	case envResend:
		for _, n := range a.env().Outbox {
			if n.Key == m.n.Key && !n.Delivered {
				a.send(n, m.attempt)
			}
		}
	}
}

func (a *envActor) load() {
	rec, err := a.sys.cfg.Store.LoadEnv(a.id)
	switch {
	case err == nil:
		a.run.rec, a.exists = rec, true
		if at := rec.Env.Attempt; at != nil && a.sys.cfg.Env.ExclusiveStore && at.Lease.Owner != a.sys.cfg.Env.Worker {
			a.internal(environment.OwnerGone{Owner: at.Lease.Owner}, 0)
		}
		a.due()
		// The sender's retries are timers in memory: after a restart, what
		// the outbox still holds is sent again, with the same identity (E10).
		for _, n := range rec.Env.Outbox {
			if !n.Delivered && n.Attempts < MaxNotifyAttempts {
				a.send(n, n.Attempts)
			}
		}
	case errors.Is(err, persistence.ErrNotFound):
	default:
		a.sys.log.Error("environment record unusable", "environment", a.id, "err", err)
	}
}

// due turns passed deadlines into events: TTL expiry, then the next step
// (a back-off over, or a lease to take over after a crash).
func (a *envActor) due() {
	if !a.exists {
		return
	}
	e := a.env()
	if !e.ExpiresAt.IsZero() && !a.sys.cfg.Clock.Now().Before(e.ExpiresAt) && e.Desired == "ready" {
		a.internal(environment.Expire{}, 0)
	}
	a.next()
}

// next asks for the next eligible transition.
func (a *envActor) next() {
	if !a.exists || a.env().Tombstone != nil {
		return
	}
	adv := environment.Advance{Owner: a.sys.cfg.Env.Worker}
	if a.env().ActivatesRouteNext() {
		// The branch actor commits a generation before giving it out, so the
		// store knows the newest one (I14); only activation needs it.
		newest, err := a.sys.cfg.Store.BranchGeneration(a.env().Branch)
		if err != nil {
			a.sys.log.Warn("environment: branch generation unreadable", "environment", a.id, "err", err)
		}
		adv.BranchNewest = newest
	}
	a.sys.route(kindEnv, a.id, envEvent{ev: adv})
}

// internal applies an event nobody waits for; the runner retries a failed
// write.
func (a *envActor) internal(ev environment.Event, attempt int) {
	if _, err := a.apply(ev); err != nil {
		a.sys.retryLater(kindEnv, a.id, ev, attempt, err)
	}
}

// apply runs one step; after a step that did something, with no attempt
// left in flight, the next eligible transition is asked for.
func (a *envActor) apply(ev environment.Event) (environment.Outcome, error) {
	rd, err := a.run.apply(ev)
	if err != nil || rd.Err != nil || (!rd.Changed && len(rd.Effects) == 0) {
		return rd, err
	}
	if _, advanced := ev.(environment.Advance); !advanced || len(rd.Effects) == 0 {
		if a.env().Attempt == nil {
			a.next()
		}
	}
	return rd, nil
}

// The environment's part of the runner: the record is the whole state
// (outbox and receipts included), intent before effect (E5).

func (a *envActor) step(rec persistence.EnvRecord, ev environment.Event, now time.Time) (persistence.EnvRecord, environment.Outcome) {
	e, rd := a.sys.cfg.Env.Machine.Step(rec.Env, ev, now)
	return persistence.EnvRecord{Env: e, WakeAt: rd.Wake}, rd
}

func (a *envActor) stage(b *persistence.Batch, before, next persistence.EnvRecord, _ environment.Outcome) {
	b.PutEnv(next, before.WakeAt)
}

func (a *envActor) start(next persistence.EnvRecord, effects []environment.Effect) {
	a.startEffects(next.Env, effects)
}

func (a *envActor) startEffects(env environment.Env, effects []environment.Effect) {
	sys, id := a.sys, a.id
	for _, eff := range effects {
		switch e := eff.(type) {
		case environment.Do:
			req := driver.CapabilityRequest{Capability: string(e.Capability), Op: string(e.Op), EnvID: id, Identity: e.Identity,
				AttemptID: e.AttemptID, LeaseGeneration: e.LeaseGeneration, Generation: e.Generation, ExpectedRoute: e.ExpectedRoute,
				Branch: env.Branch, Revision: env.Revision, Epoch: sys.epochOf(kindEnv, id)}
			drv := sys.cfg.Env.Drivers[e.Capability]
			leaseFor := sys.cfg.Env.Machine.Config.LeaseFor
			run, renews := sys.goEffect, true
			renewal := environment.RenewLease{AttemptID: req.AttemptID, LeaseGeneration: req.LeaseGeneration}
			done := &atomic.Bool{}
			if h := sys.cfg.Sim; h != nil && h.EnvEffect != nil {
				run = func(f func(ctx context.Context)) { renews = h.EnvEffect(req, f) }
			} else if leaseFor > 0 {
				// Armed before the call starts, so the renewals count from
				// the lease's own start, not from whenever this goroutine
				// gets back to it.
				sys.renewWhile(id, renewal, leaseFor/3, done)
				renews = false
			}
			run(func(ctx context.Context) {
				defer done.Store(true)
				res := environment.Result{AttemptID: req.AttemptID, LeaseGeneration: req.LeaseGeneration}
				if drv == nil {
					res.Category, res.Message = environment.Configuration, "no driver configured for "+req.Capability
					sys.route(kindEnv, id, envEvent{ev: res})
					return
				}
				start := time.Now()
				out, rec, err := driver.Call(ctx, drv, req)
				sys.observeDriver("capability", start, err)
				in, _ := json.Marshal(rec.Request)
				outJSON, _ := json.Marshal(rec.Result)
				// Receipts are kept and shown (E13, E17): a driver that
				// echoes one of the process's secrets never gets it there.
				secrets := sys.cfg.Secrets
				res.Input, res.Output = redactString(string(in), secrets...), redactString(string(outJSON), secrets...)
				switch {
				case errors.Is(err, driver.ErrTimeout):
					res.Timeout = true
				case err != nil:
					res.Category, res.Message = environment.Category(driver.KindOf(err)), redacted(err, sys.cfg.Secrets...).Error()
					if res.Category != environment.Configuration {
						res.Category = environment.Transient
					}
				default:
					res.OK, res.Category, res.Message = out.OK, environment.Category(out.Category), redactString(out.Message, secrets...)
					if o := out.Observation; o != nil {
						res.Observation = &environment.Observation{Exists: o.Exists, Owner: o.Owner, Matches: o.Matches,
							ProviderID: o.ProviderID, RouteTarget: o.RouteTarget, URL: previewURL(o.URL), Detail: redactString(o.Detail, secrets...)}
					}
				}
				sys.route(kindEnv, id, envEvent{ev: res})
			})
			if renews && leaseFor > 0 { // the simulator's paused worker renews or not as it says
				sys.renewWhile(id, renewal, leaseFor/3, done)
			}
		case environment.Send:
			a.send(e.Notification, 0)
		}
	}
}

// previewURL keeps a URL a driver reported only if it is one: http(s),
// bounded, no user info (it is shown and sent in notifications).
func previewURL(s string) string {
	u, err := url.Parse(s)
	if len(s) > 512 || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return ""
	}
	return s
}

// renewWhile renews a lease every period while its driver call runs (E7):
// a slow effect must not look like a dead worker. The timers are the
// System's clock's, so the simulator runs them on its virtual clock like
// every other deadline; a renewal that races the call's end is refused by
// the machine as the lease it names is gone, harmlessly.
func (s *System) renewWhile(id string, renew environment.RenewLease, period time.Duration, done *atomic.Bool) {
	s.cfg.Clock.AfterFunc(period, func() {
		if done.Load() || s.stopping.Load() {
			return
		}
		s.route(kindEnv, id, envEvent{ev: renew})
		s.renewWhile(id, renew, period, done)
	})
}
