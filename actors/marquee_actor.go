package actors

import (
	"context"
	"encoding/json"
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
	rec     persistence.MarqueeRecord
	exists  bool
	waiting []chan<- any // operator answers held until the admission is durable (A10)
}

func (a *marqueeActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		a.id, a.entry = a.sys.entityOf(ctx.Self(), kindMarquee)
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
		a.applyLogged(m.ev)
	case wake:
		a.fireDue()
	case retryEvent:
		a.sys.retries.Add(-1)
		a.applyRetrying(m.ev.(marquee.Event), m.attempt)
	case marquee.Event: // reconcile, admission decisions routed by pools
		a.applyLogged(m)
	}
}

// idle passivates the actor if it holds nothing in flight: effects whose
// results must come back to this instance and callers waiting for an
// answer keep it alive. The System's idle sweep sends idleCheck to actors
// that have had no message for IdleAfter.
func (a *marqueeActor) idle(ctx actor.Context) {
	if len(a.waiting) > 0 || (a.exists && marquee.NeedsReconcile(a.rec.State)) {
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
		a.rec, a.exists = rec, true
	case errors.Is(err, persistence.ErrNotFound):
		a.exists = false
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
	if afterFailure || marquee.NeedsReconcile(a.rec.State) {
		a.applyLogged(marquee.Reconcile{AfterFailure: afterFailure})
	}
	a.fireDue()
}

func (a *marqueeActor) create(m cmdCreate) {
	if a.exists {
		m.reply <- fmt.Errorf("%w: marquee %s already exists", marquee.ErrConflict, a.id)
		return
	}
	now := a.sys.cfg.Clock.Now()
	s, out, err := a.sys.cfg.Machine.Create(m.create, now)
	if err != nil {
		m.reply <- err
		return
	}
	if err := a.commit(m.create, s, out, nil); err != nil {
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
	out, err := a.apply(m.ev)
	if err != nil {
		m.reply <- err
		return
	}
	if out.Err != nil {
		m.reply <- out.Err
		return
	}
	a.answerAfterAdmission(m.reply)
}

// answerAfterAdmission answers now, or, while the pool's decision is not
// yet durable here, once it is (A10).
func (a *marqueeActor) answerAfterAdmission(reply chan<- any) {
	if ad := a.rec.State.Admission; ad != nil && ad.Status == marquee.AdmissionAsking {
		const maxWaiting = 64 // a caller beyond this is told to retry rather than queued in memory
		if len(a.waiting) >= maxWaiting {
			reply <- fmt.Errorf("%w: too many commands waiting for admission", ErrUnavailable)
			return
		}
		a.waiting = append(a.waiting, reply)
		return
	}
	reply <- a.rec.State.Clone()
}

func (a *marqueeActor) flushWaiting() {
	if ad := a.rec.State.Admission; ad != nil && ad.Status == marquee.AdmissionAsking {
		return
	}
	for _, r := range a.waiting {
		r <- a.rec.State.Clone()
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
		if err := marquee.AuthorizeRun(a.rec.State, req.Auth.RunID, cb.Generation, req.Auth.ScopedVouched); err != nil {
			a.sys.log.Info("callback refused", "marquee", a.id, "auth", req.Auth.Mode, "err", err)
			return err
		}
	}
	if req.DeliveryID != "" {
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
	// Step, then the answer and its dedup record from the step's result,
	// then one batch with both, then the answer (I5).
	now := a.sys.cfg.Clock.Now()
	next, out := a.sys.cfg.Machine.Step(a.rec.State, cb, now)
	for i := range out.History {
		if out.History[i].Source == marquee.SourceCallback {
			out.History[i].DeliveryID, out.History[i].Auth = req.DeliveryID, req.Auth.Mode
		}
	}
	body, _ := json.Marshal(callbackBody{Result: out.Result, MarqueeID: a.id, Generation: next.Generation, ReceivedGeneration: cb.Generation})
	answer := CallbackAnswer{Status: 200, Body: body}
	var d *persistence.DedupRecord
	if req.DeliveryID != "" {
		d = &persistence.DedupRecord{DeliveryID: req.DeliveryID, At: now, MarqueeID: a.id, Status: 200, Body: body, BodySHA256: req.BodyHash[:]}
		if a.sys.cfg.Plant == PlantAnswerBeforePersist {
			// Planted bug: the caller hears the answer before it is durable.
			m.reply <- answer
			_ = a.persist(cb, next, out, d)
			return nil
		}
	}
	if err := a.persist(cb, next, out, d); err != nil {
		return err
	}
	a.sys.cfg.Metrics.Callbacks.WithLabelValues(string(cb.Verb), string(out.Result)).Inc()
	// Rejections and held-back downgrades are logged with both numbers
	// (M10); routine progress only at debug level, off the hot path.
	level := slog.LevelDebug
	switch out.Result {
	case marquee.Stale, marquee.Locked, marquee.Vetoed, marquee.Checking, marquee.PendingConfirmation:
		level = slog.LevelInfo
	}
	if a.sys.log.Enabled(context.Background(), level) {
		a.sys.log.Log(context.Background(), level, "callback", "marquee", a.id, "verb", cb.Verb, "generation", a.rec.State.Generation,
			"received_generation", cb.Generation, "result", out.Result, "auth", req.Auth.Mode)
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

type callbackBody struct {
	Result             marquee.Result `json:"result"`
	MarqueeID          string         `json:"marquee_id"`
	Generation         uint64         `json:"generation"`
	ReceivedGeneration uint64         `json:"received_generation"`
}

func (a *marqueeActor) applyLogged(ev marquee.Event) { a.applyRetrying(ev, 0) }

func (a *marqueeActor) applyRetrying(ev marquee.Event, attempt int) {
	if !a.exists {
		return
	}
	if _, err := a.apply(ev); err != nil {
		a.sys.retryLater(kindMarquee, a.id, ev, attempt, err)
	}
}

// apply is the heart of the shell for every event but a callback: Step,
// persist in one synced batch, start the effects; the caller answers.
func (a *marqueeActor) apply(ev marquee.Event) (marquee.Output, error) {
	next, out := a.sys.cfg.Machine.Step(a.rec.State, ev, a.sys.cfg.Clock.Now())
	if out.Err != nil {
		return out, nil
	}
	return out, a.persist(ev, next, out, nil)
}

// persist commits a step (with a delivery's dedup record, if any) when it
// wrote anything; a step that changed nothing only starts its effects.
func (a *marqueeActor) persist(ev marquee.Event, next marquee.State, out marquee.Output, d *persistence.DedupRecord) error {
	if !out.Changed && len(out.History) == 0 && d == nil {
		a.startEffects(next, out.Effects)
		return nil
	}
	return a.commit(ev, next, out, d)
}

func (a *marqueeActor) commit(ev marquee.Event, s marquee.State, out marquee.Output, d *persistence.DedupRecord) error {
	if err := a.sys.fault(FaultBeforePersist, a.id); err != nil {
		return fmt.Errorf("%w: persist marquee %s: %v", ErrUnavailable, s.ID, err)
	}
	before := a.rec.State
	rec := persistence.MarqueeRecord{State: s, HistorySeq: a.rec.HistorySeq, WakeAt: a.wakeAt(s)}
	b := a.sys.cfg.Store.NewBatch()
	for _, e := range out.History {
		rec.HistorySeq++
		b.AppendHistory(s.ID, rec.HistorySeq, e)
	}
	b.PutMarquee(rec, a.rec.WakeAt)
	if d != nil {
		b.PutDedup(*d)
	}
	start := time.Now()
	err := b.Commit()
	a.sys.cfg.Metrics.Persist.Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("%w: persist marquee %s: %v", ErrUnavailable, s.ID, err)
	}
	a.rec = rec
	a.sys.committed(kindMarquee, a.id, ev, before, s, out)
	_ = a.sys.fault(FaultAfterPersist, a.id)
	a.startEffects(s, out.Effects)
	_ = a.sys.fault(FaultAfterEffects, a.id)
	a.flushWaiting()
	a.arm()
	return nil
}

// wakeAt is the wake-index time persisted with the snapshot: now if effects
// are in flight (a crash must reconcile them at once), else the earliest
// deadline.
func (a *marqueeActor) wakeAt(s marquee.State) time.Time {
	if marquee.NeedsReconcile(s) {
		return a.sys.cfg.Clock.Now()
	}
	if ds := a.sys.cfg.Machine.Deadlines(s); len(ds) > 0 {
		return ds[0].At
	}
	return time.Time{}
}

// arm sets the entity's wake timer to its earliest deadline.
func (a *marqueeActor) arm() {
	at := time.Time{}
	if ds := a.sys.cfg.Machine.Deadlines(a.rec.State); len(ds) > 0 {
		at = ds[0].At
	}
	a.sys.armWake(key{kindMarquee, a.id}, at)
}

func (a *marqueeActor) fireDue() {
	if !a.exists {
		return
	}
	// Each due event is its own persisted transition, so a deadline fires
	// once: after it, the state no longer holds it (M23).
	const maxPerWake = 16 // every deadline kind at most once or twice; a bound, not a loop forever
	for i := 0; i < maxPerWake; i++ {
		due := a.sys.cfg.Machine.Due(a.rec.State, a.sys.cfg.Clock.Now())
		if len(due) == 0 {
			break
		}
		before := a.rec.State.UpdatedAt
		a.applyLogged(due[0])
		if a.rec.State.UpdatedAt.Equal(before) {
			break // nothing changed: the deadline was not really due
		}
	}
	a.arm()
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
				CallbackToken: sys.mintCallbackToken(id, e.Generation)}
			sys.goEffect(func(ctx context.Context) {
				run, err := sys.cfg.Dispatcher.Dispatch(ctx, req)
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
				err := sys.cfg.Bootstrapper.Bootstrap(ctx, req)
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
				chats, err := sys.cfg.ControlPlane.Chats(ctx, id)
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
