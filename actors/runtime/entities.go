package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/errs"
)

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
