package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/errs"
)

// Key names an entity.
type Key struct {
	Kind, ID string
}

func (k Key) String() string { return k.Kind + " " + k.ID }

// message is what the runtime routes to an entity.
type message interface {
	// fail answers the message's caller, if it has one, with err: the
	// message will never reach an actor.
	fail(err error)
	// activates reports whether it may activate an entity that does not
	// exist yet (a create).
	activates() bool
}

// routed is a message for an entity, addressed by key rather than PID, so
// that the registry alone decides activation.
type routed struct {
	key Key
	msg message
}

// entry is the registry's record of one live entity actor.
type entry struct {
	key   Key
	pid   *actor.PID
	inbox atomic.Int64 // messages routed and not yet handled
	// epoch is the shard epoch the running instance loaded its record
	// under (0 on a single node): it may write, and answer, only while it
	// still is the shard's epoch.
	epoch atomic.Int64
	// commits counts the instance's fenced commits: one made after a
	// request was sent proves the instance still held its shard while the
	// request was handled, so its answer needs no confirmation.
	commits atomic.Int64
	// lastRouted is when a message was last routed to the entity (unix
	// nanoseconds, the runtime's clock): the idle sweep's measure.
	lastRouted atomic.Int64
	// sending: direct sends decided and not yet in the mailbox.
	sending atomic.Int32
	// passivating: the registry is stopping this actor for idleness; new
	// messages wait in buffer and reactivate the entity once it is gone.
	passivating bool
	buffer      []message
	// restart is the actor's failures, nil until its first: most actors
	// never fail, and every live one has an entry.
	restart *restarts
}

// restarts are an actor's failures, for the supervisor's bound and the
// operator's view.
type restarts struct {
	times   []time.Time
	total   int
	lastErr string
	lastAt  time.Time
	parked  bool
	// pending: a restart after a failure whose new instance has not
	// started yet; it reconciles with afterFailure.
	pending bool
}

// parked says the supervisor stopped the actor after repeated failures.
func (e *entry) parked() bool { return e.restart != nil && e.restart.parked }

// handled counts down one message routed to the entity. Actors defer it, so
// that a graceful stop never sees "nothing pending" while a handler is
// still starting an effect.
func (e *entry) handled(rt *Runtime) {
	e.inbox.Add(-1)
	rt.nudge()
}

type registryState struct {
	mu      sync.Mutex
	entries map[Key]*entry
	byPID   map[string]*entry
}

// registry is the supervisor: it activates entity actors on demand and
// restarts crashed ones under boundedRestart.
type registry struct{ rt *Runtime }

// passivate is an idle actor asking the registry to stop it.
type passivate struct {
	key Key
	pid *actor.PID
}

type listActors struct{ reply chan<- []ActorInfo }

func (r *registry) Receive(ctx actor.Context) {
	st := &r.rt.reg
	switch m := ctx.Message().(type) {
	case routed:
		r.deliver(ctx, m.key, m.msg)
	case passivate:
		// It goes only if nothing was routed to it since: the inbox count
		// is the handshake with route(), which counts under the same lock
		// before sending directly.
		st.mu.Lock()
		e := st.entries[m.key]
		ok := e != nil && e.pid.Equal(m.pid) && !e.passivating && e.inbox.Load() == 0
		if ok {
			e.passivating = true
		}
		st.mu.Unlock()
		if ok {
			r.rt.cfg.Metrics.Passivations.WithLabelValues(m.key.Kind).Inc()
			ctx.Stop(m.pid)
		}
	case *actor.Terminated:
		st.mu.Lock()
		e := st.byPID[m.Who.Id]
		var buffered []message
		if e != nil {
			delete(st.byPID, m.Who.Id)
			if !e.parked() {
				delete(st.entries, e.key)
			}
			buffered, e.buffer = e.buffer, nil
		}
		st.mu.Unlock()
		// Messages that raced the passivation reactivate the entity at
		// once, in the order they came, before anything routed later.
		for _, msg := range buffered {
			r.deliver(ctx, e.key, msg)
		}
	case listActors:
		m.reply <- r.rt.reg.snapshot()
	}
}

