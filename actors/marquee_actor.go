package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/persistence"
)

// Messages to a marquee actor. Every reply channel has room for one answer.
type (
	cmdCreate struct {
		create marquee.Create
		reply  chan<- any
	}
	cmdOperator struct {
		ev    marquee.Event
		reply chan<- any
	}
	cmdCallback struct {
		req   CallbackRequest
		reply chan<- any
	}
	// cmdActivate asks only that the actor be live (its snapshot loaded).
	cmdActivate struct{ reply chan<- any }
	// effectDone carries an effect's result (it holds its generation).
	effectDone struct{ ev marquee.Event }
	// wake: a deadline may be due.
	wake struct{}
	// idleCheck: the idle timer fired. Sent straight to the actor, not
	// counted in its inbox, so it never holds off its own passivation.
	idleCheck struct{}
)

// CallbackAnswer is the exact answer to a webhook; a repeated delivery gets
// these bytes again (M20).
type CallbackAnswer struct {
	Status int
	Body   []byte
}

type marqueeActor struct {
	sys     *System
	id      string
	entry   *entry
	run     runner[persistence.MarqueeRecord, marquee.Event, marquee.Result, marquee.Effect, marquee.Entry]
	exists  bool
	waiting []chan<- any // operator answers held until the admission is durable (A10)
	// deliveries holds every delivery id stored for this marquee while
	// known is true: a delivery not in it is new without a point read of
	// the dedup record (one in it is read, for its answer and body). Known
	// only up to maxKnownDeliveries; beyond, every delivery is read, as
	// before. A pruned record still in the set is read and found missing:
	// new, which is right. It relies on this actor being the only writer of
	// its marquee's records, as the one process holding the store is; a
	// cluster (issue 14) must load it again whenever the marquee moves.
	deliveries map[string]struct{}
	known      bool
}

// maxKnownDeliveries bounds the ids a marquee actor keeps (about 50 bytes
// each): a workflow run sends a handful, so this is many runs' worth.
const maxKnownDeliveries = 20_000

// state is the marquee as last committed.
func (a *marqueeActor) state() marquee.State { return a.run.rec.State }

func (a *marqueeActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		a.id, a.entry = a.sys.entityOf(ctx.Self(), kindMarquee)
		a.run = runner[persistence.MarqueeRecord, marquee.Event, marquee.Result, marquee.Effect, marquee.Entry]{
			sys: a.sys, entry: a.entry, key: key{kindMarquee, a.id}, step: a.step, stage: a.stage, start: a.start, after: a.observe}
		a.load()
		return
	case idleCheck:
		a.idle(ctx)
		return
	case *actor.Restarting:
		a.failWaiting(fmt.Errorf("%w: marquee %s restarted", ErrUnavailable, a.id))
		return
	case *actor.Stopping:
		return
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return
	}
	defer a.entry.handled(a.sys.cfg.Metrics)
	switch m := ctx.Message().(type) {
	case cmdCreate:
		a.create(m)
	case cmdOperator:
		a.operator(m)
	case cmdCallback:
		if r := a.callback(m); r != nil {
			m.reply <- r
		}
	case cmdActivate:
		m.reply <- a.exists
	case effectDone:
		a.internal(m.ev, 0)
	case wake:
		a.fireDue()
	case retryEvent:
		a.sys.retries.Add(-1)
		a.internal(m.ev.(marquee.Event), m.attempt)
	case marquee.Event: // reconcile, admission decisions routed by pools
		a.internal(m, 0)
	}
}

// The marquee's part of the runner: its machine on the durable record, the
// record and history in a batch, its effects.

func (a *marqueeActor) step(rec persistence.MarqueeRecord, ev marquee.Event, now time.Time) (persistence.MarqueeRecord, marquee.Ready) {
	s, rd := a.sys.cfg.Machine.Step(rec.State, ev, now)
	return nextRecord(rec, s, rd, now), rd
}

// nextRecord is the record after a step. Its wake-index time is now while
// effects are in flight (a crash must reconcile them at once), else the
// earliest deadline.
func nextRecord(rec persistence.MarqueeRecord, s marquee.State, rd marquee.Ready, now time.Time) persistence.MarqueeRecord {
	next := persistence.MarqueeRecord{State: s, HistorySeq: rec.HistorySeq + uint64(len(rd.Records)), WakeAt: rd.Wake}
	if marquee.NeedsReconcile(s) {
		next.WakeAt = now
	}
	return next
}

func (a *marqueeActor) stage(b *persistence.Batch, before, next persistence.MarqueeRecord, rd marquee.Ready) {
	for i, e := range rd.Records {
		b.AppendHistory(next.State.ID, before.HistorySeq+uint64(i)+1, e)
	}
	b.PutMarquee(next, before.WakeAt)
}

