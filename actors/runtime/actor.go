package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// entityActor is one entity of a kind: its mailbox serializes every step.
type entityActor[S, E any, O Outcome] struct {
	ents *Entities[S, E, O]
	h    Handle[S, E, O]
}

// Handle is a running entity as its Kind's hooks see it: its record, and
// the runtime's loop to step it.
type Handle[S, E any, O Outcome] struct {
	rt     *Runtime
	kind   *kindOf[S, E, O]
	ents   *Entities[S, E, O]
	key    Key
	entry  *entry
	rec    S
	exists bool
	// unread is why the record could not be read (the store did not
	// answer): until a read succeeds the actor knows nothing of its
	// entity, so it decides nothing. afterFailure is the restart the
	// first successful read reconciles.
	unread       error
	afterFailure bool
	// reconciled: the Executor's Activated has run on a record this instance read.
	// A record read again (after a read or a commit the store did not
	// answer) is reconciled again only when a commit of it whose answer
	// was lost has landed (landedUnseen): what that commit meant to start
	// never ran. Reconciling on every read again would start a new
	// reconciliation while the last one still retries, and under a store
	// that keeps failing they multiply (a cluster seed that never ended).
	reconciled   bool
	landedUnseen bool
	// guard is the revision of the entity's guard the record was read or
	// last committed at, which its next commit compares: on a
	// cluster, a write whose answer was lost may land after the record
	// moved on from it, and with the guard it then refuses the later
	// commit instead of being overwritten by it. 0 on a single node.
	guard int64
	// wake is the wake-index entry the store holds for the entity: the
	// stored record's, not rec's (a step that wrote nothing keeps its
	// record in memory, its wake included, and the index where it was).
	wake time.Time
	// held are answers waiting until the record allows them (Kind.Holds).
	held []chan<- answer[S, O]
	// deliveries is the entity's deliveries record as stored, read at the
	// first delivery. It relies on this actor being the only writer of
	// its entity's records, which the store's lock (one node) or the
	// shard's fence (a cluster) make true; a new instance reads it again.
	deliveries persistence.Deliveries
	loaded     bool
	// rewriteDeliveries: the record was read from a layout before, or
	// did not decode; the next delivery's write rewrites it whole
	// (persistence.LoadDeliveries).
	rewriteDeliveries bool
}

// delivery is a request's delivery while its step commits: the entity's
// deliveries record with it added (after), made once the step's reply is
// known.
type delivery struct {
	id      string
	entry   persistence.Delivery // not yet answered
	after   persistence.Deliveries
	rewrite bool
}

func (a *entityActor[S, E, O]) Receive(ctx actor.Context) {
	h := &a.h
	msg := ctx.Message()
	switch m := msg.(type) {
	case *actor.Started:
		a.start(ctx)
		return
	case idleMsg:
		if len(h.held) == 0 && h.kind.Idle(h.rec, h.exists) {
			ctx.Send(h.rt.registry, passivate{key: h.key, pid: ctx.Self()})
		}
		return
	case *actor.Restarting:
		h.failHeld(fmt.Errorf("%w: %s restarted", errs.Unavailable, h.key))
		return
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return
	case request[S, E, O]:
		defer h.entry.handled(h.rt)
		if h.read(msg) {
			h.request(m)
		}
	case tell[E]:
		defer h.entry.handled(h.rt)
		if m.attempt > 0 {
			h.rt.retries.Add(-1)
		}
		if h.read(msg) {
			h.stepTold(m.ev, m.attempt)
		}
	case wakeMsg:
		defer h.entry.handled(h.rt)
		if h.read(msg) {
			h.kind.executor.Woken(h)
		}
	case signal[S, E, O]:
		defer h.entry.handled(h.rt)
		if h.read(msg) {
			m.fn(h)
		}
	}
}

// start loads the record; after a crash or restart the kind reconciles
// whatever was in flight before doing new work.
func (a *entityActor[S, E, O]) start(ctx actor.Context) {
	x := a.ents
	a.h = Handle[S, E, O]{rt: x.rt, kind: x.kind, ents: x, entry: x.rt.entryOf(ctx.Self(), x.name)}
	h := &a.h
	h.key = h.entry.key
	h.rt.reg.mu.Lock()
	if r := h.entry.restart; r != nil {
		h.afterFailure, r.pending = r.pending, false
	}
	h.rt.reg.mu.Unlock()
	h.load()
}