// deliver sends msg to the entity's actor, activating it if needed.
func (r *registry) deliver(ctx actor.Context, k Key, msg message) {
	st := &r.rt.reg
	if !r.rt.owns(k) {
		msg.fail(errMoving(k)) // never a decision from a non-owner
		return
	}
	st.mu.Lock()
	e := st.entries[k]
	st.mu.Unlock()
	if e == nil {
		if !r.rt.mayExist(k, msg) {
			msg.fail(fmt.Errorf("%w: %s %s", errs.NotFound, k.Kind, k.ID))
			return
		}
		e = r.spawn(ctx, k)
	}
	if e.parked() {
		msg.fail(fmt.Errorf("%w: %s %s is parked after repeated failures", errs.Unavailable, k.Kind, k.ID))
		return
	}
	st.mu.Lock()
	if e.passivating {
		if len(e.buffer) >= MaxInbox {
			st.mu.Unlock()
			msg.fail(fmt.Errorf("%w: %s %s is reactivating", errs.Overloaded, k.Kind, k.ID))
			return
		}
		e.buffer = append(e.buffer, msg)
		st.mu.Unlock()
		return
	}
	e.inbox.Add(1)
	e.lastRouted.Store(r.rt.cfg.Clock.Now().UnixNano())
	e.sending.Add(1)
	st.mu.Unlock()
	ctx.Send(e.pid, msg)
	e.sending.Add(-1)
}

// stopInstance stops the entity's running instance; its next message
// activates a fresh one, which loads the record again. The actor library
// drops what reaches a mailbox past its stop. So the entry is marked
// first, under the lock a direct send is decided under: nothing is sent
// directly after it, and what comes waits in the buffer for the fresh
// instance. The stop then waits for the direct sends decided before the
// mark, so that each reaches the old instance ahead of its stop.
func (rt *Runtime) stopInstance(e *entry) {
	rt.reg.mu.Lock()
	if e.pid == nil || e.passivating {
		rt.reg.mu.Unlock()
		return
	}
	e.passivating = true
	pid := e.pid
	rt.reg.mu.Unlock()
	for e.sending.Load() > 0 {
		goruntime.Gosched() // a send is a mailbox push: never long
	}
	rt.as.Root.Poison(pid)
}

func (r *registry) spawn(ctx actor.Context, k Key) *entry {
	e := &entry{key: k}
	st := &r.rt.reg
	// The entry is in the table before the actor starts, so the actor finds
	// it by its name; route() sends directly only once pid is set.
	st.mu.Lock()
	st.entries[k] = e
	st.mu.Unlock()
	pid, err := ctx.SpawnNamed(r.rt.kinds[k.Kind].props(), k.Kind+"/"+k.ID)
	if err != nil {
		panic(fmt.Sprintf("registry: spawn %s: %v", k, err)) // names are unique by construction
	}
	st.mu.Lock()
	e.pid = pid
	st.byPID[pid.Id] = e
	st.mu.Unlock()
	r.rt.cfg.Metrics.Activations.WithLabelValues(k.Kind).Inc()
	return e
}

// entryOf finds the registry entry of a spawned entity actor from its name
// ("registry/<kind>/<id>") and binds it to the shard epoch it loads its
// record under. One shared Props per kind keeps a spawn from allocating
// its own; a restart makes a fresh instance that finds its entry the same
// way.
func (rt *Runtime) entryOf(self *actor.PID, kind string) *entry {
	prefix := rt.registry.Id + "/" + kind + "/"
	if !strings.HasPrefix(self.Id, prefix) {
		panic("registry: unexpected actor name " + self.Id)
	}
	k := Key{Kind: kind, ID: self.Id[len(prefix):]}
	epoch := rt.epochOf(k)
	rt.reg.mu.Lock()
	defer rt.reg.mu.Unlock()
	e := rt.reg.entries[k]
	if e == nil {
		panic("registry: actor " + self.Id + " has no entry") // every spawn goes through the registry
	}
	e.epoch.Store(epoch)
	return e
}

// mayExist keeps the registry from activating actors for entities that
// were never created: only a create may activate an absent one.
func (rt *Runtime) mayExist(k Key, msg message) bool {
	if msg.activates() {
		return true
	}
	exists, err := rt.kinds[k.Kind].stored(k.ID)
	return exists || err != nil // a read error is not "absent": the actor loads and reports it
}

// route sends msg to the entity. A live actor gets it directly; anything
// else (absent, parked, passivating) goes through the registry, which
// alone activates actors, so two activations of one entity never race.
//
// It returns the instance a message went to directly, and the commits it
// had made by then (Ask's confirmation, C4); none when the registry
// delivers it.
func (rt *Runtime) route(k Key, msg message) instanceMark {
	mark, _ := rt.routeBelow(k, msg, 0)
	return mark
}

