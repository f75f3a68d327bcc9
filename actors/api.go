package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

// The System's API: what the HTTP layer, the command line and the
// simulator ask, typed. Writes go to the entities' mailboxes; reads of one
// entity or a list read its last committed record from the store.

// CallbackRequest is an authenticated, decoded webhook.
type CallbackRequest struct {
	MarqueeID string
	// DeliveryID is the Webhook-Id; with MarqueeID it keys the
	// dedup record. Empty: no deduplication.
	DeliveryID string
	// BodyHash is the SHA-256 of the body as sent: the same delivery id
	// with another body is refused.
	BodyHash [32]byte
	Auth     CallbackAuth
	Callback marquee.Callback
}

// CallbackAuth is what the HTTP layer established about the sender (T1-T4).
type CallbackAuth struct {
	// Mode is scoped, shared, standard-webhooks or github-oidc; it goes
	// into the history.
	Mode string
	// OIDC: the token's run id (0 if it had none) and whether a scoped
	// credential vouched for this marquee and generation too.
	OIDC          bool
	RunID         uint64
	ScopedVouched bool
}

// CallbackAnswer is the exact answer to a webhook; a repeated delivery gets
// these bytes again.
type CallbackAnswer struct {
	Body []byte
}

// Callback delivers an authenticated, decoded webhook to its marquee and
// returns the exact answer, after the decision is durable.
func (s *System) Callback(ctx context.Context, req CallbackRequest) (CallbackAnswer, error) {
	start := s.cfg.Clock.Now()
	cb := req.Callback
	cb.DeliveryID, cb.Auth = req.DeliveryID, req.Auth.Mode
	if req.Auth.OIDC {
		cb.OIDC = &marquee.OIDCRun{RunID: req.Auth.RunID, ScopedVouched: req.Auth.ScopedVouched}
	}
	r := runtime.Request[marquee.Event]{Mode: runtime.Command, Event: cb, ReplyOnly: true}
	if req.DeliveryID != "" {
		r.Delivery = runtime.Delivery{ID: req.DeliveryID, BodyHash: req.BodyHash}
	}
	res, err := s.marquees.Ask(ctx, req.MarqueeID, r)
	switch {
	case errors.Is(err, errs.IdempotencyKeyReused):
		s.cfg.Metrics.Callbacks.WithLabelValues(string(cb.Verb), "idempotency_key_reused").Inc()
	case err == nil && res.Duplicate:
		s.cfg.Metrics.Callbacks.WithLabelValues(string(cb.Verb), "duplicate_delivery").Inc()
	}
	if err != nil {
		return CallbackAnswer{}, err
	}
	s.cfg.Metrics.Decision.Observe(s.cfg.Clock.Since(start).Seconds())
	return CallbackAnswer{Body: res.Reply}, nil
}

// Create creates a marquee; a tutorial one answers after its pool's
// decision is durable.
func (s *System) Create(ctx context.Context, c marquee.Create) (marquee.State, error) {
	if !marquee.ValidID(c.ID) {
		return marquee.State{}, fmt.Errorf("%w: id %q must match [a-z0-9][a-z0-9-]{0,62}", errs.Invalid, c.ID)
	}
	if c.Kind == marquee.Tutorial {
		if c.Pool == "" {
			c.Pool = "default"
		}
		if _, ok := s.cfg.Pools[c.Pool]; !ok {
			return marquee.State{}, fmt.Errorf("%w: pool %q is not configured", errs.Invalid, c.Pool)
		}
	}
	if err := s.newWork(); err != nil {
		return marquee.State{}, err
	}
	res, err := s.marquees.Ask(ctx, c.ID, runtime.Request[marquee.Event]{Mode: runtime.Create, Event: c})
	return res.Record.State, err
}

// Command runs an operator command (redeploy, destroy, disable, enable,
// run-now).
func (s *System) Command(ctx context.Context, id string, ev marquee.Event) (marquee.State, error) {
	st, _, err := s.Operate(ctx, id, ev)
	return st, err
}

// Operated is what an operator command did: its answer, and, for any
// answer but applied, why.
type Operated struct {
	Answer marquee.Answer
	Reason string
}

// Operate is Command with what the step answered and why.
func (s *System) Operate(ctx context.Context, id string, ev marquee.Event) (marquee.State, Operated, error) {
	if _, redeploy := ev.(marquee.Redeploy); redeploy {
		if err := s.newWork(); err != nil {
			return marquee.State{}, Operated{}, err // a new attempt is new work
		}
	}
	res, err := s.marquees.Ask(ctx, id, runtime.Request[marquee.Event]{Mode: runtime.Command, Event: ev})
	op := Operated{Answer: res.Outcome.Answer}
	if n := len(res.Outcome.Records); n > 0 && op.Answer != marquee.Applied {
		op.Reason = res.Outcome.Records[n-1].Detail
	}
	return res.Record.State, op, err
}