// load reads the record, and once it is read reconciles what was in
// flight; a read the store did not answer leaves the record unread.
func (h *Handle[S, E, O]) load() {
	// The guard is read before the record: a write landing in between
	// leaves a guard older than the record, which costs the next commit
	// a refusal and a read, never a write over the record.
	guard, landed, err := h.rt.guardOf(h.key)
	h.landedUnseen = h.landedUnseen || landed
	if err != nil {
		h.unreadBecause(err)
		return
	}
	rec, exists, err := h.kind.Load(h.key.ID)
	var bad *persistence.CorruptError
	switch {
	case errors.As(err, &bad):
		// A record that does not decode is reported, never acted on.
		h.rt.log.Error("record unusable", "kind", h.key.Kind, "id", h.key.ID, "err", err)
		exists = false
	case err != nil:
		h.unreadBecause(err)
		return
	}
	h.unread, h.guard = nil, guard
	h.rec, h.exists = rec, exists
	// The deliveries are read again with the record they go with: a write
	// that landed unseen may have recorded one.
	h.deliveries, h.loaded = nil, false
	h.wake = h.kind.WakeOf(rec)
	// A commit that landed unseen is reconciled as a restart is (after a
	// failure): what it meant to start or send was lost with its answer, a
	// slot's release among them.
	reconcile := h.exists && (!h.reconciled || h.landedUnseen)
	afterFailure := h.afterFailure || h.landedUnseen
	h.reconciled, h.landedUnseen = true, false
	if reconcile {
		h.kind.executor.Activated(h, afterFailure)
	}
}

// unreadBecause leaves the record unread: nothing is decided for it until
// a read succeeds (S5).
func (h *Handle[S, E, O]) unreadBecause(err error) {
	if h.unread == nil && h.rt.cfg.Store.Health().Failed() == nil {
		// Else the store failed and said so once: a load it
		// refused is not a second line.
		h.rt.log.Warn("record not read; nothing is decided for it until it is", "kind", h.key.Kind, "id", h.key.ID, "err", err)
	}
	h.unread = err
}

// read reads the record again if it was not read yet, and says whether it
// now is. While it is not, nothing is taken for absent: a request is
// answered unavailable (a 404 or a create over a record that exists
// would be a decision from nothing), and anything else is handled again
// later, as an internal event whose write failed. msg is the message as
// the mailbox holds it: boxing the switch's typed value again would be an
// allocation on every message of an entity read long ago.
func (h *Handle[S, E, O]) read(msg any) bool {
	if h.unread == nil {
		return true
	}
	h.load()
	if h.unread == nil {
		return true
	}
	err := fmt.Errorf("%w: the record of %s was not read: %w", errs.Unavailable, h.key, h.unread)
	switch m := msg.(type) {
	case request[S, E, O]:
		m.fail(err)
	case tell[E]:
		h.retryInternal(m.ev, m.attempt, err)
	default:
		// A wake or a kind's own turn: asked again a second later, for as
		// long as the record cannot be read (each is its entity's only
		// reminder).
		h.rt.cfg.Clock.AfterFunc(time.Second, func() { h.rt.route(h.key, msg.(message)) })
	}
	return false
}

// --- what a Kind's hooks use ----------------------------------------------------

// ID is the entity's id.
func (h *Handle[S, E, O]) ID() string { return h.key.ID }

// Record is the entity's record as last committed.
func (h *Handle[S, E, O]) Record() S { return h.rec }

// Exists reports whether the entity has a record.
func (h *Handle[S, E, O]) Exists() bool { return h.exists }

// Now is the runtime's clock.
func (h *Handle[S, E, O]) Now() time.Time { return h.rt.cfg.Clock.Now() }

// Runtime is the runtime the entity runs in.
func (h *Handle[S, E, O]) Runtime() *Runtime { return h.rt }

// Log is the runtime's logger.
func (h *Handle[S, E, O]) Log() *slog.Logger { return h.rt.log }

// Epoch is the shard epoch the entity's effects carry (C3); 0 on a single
// node.
func (h *Handle[S, E, O]) Epoch() int64 { return h.rt.epochOf(h.key) }

// Apply steps an internal event now, in the mailbox: a write that fails is
// tried again after a back-off.
func (h *Handle[S, E, O]) Apply(ev E) { h.stepTold(ev, 0) }