func (a *marqueeActor) start(next persistence.MarqueeRecord, effects []marquee.Effect) {
	a.startEffects(next.State, effects)
	a.flushWaiting()
}

// loadDeliveries reads the delivery ids stored for this marquee (keys
// only); more than maxKnownDeliveries, or a failed read, leaves them
// unknown and every delivery is read from the store.
func (a *marqueeActor) loadDeliveries() {
	ids, complete, err := a.sys.cfg.Store.DedupIDs(a.id, maxKnownDeliveries)
	if err != nil || !complete {
		a.deliveries, a.known = nil, false
		return
	}
	a.deliveries, a.known = make(map[string]struct{}, len(ids)), true
	for _, id := range ids {
		a.deliveries[id] = struct{}{}
	}
}

// delivered records a committed delivery id.
func (a *marqueeActor) delivered(id string) {
	if !a.known {
		return
	}
	if len(a.deliveries) >= maxKnownDeliveries {
		a.deliveries, a.known = nil, false
		return
	}
	a.deliveries[id] = struct{}{}
}

// idle passivates the actor if it holds nothing in flight: effects whose
// results must come back to this instance and callers waiting for an
// answer keep it alive. The System's idle sweep sends idleCheck to actors
// that have had no message for IdleAfter.
func (a *marqueeActor) idle(ctx actor.Context) {
	if len(a.waiting) > 0 || (a.exists && marquee.NeedsReconcile(a.state())) {
		return
	}
	ctx.Send(a.sys.registry, passivate{key: key{kindMarquee, a.id}, pid: ctx.Self()})
}

// load reads the snapshot; after a crash or restart it reconciles whatever
// was in flight before doing new work.
func (a *marqueeActor) load() {
	rec, err := a.sys.cfg.Store.LoadMarquee(a.id)
	switch {
	case err == nil:
		a.run.rec, a.exists = rec, true
		a.loadDeliveries()
	case errors.Is(err, persistence.ErrNotFound):
		a.exists = false
		a.deliveries, a.known = map[string]struct{}{}, true // a new marquee has no deliveries yet
		return
	default:
		// A snapshot that does not decode is reported, never acted on.
		a.sys.log.Error("marquee snapshot unusable", "id", a.id, "err", err)
		a.exists = false
		return
	}
	a.sys.reg.mu.Lock()
	afterFailure := a.entry != nil && a.entry.restart.pending
	if afterFailure {
		a.entry.restart.pending = false
	}
	a.sys.reg.mu.Unlock()
	if afterFailure || marquee.NeedsReconcile(a.state()) {
		a.internal(marquee.Reconcile{AfterFailure: afterFailure}, 0)
	}
	a.fireDue()
}

func (a *marqueeActor) create(m cmdCreate) {
	if a.exists {
		if ts := a.state().Tombstone; ts != nil {
			// Issue 22: "already exists" alone sent a reader looking for a
			// live marquee; an id is never reused, even after a reap.
			m.reply <- fmt.Errorf("%w: marquee %s already exists as a tombstone (reaped %s); ids are not reused, pick another", marquee.ErrConflict, a.id, ts.At.UTC().Format(time.RFC3339))
			return
		}
		m.reply <- fmt.Errorf("%w: marquee %s already exists", marquee.ErrConflict, a.id)
		return
	}
	now := a.sys.cfg.Clock.Now()
	s, rd := a.sys.cfg.Machine.Create(m.create, now)
	if rd.Err != nil {
		m.reply <- rd.Err
		return
	}
	if err := a.run.commit(m.create, nextRecord(persistence.MarqueeRecord{}, s, rd, now), rd, nil); err != nil {
		m.reply <- err
		return
	}
	a.exists = true
	a.answerAfterAdmission(m.reply)
}

func (a *marqueeActor) operator(m cmdOperator) {
	if !a.exists {
		m.reply <- fmt.Errorf("%w: marquee %s", ErrNotFound, a.id)
		return
	}
	rd, err := a.run.apply(m.ev)
	if err == nil {
		err = rd.Err
	}
	if err != nil {
		m.reply <- err
		return
	}
	a.answerAfterAdmission(m.reply)
}

// answerAfterAdmission answers now, or, while the pool's decision is not
// yet durable here, once it is (A10).
func (a *marqueeActor) answerAfterAdmission(reply chan<- any) {
	if ad := a.state().Admission; ad != nil && ad.Status == marquee.AdmissionAsking {
		const maxWaiting = 64 // a caller beyond this is told to retry rather than queued in memory
		if len(a.waiting) >= maxWaiting {
			reply <- fmt.Errorf("%w: too many commands waiting for admission", ErrUnavailable)
			return
		}
		a.waiting = append(a.waiting, reply)
		return
	}
	reply <- a.state().Clone()
}