// DryRun is what an input would do to a marquee now.
type DryRun struct {
	Before, After marquee.State
	Outcome       marquee.Outcome
	// Reply is a callback's answer, as the real one would be.
	Reply     []byte
	Duplicate bool
	// Messages are what the step would send to other entities.
	Messages []string
}

// DryRun steps ev on the marquee's record in its turn, as the real input
// would be stepped now, and answers what it would do: nothing is written,
// started, sent or recorded. A callback's delivery id is looked up
// (a repeat answers as one), never recorded.
func (s *System) DryRun(ctx context.Context, id string, ev marquee.Event, delivery runtime.Delivery) (DryRun, error) {
	if cb, ok := ev.(marquee.Callback); ok {
		cb.DeliveryID = delivery.ID
		ev = cb
	}
	res, err := s.marquees.Ask(ctx, id, runtime.Request[marquee.Event]{Mode: runtime.DryRun, Event: ev, Delivery: delivery})
	if err != nil {
		return DryRun{}, err
	}
	d := DryRun{Before: res.Before.State, After: res.Record.State, Outcome: res.Outcome, Reply: res.Reply, Duplicate: res.Duplicate}
	d.Messages = messageTexts(res.Outcome.Messages)
	return d, nil
}

// Activate makes a marquee's actor live (loading its record and
// reconciling) without changing anything: a warm-up for operators and the
// measure of activation latency.
func (s *System) Activate(ctx context.Context, id string) error {
	_, err := s.marquees.Ask(ctx, id, runtime.Request[marquee.Event]{Mode: runtime.Read})
	return err
}

// Marquee reads a marquee's last committed record. A reaped marquee's
// tombstone is returned like any other state: only an id that never
// existed is not found.
func (s *System) Marquee(id string) (marquee.State, error) {
	rec, err := record.LoadMarquee(s.cfg.Store, s.cfg.Sealer, id)
	if err != nil {
		return marquee.State{}, notFound(err, "marquee", id)
	}
	return rec.State, nil
}

// History is up to limit entries of a marquee's history, newest first.
func (s *System) History(id string, limit int) ([]marquee.Entry, error) {
	return record.History(s.cfg.Store, id, limit)
}

// Page is one page of a list: the items, the id to go on after (""
// at the end), and the records met that could not be read.
type Page[T any] struct {
	Items     []T
	Next      string
	Malformed []persistence.Malformed
}

// Marquees is one page of stored marquees that keep accepts, after the id
// `after`, reading at most maxScan records (0: no bound).
func (s *System) Marquees(after string, limit, maxScan int, keep func(marquee.State) bool) (Page[marquee.State], error) {
	items, next, bad, err := record.ListMarquees(s.cfg.Store, after, limit, maxScan, keep)
	return Page[marquee.State]{Items: items, Next: next, Malformed: bad}, err
}

// Pool returns a pool's view from its actor.
func (s *System) Pool(ctx context.Context, name string) (PoolView, error) {
	limit, ok := s.cfg.Pools[name]
	if !ok {
		return PoolView{}, errNotFound("pool", name)
	}
	if !s.rt.Owns(s.pools.Key(name)) || s.cfg.Store.Health().ReadOnly() != nil {
		// Another node's pool, or any pool of a read-only store:
		// its last committed state, read from the store, as every other
		// read is.
		pool, bad, err := record.RebuildPool(s.cfg.Store, name, limit)
		if err != nil {
			return PoolView{}, fmt.Errorf("%w: pool %s: %v", errs.Unavailable, name, err)
		}
		return poolView(name, pool, bad), nil
	}
	res, err := s.pools.Ask(ctx, name, runtime.Request[admission.Event]{Mode: runtime.Read})
	if err != nil {
		return PoolView{}, err
	}
	return poolView(name, res.Record.Pool, res.Record.Malformed), nil
}