// Tell steps an event after the messages already waiting (the entity's
// own next step, through its mailbox).
func (h *Handle[S, E, O]) Tell(ev E) { h.ents.Tell(h.key.ID, ev) }

// ArmWake sets the entity's wake timer.
func (h *Handle[S, E, O]) ArmWake(at time.Time) { h.rt.armWake(h.key, at) }

// Go runs an effect (Runtime.Go).
func (h *Handle[S, E, O]) Go(e Effect) { h.rt.Go(e) }

// --- the loop -------------------------------------------------------------------

// stepTold applies an event nobody waits for; a failed write is retried
// after a back-off the same way for every kind, never dropped.
func (h *Handle[S, E, O]) stepTold(ev E, attempt int) {
	if !h.exists {
		return
	}
	if _, err := h.step(ev, nil); err != nil {
		h.retryInternal(ev, attempt, err)
	}
}

// retryInternal sends an internal event to the entity again after the
// runtime's back-off.
func (h *Handle[S, E, O]) retryInternal(ev E, attempt int, err error) {
	h.rt.retryLater(h.key, ev, attempt, err, func(next int) {
		h.rt.route(h.key, tell[E]{ev: ev, attempt: next})
	})
}

// request answers one caller: a read at once; a step once it is durable,
// or, while the kind holds answers, once the record allows.
func (h *Handle[S, E, O]) request(m request[S, E, O]) {
	req := m.req
	switch {
	case req.Mode == Read:
		m.reply <- answer[S, O]{res: Response[S, O]{Record: h.kind.Copy(h.rec), Exists: h.exists}}
		return
	case req.Mode == Create && h.exists:
		m.fail(h.kind.conflict(h.key.ID, h.rec, req.Event, h.rt.cfg.Clock.Now()))
		return
	case (req.Mode == Command || req.Mode == Rewrite || req.Mode == DryRun) && !h.exists:
		m.fail(fmt.Errorf("%w: %s", errs.NotFound, h.key))
		return
	case req.Mode == Rewrite:
		if err := h.rewrite(); err != nil {
			m.fail(err)
			return
		}
		m.reply <- answer[S, O]{res: Response[S, O]{Record: h.kind.Copy(h.rec), Exists: true}}
		return
	}
	if err := h.kind.Admit(h.rec, req.Event); err != nil {
		m.fail(err)
		return
	}
	if req.Mode == DryRun {
		h.dryRun(m)
		return
	}
	d, answered := h.lookUp(m, func() S { return h.answered(req) })
	if answered {
		return
	}
	out, err := h.step(req.Event, d)
	if err == nil {
		err = out.Refusal()
	}
	if err != nil {
		m.fail(err)
		return
	}
	if d != nil {
		h.deliveries, h.rewriteDeliveries = d.after, false
	}
	res := Response[S, O]{Record: h.answered(req), Exists: true, Reply: out.Encoded(), Outcome: out}
	if req.Delivery.ID == "" && h.kind.Holds(h.rec) {
		if len(h.held) >= maxHeld {
			m.fail(fmt.Errorf("%w: too many requests waiting for %s", errs.Unavailable, h.key))
			return
		}
		h.held = append(h.held, m.reply)
		return
	}
	m.reply <- answer[S, O]{res: res}
}

// lookUp looks a request's delivery up in the entity's deliveries: the
// delivery to record, or the caller answered already (a refusal, or a
// repeat's first answer, with the record rec makes: only then is it
// copied).
func (h *Handle[S, E, O]) lookUp(m request[S, E, O], rec func() S) (*delivery, bool) {
	req := m.req
	if req.Delivery.ID == "" {
		return nil, false
	}
	d := &delivery{id: req.Delivery.ID, entry: persistence.DeliveryOf(req.Delivery.ID, req.Delivery.BodyHash)}
	dup, repeated, err := h.delivered(d)
	switch {
	case err != nil:
		m.fail(err)
		return nil, true
	case repeated:
		r := rec()
		m.reply <- answer[S, O]{res: Response[S, O]{Record: r, Before: r, Exists: true, Reply: dup.Reply, Duplicate: true}}
		return nil, true
	}
	return d, false
}