// routeBelow routes msg unless the entity's actor has limit messages or
// more waiting (0: no limit), in the same look-up; it returns how many
// were waiting, limit or more for a message it did not route.
func (rt *Runtime) routeBelow(k Key, msg message, limit int64) (instanceMark, int64) {
	if rt.observing.Load() > 0 {
		rt.sentWhileObserving.Add(1)
	}
	if !rt.owns(k) {
		rt.routeRemote(k, msg)
		return instanceMark{}, 0
	}
	rt.reg.mu.Lock()
	e := rt.reg.entries[k]
	var waiting int64
	if e != nil {
		waiting = e.inbox.Load()
	}
	if limit > 0 && waiting >= limit {
		rt.reg.mu.Unlock()
		return instanceMark{}, waiting
	}
	direct := e != nil && e.pid != nil && !e.parked() && !e.passivating
	var mark instanceMark
	if direct {
		e.inbox.Add(1)
		e.lastRouted.Store(rt.cfg.Clock.Now().UnixNano())
		mark = instanceMark{e: e, commits: e.commits.Load()}
	}
	if direct {
		e.sending.Add(1) // stopInstance waits for it (see there)
	}
	rt.reg.mu.Unlock()
	if direct {
		rt.as.Root.Send(e.pid, msg)
		e.sending.Add(-1)
		return mark, waiting
	}
	rt.as.Root.Send(rt.registry, routed{key: k, msg: msg})
	return mark, waiting
}

// ActorInfo is one line of GET /v1/actors.
type ActorInfo struct {
	Kind        string    `json:"kind"`
	ID          string    `json:"id"`
	Mailbox     int64     `json:"mailbox"`
	Restarts    int       `json:"restarts"`
	Parked      bool      `json:"parked"`
	LastFailure string    `json:"last_failure,omitempty"`
	LastFailAt  time.Time `json:"last_failure_at,omitzero"`
}

func (st *registryState) snapshot() []ActorInfo {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]ActorInfo, 0, len(st.entries))
	for _, e := range st.entries {
		info := ActorInfo{Kind: e.key.Kind, ID: e.key.ID, Mailbox: e.inbox.Load()}
		if r := e.restart; r != nil {
			info.Restarts, info.Parked, info.LastFailure, info.LastFailAt = r.total, r.parked, r.lastErr, r.lastAt
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Actors lists live actors by kind with mailbox length, restarts and last
// failure: the registry's own view when it answers in time, else the
// table as it stands.
func (rt *Runtime) Actors() []ActorInfo {
	reply := make(chan []ActorInfo, 1)
	rt.as.Root.Send(rt.registry, listActors{reply: reply})
	if !rt.cfg.Scheduler.Wait(func() bool { return len(reply) > 0 }) {
		select {
		case a := <-reply:
			return a
		default:
			return rt.reg.snapshot()
		}
	}
	// A blocking wait is for goroutines, so it is bounded in real time,
	// as an ask is (await).
	ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.AskTimeout)
	defer cancel()
	select {
	case a := <-reply:
		return a
	case <-ctx.Done():
		return rt.reg.snapshot()
	}
}

// Parked counts actors parked after failing too often.
func (rt *Runtime) Parked() int {
	n := 0
	for _, a := range rt.reg.snapshot() {
		if a.Parked {
			n++
		}
	}
	return n
}

// boundedRestart is the project's supervisor strategy: restart a crashed
// entity actor (it reloads its record and reconciles), but after
// RestartLimit failures within RestartWindow park it (stopped, shown as
// failing in /v1/actors) instead of restarting forever. It reads the
// runtime's clock, not the wall clock protoactor's own strategies use.
type boundedRestart struct{ rt *Runtime }

func (b *boundedRestart) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ interface{}) {
	if f := b.rt.cfg.Failed; f != nil {
		err, ok := reason.(error)
		if !ok {
			err = fmt.Errorf("%v", reason)
		}
		f(child.Id, err)
	}
	st := &b.rt.reg
	now := b.rt.cfg.Clock.Now()
	st.mu.Lock()
	e := st.byPID[child.Id]
	if e == nil {
		st.mu.Unlock()
		sup.StopChildren(child)
		return
	}
	if e.restart == nil {
		e.restart = &restarts{}
	}
	r := e.restart
	r.total++
	r.lastErr = fmt.Sprint(reason)
	r.lastAt = now
	recent := r.times[:0]
	for _, t := range r.times {
		if now.Sub(t) < b.rt.cfg.RestartWindow {
			recent = append(recent, t)
		}
	}
	r.times = append(recent, now)
	park := len(r.times) > b.rt.cfg.RestartLimit
	r.parked = park
	r.pending = !park
	defer b.rt.nudge()
	st.mu.Unlock()
	b.rt.cfg.Metrics.Restarts.WithLabelValues(e.key.Kind).Inc()
	b.rt.log.Error("actor failed", "kind", e.key.Kind, "id", e.key.ID, "reason", fmt.Sprint(reason), "parked", park)
	if park {
		sup.StopChildren(child)
		return
	}
	sup.RestartChildren(child)
}