// Pools returns every configured pool, by name.
func (s *System) Pools(ctx context.Context) ([]PoolView, error) {
	names := s.poolNames()
	out := make([]PoolView, 0, len(names))
	for _, n := range names {
		v, err := s.Pool(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// CreateEnvironment records a requested environment and starts its
// lifecycle: the record asks its branch for its route generation (a
// message, so no mailbox waits on another), and its answer is held until
// the branch has given it. A create refused as a duplicate never asks, so
// it spends no generation.
func (s *System) CreateEnvironment(ctx context.Context, c environment.Create) (environment.Env, error) {
	if c.SleepAfter == environment.SleepAfterDefault {
		c.SleepAfter = 0
		if s.cfg.Env.Machine.Config.Sleeps {
			c.SleepAfter = s.cfg.Env.SleepAfter
		}
	}
	if err := c.Validate(); err != nil {
		return environment.Env{}, err
	}
	if err := s.newWork(); err != nil {
		return environment.Env{}, err
	}
	c.Generation = 0 // given by its branch: the record's first message asks for it
	res, err := s.envs.Ask(ctx, c.ID, runtime.Request[environment.Event]{Mode: runtime.Create, Event: c})
	return res.Record.Env, err
}

// EnvironmentCommand runs a removal or a manual action; an
// action that may begin the route's activation carries the branch's newest
// generation, read here, outside the mailbox.
func (s *System) EnvironmentCommand(ctx context.Context, id string, ev environment.Event) (environment.Env, error) {
	if a, ok := ev.(environment.Action); ok {
		if rec, err := record.LoadEnvironment(s.cfg.Store, id); err == nil {
			a.BranchNewest = s.branchNewest(rec.Env.Branch)
			ev = a
		}
	}
	res, err := s.envs.Ask(ctx, id, runtime.Request[environment.Event]{Mode: runtime.Command, Event: ev})
	return res.Record.Env, err
}

// errNoSeeds answers a seed's request on a platform that keeps none.
var errNoSeeds = fmt.Errorf("%w: this warden's platform keeps no seeds (warden serve --env-platform local does)", errs.Invalid)

// MakeSeed makes the seed name on the platform from its migrations and
// sql, once (P20): made again from the same, it is as it was.
func (s *System) MakeSeed(ctx context.Context, name, sql string) (driver.Seed, error) {
	if s.cfg.Env.Seeds == nil {
		return driver.Seed{}, errNoSeeds
	}
	if !environment.ValidSeed(name) {
		return driver.Seed{}, fmt.Errorf("%w: a seed's name: [a-z0-9][a-z0-9-]{0,57}", errs.Invalid)
	}
	seed, err := s.cfg.Env.Seeds.MakeSeed(ctx, name, sql)
	if err != nil {
		return driver.Seed{}, redacted(err, s.cfg.Secrets...)
	}
	s.log.Info("seed made", "seed", name, "fingerprint", seed.Fingerprint)
	return seed, nil
}

// RemoveSeed removes a seed; the previews copied from it keep their data.
func (s *System) RemoveSeed(ctx context.Context, name string) error {
	if s.cfg.Env.Seeds == nil {
		return errNoSeeds
	}
	if err := s.cfg.Env.Seeds.RemoveSeed(ctx, name); err != nil {
		return redacted(err, s.cfg.Secrets...)
	}
	s.log.Info("seed removed", "seed", name)
	return nil
}

// Seeds lists the platform's seeds, each with the previews copied from it.
func (s *System) Seeds(ctx context.Context) ([]driver.Seed, error) {
	if s.cfg.Env.Seeds == nil {
		return nil, errNoSeeds
	}
	seeds, err := s.cfg.Env.Seeds.Seeds(ctx)
	if err != nil {
		return nil, redacted(err, s.cfg.Secrets...)
	}
	return seeds, nil
}

// Visit is a request to a sleeping preview's host, as warden's waker
// received it: once committed, the preview is desired awake again and
// its application starting (the commit is the durable wake request). A
// preview not asleep is not changed; many visits make one wake (E20).
func (s *System) Visit(ctx context.Context, id string) (environment.Env, error) {
	res, err := s.envs.Ask(ctx, id, runtime.Request[environment.Event]{Mode: runtime.Command, Event: environment.Visited{At: s.cfg.Clock.Now()}})
	return res.Record.Env, err
}

// EnvDryRun is what a removal or an action would do to an environment
// now: its record before and after, and the step's outcome.
type EnvDryRun struct {
	Before, After environment.Env
	Outcome       environment.Outcome
	// Messages are what it would send to other entities (the outcome's).
	Messages []string
}

// EnvironmentDryRun steps a removal or an action in the environment's
// turn, on a copy of its record, and commits nothing: the same
// event, with the same branch generation read, as EnvironmentCommand
// would send; a refusal is the same error the real one gets.
func (s *System) EnvironmentDryRun(ctx context.Context, id string, ev environment.Event) (EnvDryRun, error) {
	if a, ok := ev.(environment.Action); ok {
		if rec, err := record.LoadEnvironment(s.cfg.Store, id); err == nil {
			a.BranchNewest = s.branchNewest(rec.Env.Branch)
			ev = a
		}
	}
	res, err := s.envs.Ask(ctx, id, runtime.Request[environment.Event]{Mode: runtime.DryRun, Event: ev})
	if err != nil {
		return EnvDryRun{}, err
	}
	d := EnvDryRun{Before: res.Before.Env, After: res.Record.Env, Outcome: res.Outcome}
	d.Messages = messageTexts(res.Outcome.Messages)
	return d, nil
}

// Environment reads an environment's last committed record.
func (s *System) Environment(id string) (environment.Env, error) {
	rec, err := record.LoadEnvironment(s.cfg.Store, id)
	if err != nil {
		return environment.Env{}, notFound(err, "environment", id)
	}
	return rec.Env, nil
}

// Environments is one page of stored environments (tombstones included,
// E12) that keep accepts.
func (s *System) Environments(after string, limit, maxScan int, keep func(environment.Env) bool) (Page[environment.Env], error) {
	items, next, bad, err := record.ListEnvironments(s.cfg.Store, after, limit, maxScan, keep)
	return Page[environment.Env]{Items: items, Next: next, Malformed: bad}, err
}

// ActorInfo is one line of GET /v1/actors.
type ActorInfo = runtime.ActorInfo

// Actors lists live actors by kind with mailbox length, restarts and last
// failure.
func (s *System) Actors() []ActorInfo { return s.rt.Actors() }

// Load is what the runtime has in flight: live actors, queued messages,
// effects, retries.
func (s *System) Load() runtime.Load { return s.rt.Load() }

// Ready reports whether recovery has finished and the system is not
// stopping.
func (s *System) Ready() bool { return s.ready.Load() && !s.rt.Stopping() }

// Readiness says why the system takes no writes now: the store's failure
// or read-only reason, or that it is recovering or stopping; nil
// when it is ready.
func (s *System) Readiness() error {
	if f := s.cfg.Store.Health().Problem(); f != nil {
		return f
	}
	if !s.Ready() {
		return fmt.Errorf("%w: recovering or shutting down", errs.Unavailable)
	}
	return nil
}

// Readable says why reads cannot be served now: a sealed store, or
// recovery that has not finished on a writable one. A read-only store is
// read.
func (s *System) Readable() error {
	h := s.cfg.Store.Health()
	if f := h.Failed(); f != nil {
		return f
	}
	if h.ReadOnly() != nil && !s.rt.Stopping() {
		return nil
	}
	return s.Readiness()
}

// Stop refuses new work, lets effects in flight finish, then stops every
// actor after the message in hand; ctx bounds the wait.
func (s *System) Stop(ctx context.Context) {
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.rt.Stop(ctx)
}

// Metrics returns the system's metrics.
func (s *System) Metrics() *Metrics { return s.cfg.Metrics }

// Machine is the marquee machine (its config shapes views).
func (s *System) Machine() marquee.Machine { return s.cfg.Machine }

// EnvMachine is the environment machine (its Actions shape views).
func (s *System) EnvMachine() environment.Machine { return s.cfg.Env.Machine }

// Notifies reports whether notifications are sent anywhere.
func (s *System) Notifies() bool { return s.cfg.Env.Notifier != nil }

// Now is the system clock's time.
func (s *System) Now() time.Time { return s.cfg.Clock.Now() }

// Clock is the system's clock.
func (s *System) Clock() clock.Clock { return s.cfg.Clock }

func isNotFound(err error) bool { return errors.Is(err, persistence.ErrNotFound) }

// notFound is a read's error in the API's words: a missing record is
// NotFound for that entity; anything else is as it came.
func notFound(err error, kind, id string) error {
	if isNotFound(err) {
		return errNotFound(kind, id)
	}
	return err
}

// messageTexts says what a dry run's messages would ask, one line each.
func messageTexts(msgs []entity.Message) []string {
	var out []string
	for _, m := range msgs {
		text := fmt.Sprintf("%s %s: %v", m.Kind, m.ID, m.Event)
		switch ev := m.Event.(type) {
		case admission.Ask:
			text = "pool " + m.ID + ": ask for a slot"
		case admission.Release:
			text = "pool " + m.ID + ": release the slot"
		case environment.NextGeneration:
			text = fmt.Sprintf("branch %s: next generation for %s", m.ID, ev.For)
		}
		out = append(out, text)
	}
	return out
}