// dryRun answers what a Command would do now, from a copy of the record,
// writing nothing (O18): the same admit, the same dedup lookup, the same
// Step at the same time; no commit, effect, message, wake or delivery.
func (h *Handle[S, E, O]) dryRun(m request[S, E, O]) {
	req := m.req
	if err := h.current(); err != nil {
		m.fail(err)
		return
	}
	if _, answered := h.lookUp(m, func() S { return h.kind.Copy(h.rec) }); answered {
		return
	}
	before := h.kind.Copy(h.rec)
	next, out := h.kind.Step(h.kind.Copy(h.rec), req.Event, h.rt.cfg.Clock.Now())
	if err := out.Refusal(); err != nil {
		m.fail(err)
		return
	}
	m.reply <- answer[S, O]{res: Response[S, O]{Record: next, Before: before, Exists: true, Reply: out.Encoded(), Outcome: out}}
}

// answered is the record an answer to req carries: a copy, or none for a
// caller that reads only the reply.
func (h *Handle[S, E, O]) answered(req Request[E]) S {
	if req.ReplyOnly {
		var none S
		return none
	}
	return h.kind.Copy(h.rec)
}

// step takes one step and, unless the machine refused it, commits it with
// a delivery's record (d).
func (h *Handle[S, E, O]) step(ev E, d *delivery) (O, error) {
	if err := h.current(); err != nil {
		var zero O
		return zero, err // not even a refusal from a record of another epoch
	}
	now := h.rt.cfg.Clock.Now()
	next, out := h.kind.Step(h.rec, ev, now)
	if out.Refusal() != nil {
		h.observe(ev, h.rec, h.rec, out)
		return out, nil
	}
	if d != nil {
		d.after = h.deliveries.With(d.entry.Answered(now, out.Encoded()), h.rt.cfg.DeliveryRetention)
	}
	next = carry[S, O](h.kind, next, h.rec, d)
	return out, h.commit(ev, next, out, d)
}

// commit makes a step durable in one synced batch, with a delivery's
// dedup record holding the step's reply (I5, M20), then starts its
// effects and arms its wake. A step that writes nothing is shown to the
// hooks all the same (a pool's repeated ask is A6) and only starts its
// effects: its wake is the one already armed.
func (h *Handle[S, E, O]) commit(ev E, next S, out O, d *delivery) error {
	rt, k := h.rt, h.key
	if !writes(out, d != nil) {
		before := h.rec
		h.rec = next
		h.committed(ev, before, next, out, false)
		h.observe(ev, before, next, out)
		h.act(next, out)
		h.flushHeld()
		return nil
	}
	if err := rt.fault(FaultBeforePersist, k.ID); err != nil {
		return fmt.Errorf("%w: persist %s: %w", errs.Unavailable, k, err)
	}
	if err := h.persist(next, out, d); err != nil {
		return err
	}
	before := h.rec
	h.rec, h.exists = next, true
	h.committed(ev, before, next, out, true)
	h.observe(ev, before, next, out)
	_ = rt.fault(FaultAfterPersist, k.ID)
	if !rt.owns(k) {
		// The lease lapsed between the commit and now: the new owner
		// reconciles what this step would have sent and started,
		// from the record and its wake. The new owner may be this node,
		// renewed in time for etcd but late for its own deadline: it then
		// stops and recovers its shards all the same (cluster.Node).
		rt.log.Warn("messages not sent, effects not started: shard no longer owned", "kind", k.Kind, "id", k.ID)
		return nil
	}
	h.act(next, out)
	_ = rt.fault(FaultAfterEffects, k.ID)
	rt.armWake(k, out.WakeAt())
	h.flushHeld()
	return nil
}

// act carries out what a step names: its messages to entities, then its
// effects on the world.
func (h *Handle[S, E, O]) act(next S, out O) {
	for _, m := range out.ToSend() {
		h.rt.send(m)
	}
	h.kind.executor.Run(h, next, out)
}

// observe shows a step to the kind's Observe, which may log and count but
// not send: on a scheduler that runs one mailbox at a time, a message
// routed meanwhile is a programmer's error, and panics.
func (h *Handle[S, E, O]) observe(ev E, before, next S, out O) {
	h.rt.observing.Add(1)
	defer h.rt.observing.Add(-1)
	h.kind.observe(View[S]{ID: h.key.ID, Record: next, Now: h.rt.cfg.Clock.Now(), Log: h.rt.log}, ev, before, next, out)
}