func (a *marqueeActor) flushWaiting() {
	if ad := a.state().Admission; ad != nil && ad.Status == marquee.AdmissionAsking {
		return
	}
	for _, r := range a.waiting {
		r <- a.state().Clone()
	}
	a.waiting = nil
}

func (a *marqueeActor) failWaiting(err error) {
	for _, r := range a.waiting {
		r <- err
	}
	a.waiting = nil
}

func (a *marqueeActor) callback(m cmdCallback) any {
	start := time.Now()
	defer func() { a.sys.cfg.Metrics.Decision.Observe(time.Since(start).Seconds()) }()
	if !a.exists {
		return fmt.Errorf("%w: marquee %s", ErrNotFound, a.id)
	}
	req, cb := m.req, m.req.Callback
	if req.Auth.OIDC {
		// T4: a GitHub token speaks for a run; only the marquee knows which
		// runs it dispatched. Refused before anything is read or written
		// (T12).
		if err := marquee.AuthorizeRun(a.state(), req.Auth.RunID, cb.Generation, req.Auth.ScopedVouched); err != nil {
			a.sys.log.Info("callback refused", "marquee", a.id, "auth", req.Auth.Mode, "err", err)
			return err
		}
	}
	_, seen := a.deliveries[req.DeliveryID]
	if req.DeliveryID != "" && (seen || !a.known) {
		rec, err := a.sys.cfg.Store.Dedup(a.id, req.DeliveryID)
		switch {
		case err == nil && rec.SameBody(req.BodyHash):
			a.sys.cfg.Metrics.Callbacks.WithLabelValues(string(cb.Verb), "duplicate_delivery").Inc()
			return CallbackAnswer{Status: rec.Status, Body: rec.Body}
		case err == nil:
			// T5: one delivery id, two bodies. Answering the first body's
			// answer would tell this sender about a message it did not
			// send; applying it would break M20.
			a.sys.cfg.Metrics.Callbacks.WithLabelValues(string(cb.Verb), "idempotency_key_reused").Inc()
			a.sys.log.Warn("delivery id reused with another body", "marquee", a.id, "delivery", req.DeliveryID, "auth", req.Auth.Mode)
			return fmt.Errorf("%w: delivery %q was already used for marquee %s with another body", ErrIdempotencyKeyReused, clipID(req.DeliveryID), a.id)
		case !errors.Is(err, persistence.ErrNotFound):
			a.sys.log.Warn("dedup record unusable; treating delivery as new", "id", a.id, "err", err)
		}
	}
	// Step; then one batch with the step and the delivery's record of its
	// reply; then the reply (I5).
	cb.DeliveryID, cb.Auth = req.DeliveryID, req.Auth.Mode
	now := a.sys.cfg.Clock.Now()
	next, rd := a.step(a.run.rec, cb, now)
	answer := CallbackAnswer{Status: 200, Body: rd.Reply}
	var d *persistence.DedupRecord
	if req.DeliveryID != "" {
		d = &persistence.DedupRecord{DeliveryID: req.DeliveryID, At: now, MarqueeID: a.id, BodySHA256: req.BodyHash[:]}
		if a.sys.cfg.Plant == PlantAnswerBeforePersist {
			// Planted bug: the caller hears the answer before it is durable.
			m.reply <- answer
			if a.run.commit(cb, next, rd, d) == nil {
				a.delivered(req.DeliveryID)
			}
			return nil
		}
	}
	if err := a.run.commit(cb, next, rd, d); err != nil {
		return err
	}
	if d != nil {
		a.delivered(req.DeliveryID)
	}
	a.sys.cfg.Metrics.Callbacks.WithLabelValues(string(cb.Verb), string(rd.Answer)).Inc()
	// Rejections and held-back downgrades are logged with both numbers
	// (M10); routine progress only at debug level, off the hot path.
	level := slog.LevelDebug
	switch rd.Answer {
	case marquee.Stale, marquee.Locked, marquee.Vetoed, marquee.Checking, marquee.PendingConfirmation:
		level = slog.LevelInfo
	}
	if a.sys.log.Enabled(context.Background(), level) {
		a.sys.log.Log(context.Background(), level, "callback", "marquee", a.id, "verb", cb.Verb, "generation", a.state().Generation,
			"received_generation", cb.Generation, "result", rd.Answer, "auth", req.Auth.Mode)
	}
	return answer
}

// clipID bounds a caller's delivery id in a message.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// internal applies an event nobody waits for; the runner retries a failed
// write.
func (a *marqueeActor) internal(ev marquee.Event, attempt int) {
	if a.exists {
		a.run.applyInternal(ev, attempt)
	}
}