// Entities are the entities of one kind: asked, sent events and signals
// by id. Register makes them.
type Entities[S, E any, O Outcome] struct {
	rt         *Runtime
	kind       *kindOf[S, E, O]
	name       string
	actorProps *actor.Props
	onCommit   func(Committed[S, E, O])
}

// Register adds a kind to the runtime; its entities are activated on
// their first message.
func Register[S, E any, O Outcome](rt *Runtime, k Kind[S, E, O]) *Entities[S, E, O] {
	ents := &Entities[S, E, O]{rt: rt, kind: resolve(k), name: k.Name()}
	ents.actorProps = actor.PropsFromProducer(func() actor.Actor { return &entityActor[S, E, O]{ents: ents} }, actorOptions(rt.cfg.Scheduler)...)
	rt.kinds[ents.name] = ents
	return ents
}

// Runtime is the runtime the entities run in.
func (x *Entities[S, E, O]) Runtime() *Runtime { return x.rt }

// Key is an entity's key.
func (x *Entities[S, E, O]) Key(id string) Key { return Key{Kind: x.name, ID: id} }

// Ask sends a request and waits for its answer, bounded by the runtime's
// AskTimeout; on a cluster node the answer is confirmed first.
//
// A request that finds its actor idle is run on the caller's goroutine
// (askMailbox): the turn is the same, in the same mailbox order, without
// two hand-offs between goroutines. Not while the store stalls writes:
// the caller would wait out the stall inside the turn rather than for at
// most AskTimeout. Ask is never called inside a turn; it would wait for
// itself.
func (x *Entities[S, E, O]) Ask(ctx context.Context, id string, req Request[E]) (Response[S, O], error) {
	rt := x.rt
	if err := rt.refusal(); err != nil {
		return Response[S, O]{}, err
	}
	k := x.Key(id)
	fence, err := rt.fenceOf(k)
	if err != nil {
		return Response[S, O]{}, err
	}
	reply := make(chan answer[S, O], 1)
	answered := func() bool { return len(reply) > 0 }
	var claim *inlineClaim
	if !rt.cfg.Store.Health().WriteStalled() {
		claim = &inlineClaim{}
	}
	before, n := rt.routeBelow(k, request[S, E, O]{req: req, reply: reply, inline: claim}, MaxInbox)
	if n >= MaxInbox {
		return Response[S, O]{}, fmt.Errorf("%w: %s has %d messages waiting", errs.Overloaded, k, n)
	}
	if mb := claim.close(); mb != nil {
		mb.process(answered)
	}
	res, err := x.await(ctx, k, reply, answered)
	if rt.single { // the only writer of its store: nothing to confirm
		return res, err
	}
	return res, rt.confirmed(ctx, k, before, fence.Epoch, err)
}

// await waits for an answer: the scheduler's way (blocking, or running
// the simulator's queue until it is there), bounded by AskTimeout, and cut
// short by a store that seals under the actor's write (S1, S2).
func (x *Entities[S, E, O]) await(ctx context.Context, k Key, reply chan answer[S, O], answered func() bool) (Response[S, O], error) {
	rt := x.rt
	if !rt.cfg.Scheduler.Wait(answered) {
		select {
		case a := <-reply:
			return a.res, a.err
		default:
			return Response[S, O]{}, fmt.Errorf("%w: %s did not answer", errs.Unavailable, k)
		}
	}
	select {
	case a := <-reply:
		return a.res, a.err // a turn the caller ran: no timer to arm
	default:
	}
	timeout := askTimers.get(rt.cfg.AskTimeout)
	defer askTimers.put(timeout)
	select {
	case a := <-reply:
		return a.res, a.err
	case <-rt.cfg.Store.Health().Sealed():
		return Response[S, O]{}, rt.cfg.Store.Health().Failed()
	case <-ctx.Done():
		return Response[S, O]{}, fmt.Errorf("%w: %s did not answer in time", errs.Unavailable, k)
	case <-timeout.C:
		return Response[S, O]{}, fmt.Errorf("%w: %s did not answer in time", errs.Unavailable, k)
	}
}