// rewrite commits the record as it stands (Mode Rewrite): the kind's
// Stage with nothing stepped, fenced like every write.
func (h *Handle[S, E, O]) rewrite() error {
	var none O
	return h.persist(h.rec, none, nil)
}

// persist writes one step from the stored record to next in one fenced
// batch; afterwards the store's wake entry is next's.
func (h *Handle[S, E, O]) persist(next S, out O, d *delivery) error {
	rt, k := h.rt, h.key
	fence, err := rt.fenceOf(k)
	if err != nil {
		return err // not this node's to write: nothing is tried
	}
	if fence.Epoch != h.entry.epoch.Load() {
		return h.outlived(fence.Epoch)
	}
	if !fence.IsZero() {
		fence.Guard, fence.GuardRev = rt.guardKey(k), h.guard
	}
	b := rt.cfg.Store.NewBatch()
	b.Fence(fence)
	stage[S, O](h.kind, h.kind.keeps, b, k.ID, h.rec, h.wake, next, out, d)
	start := rt.cfg.Clock.Now()
	err = b.Commit()
	rt.cfg.Metrics.Persist.Observe(rt.cfg.Clock.Since(start).Seconds())
	if rev := b.Revision(); rev != 0 {
		h.guard = rev
	}
	switch {
	case errors.Is(err, persistence.ErrUnsettled):
		// Whether it landed is unknown and may change: nothing is
		// decided from the record in memory until it is settled and
		// the record read again.
		h.unread = err
		rt.unsettle(k, fence)
		return fmt.Errorf("%w: persist %s: %w", errs.Unavailable, k, err)
	case errors.Is(err, persistence.ErrGuardMoved):
		// A write of this entity whose answer was lost has landed since
		// its record was read: the record in memory is not the stored
		// one, so it is read again before anything else is decided, and
		// the caller tries again (its delivery deduplicated, C14).
		h.unread, h.landedUnseen = err, true
		return fmt.Errorf("%w: persist %s: %w", errs.Unavailable, k, err)
	case errors.Is(err, persistence.ErrFenced):
		return fmt.Errorf("%w: persist %s: %v", errs.Moving, k, err)
	case err != nil:
		// A storage failure keeps its cause for the answer.
		return fmt.Errorf("%w: persist %s: %w", errs.Unavailable, k, err)
	}
	h.entry.commits.Add(1)
	h.wake = h.kind.WakeOf(next)
	return nil
}

func (h *Handle[S, E, O]) committed(ev E, before, after S, out O, wrote bool) {
	if f := h.ents.onCommit; f != nil {
		f(Committed[S, E, O]{ID: h.key.ID, Event: ev, Before: before, After: after, Outcome: out, Wrote: wrote})
	}
}

// flushHeld answers the held requests once the record allows.
func (h *Handle[S, E, O]) flushHeld() {
	if len(h.held) == 0 || h.kind.Holds(h.rec) {
		return
	}
	for _, r := range h.held {
		r <- answer[S, O]{res: Response[S, O]{Record: h.kind.Copy(h.rec), Exists: h.exists}}
	}
	h.held = nil
}

func (h *Handle[S, E, O]) failHeld(err error) {
	for _, r := range h.held {
		r <- answer[S, O]{err: err}
	}
	h.held = nil
}

// current refuses a step of an actor that outlived the shard epoch it
// loaded its record under. The fence alone cannot: it holds the
// node's current epoch, so an actor spawned just as its shard was released
// that survived until the node took the shard back would write its old
// record under the new epoch (found by the cluster harness: a preview
// removed on one node, written back as ready by such an actor on another).
func (h *Handle[S, E, O]) current() error {
	fence, err := h.rt.fenceOf(h.key)
	if err != nil {
		return err
	}
	if fence.Epoch != h.entry.epoch.Load() {
		return h.outlived(fence.Epoch)
	}
	return nil
}

// outlived stops an actor whose record is of an older epoch; its next
// message activates a fresh one, which loads the record again.
func (h *Handle[S, E, O]) outlived(now int64) error {
	loaded := h.entry.epoch.Load()
	h.rt.log.Warn("actor outlived its shard epoch; it stops and reloads", "kind", h.key.Kind, "id", h.key.ID, "loaded", loaded, "now", now)
	h.rt.stopInstance(h.entry)
	return fmt.Errorf("%w: %s was loaded under epoch %d, and its shard is now at %d", errs.Moving, h.key, loaded, now)
}