func (a *marqueeActor) fireDue() {
	if !a.exists {
		return
	}
	// Each due event is its own persisted transition, so a deadline fires
	// once: after it, the state no longer holds it (M23).
	const maxPerWake = 16 // every deadline kind at most once or twice; a bound, not a loop forever
	for i := 0; i < maxPerWake; i++ {
		due := a.sys.cfg.Machine.Due(a.state(), a.sys.cfg.Clock.Now())
		if len(due) == 0 {
			break
		}
		before := a.state().UpdatedAt
		a.internal(due[0], 0)
		if a.state().UpdatedAt.Equal(before) {
			break // nothing changed: the deadline was not really due
		}
	}
	a.sys.armWake(key{kindMarquee, a.id}, a.sys.cfg.Machine.Wake(a.state()))
}

// startEffects runs each effect outside the mailbox. Results come back as
// messages carrying the generation they were started for.
func (a *marqueeActor) startEffects(s marquee.State, effects []marquee.Effect) {
	sys := a.sys
	id := a.id
	for _, eff := range effects {
		switch e := eff.(type) {
		case marquee.AskAdmission:
			sys.route(kindPool, e.Pool, poolAsk{job: id})
		case marquee.ReleaseAdmission:
			sys.route(kindPool, e.Pool, poolRelease{job: id})
		case marquee.StartDispatch:
			req := driver.DispatchRequest{MarqueeID: id, Generation: e.Generation, Action: string(e.Action), CallbackURL: sys.cfg.CallbackURL,
				CallbackToken: sys.mintCallbackToken(id, e.Generation), Epoch: sys.epochOf(kindMarquee, id)}
			sys.goEffect(func(ctx context.Context) {
				start := time.Now()
				run, err := sys.cfg.Dispatcher.Dispatch(ctx, req)
				sys.observeDriver("dispatch", start, err)
				res := marquee.DispatchFinished{Generation: req.Generation, Outcome: marquee.DispatchOK, RunID: run.ID, RunURL: run.URL}
				if err != nil {
					err = redacted(err, append([]string{req.CallbackToken}, sys.cfg.Secrets...)...)
					res.Detail = err.Error()
					res.Outcome = marquee.DispatchTransient
					if driver.KindOf(err) == driver.Configuration {
						res.Outcome = marquee.DispatchConfiguration
					}
					sys.log.Warn("dispatch failed", "marquee", id, "generation", req.Generation, "err", err)
				}
				sys.route(kindMarquee, id, effectDone{ev: res})
			})
		case marquee.StartBootstrap:
			if s.Connection == nil {
				panic("marquee: bootstrap without a connection") // the machine never asks for one
			}
			c := *s.Connection
			req := driver.BootstrapRequest{MarqueeID: id, Generation: e.Generation, Host: c.Host, Port: c.Port, User: c.User,
				SSHKey: c.SSHPrivateKey, FreeDomain: c.FreeDomain, ACMEDNS: c.ACMEDNS}
			sys.goEffect(func(ctx context.Context) {
				start := time.Now()
				err := sys.cfg.Bootstrapper.Bootstrap(ctx, req)
				sys.observeDriver("bootstrap", start, err)
				res := marquee.BootstrapFinished{Generation: req.Generation, OK: err == nil}
				if err != nil {
					// A script may echo what it was given; none of it reaches
					// history, logs or answers.
					secrets := append([]string{c.SSHPrivateKey, c.ACMEDNS.Password, c.ACMEDNS.Username}, sys.cfg.Secrets...)
					res.Detail = redacted(err, secrets...).Error()
				}
				sys.route(kindMarquee, id, effectDone{ev: res})
			})
		case marquee.AskChats:
			gen := e.Generation
			sys.goEffect(func(ctx context.Context) {
				start := time.Now()
				chats, err := sys.cfg.ControlPlane.Chats(ctx, id)
				sys.observeDriver("control_plane", start, err)
				res := marquee.ChatsAnswered{Generation: gen, Live: chats.Live, Reachable: chats.Reachable}
				if err != nil {
					res.Err = err.Error()
				}
				sys.route(kindMarquee, id, effectDone{ev: res})
			})
		case marquee.TeardownPlaygrounds:
			gen := e.Generation
			sys.goEffect(func(ctx context.Context) {
				if err := sys.cfg.ControlPlane.TeardownPlaygrounds(ctx, id, gen); err != nil {
					sys.log.Warn("playground teardown not confirmed", "marquee", id, "generation", gen, "err", err)
				}
			})
		default:
			panic(fmt.Sprintf("marquee actor: unknown effect %T", eff))
		}
	}
}

// redacted replaces every secret value found in err's text. Driver errors
// carry a script's stderr, which may echo its input.
func redacted(err error, secrets ...string) error {
	msg := redactString(err.Error(), secrets...)
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// redactString replaces every secret (of four bytes or more) in s.
func redactString(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}