// askTimers are the asks' timeouts, reused: a timer rather than a context
// with a deadline is a third of the allocations of a wait, and a reused
// one none. A stopped timer delivers nothing afterwards (Go 1.23's
// timers), so the next ask cannot see this one's expiry.
var askTimers timerPool

type timerPool struct{ p sync.Pool }

func (tp *timerPool) get(d time.Duration) *time.Timer {
	if t, ok := tp.p.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func (tp *timerPool) put(t *time.Timer) {
	t.Stop()
	tp.p.Put(t)
}

// Tell routes an internal event to an entity (an effect's result, another
// entity's decision): nobody waits for it; a failed write is retried.
func (x *Entities[S, E, O]) Tell(id string, ev E) {
	x.rt.route(x.Key(id), tell[E]{ev: ev})
}

// InTurn runs fn in the entity's mailbox, after the messages already
// waiting: the kind's own work that is not a step (a reconciler's turn).
func (x *Entities[S, E, O]) InTurn(id string, fn func(h *Handle[S, E, O])) {
	x.rt.route(x.Key(id), signal[S, E, O]{fn: fn})
}

// OnCommit sees every step of the kind taken, after its commit (Wrote),
// or at once when it wrote nothing: the simulator's oracles.
func (x *Entities[S, E, O]) OnCommit(f func(Committed[S, E, O])) { x.onCommit = f }

// Committed is one step as OnCommit sees it.
type Committed[S, E any, O Outcome] struct {
	ID            string
	Event         E
	Before, After S
	Outcome       O
	Wrote         bool
}

// --- the type-erased side the runtime keeps per kind --------------------------

type kindOps interface {
	props() *actor.Props
	stored(id string) (bool, error)
	wakeLetter() string
	tellAny(id string, ev any)
	encode(msg message) ([]byte, bool)
	routeEvent(id string, body json.RawMessage) error
}

func (x *Entities[S, E, O]) props() *actor.Props            { return x.actorProps }
func (x *Entities[S, E, O]) stored(id string) (bool, error) { return x.kind.Stored(id) }
func (x *Entities[S, E, O]) wakeLetter() string             { return x.kind.WakeLetter() }

// tellAny tells one of the kind's entities a step's message: its event
// must be one of the kind's (a step that names another is a
// programmer's error).
func (x *Entities[S, E, O]) tellAny(id string, ev any) {
	e, ok := ev.(E)
	if !ok {
		panic(fmt.Sprintf("runtime: a message to %s %s carries %T, not one of its events", x.name, id, ev))
	}
	x.Tell(id, e)
}

func (x *Entities[S, E, O]) encode(msg message) ([]byte, bool) {
	if m, ok := msg.(tell[E]); ok {
		return x.kind.encode(m.ev)
	}
	return nil, false
}

func (x *Entities[S, E, O]) routeEvent(id string, body json.RawMessage) error {
	ev, err := x.kind.decode(body)
	if err != nil {
		return fmt.Errorf("%w: %s event: %v", errs.Invalid, x.name, err)
	}
	x.Tell(id, ev)
	return nil
}

// --- messages -----------------------------------------------------------------

// request is a caller's request; its answer goes to reply (room for one).
type request[S, E any, O Outcome] struct {
	req   Request[E]
	reply chan<- answer[S, O]
	// inline, if set, lets the asker run the turn (askMailbox).
	inline *inlineClaim
}

func (m request[S, E, O]) claim(mb *askMailbox) bool { return m.inline.take(mb) }

type answer[S any, O Outcome] struct {
	res Response[S, O]
	err error
}

func (m request[S, E, O]) fail(err error)  { m.reply <- answer[S, O]{err: err} }
func (m request[S, E, O]) activates() bool { return m.req.Mode == Create }

// tell is an event nobody waits for (Tell, Apply, a step's Messages);
// attempt counts its retries after failed writes.
type tell[E any] struct {
	ev      E
	attempt int
}

func (tell[E]) fail(error)      {}
func (tell[E]) activates() bool { return false }

// signal is a kind's own work, run in the entity's mailbox.
type signal[S, E any, O Outcome] struct{ fn func(h *Handle[S, E, O]) }

func (signal[S, E, O]) fail(error)      {}
func (signal[S, E, O]) activates() bool { return false }

// idleMsg: the idle sweep offers passivation. Sent straight to the actor,
// not counted in its inbox, so it never holds off its own passivation.
type idleMsg struct{}