// --- deliveries ------------------------------------------------------

// delivered finds a delivery's first answer (repeated), or none for a new
// one; an error for an id used before with another body (T5: answering
// the first body's answer would tell this sender about a message it did
// not send; applying it would break M20), or when the record cannot be
// read.
func (h *Handle[S, E, O]) delivered(d *delivery) (first persistence.Delivery, repeated bool, err error) {
	if !h.loaded {
		ds, rewrite, err := h.rt.cfg.Store.LoadDeliveries(h.key.ID, h.kind.RecentDeliveries(h.rec))
		var bad *persistence.CorruptError
		switch {
		case errors.As(err, &bad):
			// Its next write replaces it; meanwhile nothing in it can be
			// told apart, so every delivery is new.
			h.rt.log.Warn("deliveries record unusable; treating deliveries as new", "kind", h.key.Kind, "id", h.key.ID, "err", err)
		case err != nil:
			return first, false, fmt.Errorf("%w: read the deliveries of %s: %w", errs.Unavailable, h.key, err)
		}
		h.deliveries, h.rewriteDeliveries, h.loaded = ds, rewrite, true
	}
	d.rewrite = h.rewriteDeliveries
	first, repeated = h.deliveries.Lookup(d.entry)
	if repeated && first.Body != d.entry.Body {
		h.rt.log.Warn("delivery id reused with another body", "kind", h.key.Kind, "id", h.key.ID, "delivery", d.id)
		return first, false, fmt.Errorf("%w: delivery %q was already used for %s with another body", errs.IdempotencyKeyReused, clipID(d.id), h.key)
	}
	return first, repeated, nil
}

// clipID bounds a caller's delivery id in a message.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// writes says whether a step commits: it has something to persist, or a
// delivery whose reply must be kept (commit and DescribeWrite agree by
// asking here).
func writes[O Outcome](out O, delivery bool) bool { return out.Writes() || delivery }

// stage puts one step into w: the kind's writes, its wake-index move from
// the entry stored (wake: a step that wrote nothing may have changed the
// record's wake in memory only) and, for a delivery, the entity's
// deliveries record with the step's reply added (keeps: the record
// carries its newest chunk).
func stage[S any, O Outcome](st Stager[S, O], keeps bool, w persistence.Writer, id string, before S, wake time.Time, next S, out O, d *delivery) {
	st.Stage(w, id, before, next, out)
	if l := st.WakeLetter(); l != "" {
		w.MoveWake(l, id, wake, st.WakeOf(next))
	}
	if d != nil {
		w.PutDeliveries(id, d.id, d.after, d.rewrite, keeps)
	}
}

// DescribeWrite says what commit writes for one step (the golden suites'
// write: line): "none" for a step with nothing to persist, else its
// families, e.g. "marquee m-1, history +1, wake 00:30:00, dedup d-7".
// deliveryID is the request's delivery id ("" for none). A refused step
// writes nothing.
func DescribeWrite[S any, O Outcome](st Stager[S, O], id string, before, next S, out O, deliveryID string) string {
	if out.Refusal() != nil || !writes(out, deliveryID != "") {
		return "none"
	}
	var d *delivery
	if deliveryID != "" {
		d = &delivery{id: deliveryID}
	}
	var r persistence.Recorder
	stage(st, keepsDeliveries(st), &r, id, before, st.WakeOf(before), next, out, d)
	return r.String()
}

// Stage puts one step's writes into w as commit would, its wake-index
// move included, for a step that carries no delivery: a record seeded
// straight into a store is written as its step would have written it.
func Stage[S any, O Outcome](st Stager[S, O], w persistence.Writer, id string, before, next S, out O) {
	stage(st, keepsDeliveries(st), w, id, before, st.WakeOf(before), next, out, nil)
}

// carry gives a step's record the chunk of deliveries it keeps: the
// delivery's, with its reply, or else the one before's, which the
// machine does not see and so does not carry itself (for a kind that
// keeps none, both are no-ops).
func carry[S any, O Outcome](st Stager[S, O], next, before S, d *delivery) S {
	if d != nil {
		return st.WithRecentDeliveries(next, d.after.Recent())
	}
	return st.WithRecentDeliveries(next, st.RecentDeliveries(before).Chunk)
}
