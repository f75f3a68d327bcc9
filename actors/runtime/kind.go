// Package runtime is the one loop every entity of warden runs, whatever its
// kind, on protoactor-go: one actor per entity, activated on demand by a
// registry that is also its supervisor, each message of an entity handled
// in its mailbox as
//
//	request ─► admit ─► dedup ─► Step (pure) ─► Err? answer it; write nothing
//	                                          ─► one synced batch: records,
//	                                             state, wake entry, the
//	                                             delivery's reply
//	                                          ─► the outcome's messages
//	                                          ─► its effects ─► wake armed
//	                                          ─► answer
//
// An entity is messaged two ways: Ask, which waits for its answer, and
// Tell, which does not. Besides messages, the shell may run code of its
// own in an entity's turn (InTurn), and a handle applies an event of its
// own at once, in the turn it is in (Apply).
//
// It knows no kind: a kind is a Kind (its machine lifted to its durable
// record, how a step goes into a batch) and, if it acts on the world, an
// Executor, registered with Register, which gives back typed Entities to
// ask. A step's outcome carries what it sends, as data; six interfaces
// in all (TestTheKindsContractIsSixInterfaces). Timers and the
// wake index, retries of internal events whose write failed, passivation,
// bounded restarts, a cluster node's fences and confirmations, and
// deliveries' dedup records are the runtime's, once. Concurrency goes
// through a Scheduler: goroutines in production, the simulator's run queue
// under sim, so that production code has no branch of its own for the
// simulator.
package runtime

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// Outcome is what the runtime needs of a step's outcome (every
// entity.Outcome is one): whether it refused, the encoded reply a
// delivery keeps, whether it writes, its wake, and the messages it sends,
// as data.
type Outcome interface {
	Refusal() error
	Encoded() []byte
	Writes() bool
	WakeAt() time.Time
	// ToSend is what the step sends to other entities (or to its own,
	// later): delivered by the runtime after the commit, once it has
	// checked this node still owns the entity, and only then.
	ToSend() []entity.Message
}

// Kind is one kind of entity: a marquee, a pool, an environment, a
// branch. S is its durable record, E its machine's events, O its step's
// outcome. A kind may also be an Executor, Observes and Wire; nothing
// else is asked of it.
type Kind[S, E any, O Outcome] interface {
	// Name names the kind in keys, logs, metrics and actor names.
	Name() string
	// Load decodes an entity's record: whether it exists, or an error that
	// leaves it unusable (logged; the entity acts as absent).
	Load(id string) (rec S, exists bool, err error)
	// Stored reports, without decoding, whether a record exists: only a
	// create may activate an entity that does not.
	Stored(id string) (bool, error)
	// Step is the kind's pure machine on its record. A create of an
	// entity that exists is stepped too, for the kind's refusal of it
	// (with none, the runtime refuses it as a conflict).
	Step(rec S, ev E, now time.Time) (S, O)
	// Admit refuses a request before anything is read for it, not even
	// its delivery's first answer.
	Admit(rec S, ev E) error
	// Holds reports whether requests' answers wait until the record
	// allows (a marquee's until its pool's decision is durable here).
	Holds(rec S) bool
	// Idle reports whether the entity may be passivated now.
	Idle(rec S, exists bool) bool
	// Copy is the record as an answer leaves the mailbox with it.
	Copy(rec S) S
	Stager[S, O]
}

// Stager is what a step writes of a kind's record, and what the runtime
// reads of a record to write it: its wake and the chunk of deliveries it
// keeps.
type Stager[S any, O Outcome] interface {
	// Stage puts a step's writes into b (before is the record it
	// replaces). The runtime adds the wake entry and a delivery's record.
	Stage(b persistence.Writer, id string, before, next S, out O)
	// WakeLetter is the kind's family in the wake index, "" for a kind
	// with no deadlines; WakeOf a record's earliest one.
	WakeLetter() string
	WakeOf(rec S) time.Time
	// RecentDeliveries is the newest chunk of the entity's deliveries the
	// record keeps (persistence.Deliveries.Recent), zero for a kind whose
	// record keeps none; WithRecentDeliveries sets it on a record the step
	// made, so that a delivery writes no key of its own.
	RecentDeliveries(rec S) persistence.InRecord
	WithRecentDeliveries(rec S, chunk []byte) S
}

// Executor is the part of a kind that acts on the world, through a
// handle, outside the pure step.
type Executor[S, E any, O Outcome] interface {
	// Run starts a durable step's effects, after its messages.
	Run(h *Handle[S, E, O], next S, out O)
	// Activated runs once the record is loaded (reconciliation, deadlines
	// due); afterFailure says the instance replaced one that crashed.
	Activated(h *Handle[S, E, O], afterFailure bool)
	// Woken runs when the entity's wake timer fires.
	Woken(h *Handle[S, E, O])
}

// Observes sees every step taken, for logs and metrics only: it is
// given a view, not a handle, and sends nothing.
type Observes[S, E any, O Outcome] interface {
	Observe(v View[S], ev E, before, next S, out O)
}

// Wire is the form of the events another node's entity may send this
// kind; false for events only the owner makes (timers, effect results).
// DecodeEvent reads one, bounded and strict.
type Wire[E any] interface {
	EncodeEvent(ev E) ([]byte, bool)
	DecodeEvent(b []byte) (E, error)
}

// View is an entity as Observe sees it: what it is, nothing to act with.
type View[S any] struct {
	ID     string
	Record S
	Now    time.Time
	Log    *slog.Logger
}

// kindOf is a Kind with its optional parts found: without them, it acts
// on nothing, observes nothing and has no wire form.
type kindOf[S, E any, O Outcome] struct {
	Kind[S, E, O]
	keeps    bool // keepsDeliveries, found once
	executor Executor[S, E, O]
	observe  func(View[S], E, S, S, O)
	encode   func(E) ([]byte, bool)
	decode   func([]byte) (E, error)
}

// noExecutor is the executor of a kind that acts on nothing.
type noExecutor[S, E any, O Outcome] struct{}

func (noExecutor[S, E, O]) Run(*Handle[S, E, O], S, O)       {}
func (noExecutor[S, E, O]) Activated(*Handle[S, E, O], bool) {}
func (noExecutor[S, E, O]) Woken(*Handle[S, E, O])           {}

// keepsDeliveries says whether the kind's record keeps its deliveries'
// newest chunk: a kind that does names the record's key even for a zero
// record; one that keeps none answers the zero InRecord.
func keepsDeliveries[S any, O Outcome](st Stager[S, O]) bool {
	var zero S
	return st.RecentDeliveries(zero).Key != ""
}

func resolve[S, E any, O Outcome](k Kind[S, E, O]) *kindOf[S, E, O] {
	r := &kindOf[S, E, O]{Kind: k, keeps: keepsDeliveries[S, O](k), executor: noExecutor[S, E, O]{},
		observe: func(View[S], E, S, S, O) {},
		encode:  func(E) ([]byte, bool) { return nil, false },
		decode:  func([]byte) (E, error) { var zero E; return zero, errNoWireForm },
	}
	if x, ok := k.(Executor[S, E, O]); ok {
		r.executor = x
	}
	if x, ok := k.(Observes[S, E, O]); ok {
		r.observe = x.Observe
	}
	if x, ok := k.(Wire[E]); ok {
		r.encode, r.decode = x.EncodeEvent, x.DecodeEvent
	}
	return r
}

// conflict is the refusal of a create whose entity exists: the kind's,
// from its step, or the runtime's.
func (k *kindOf[S, E, O]) conflict(id string, rec S, ev E, now time.Time) error {
	if _, out := k.Step(k.Copy(rec), ev, now); out.Refusal() != nil {
		return out.Refusal()
	}
	return fmt.Errorf("%w: %s %s already exists", errs.Conflict, k.Name(), id)
}

// send delivers a message a step's outcome carries to its entity, of
// the kind it names.
func (rt *Runtime) send(m entity.Message) {
	to, ok := rt.kinds[m.Kind]
	if !ok {
		panic(fmt.Sprintf("runtime: a step sends to %s %s, a kind not registered", m.Kind, m.ID))
	}
	to.tellAny(m.ID, m.Event)
}

// Mode says what a request may do.
type Mode uint8

const (
	// Read answers the record as it stands; nothing is stepped.
	Read Mode = iota
	// Create steps only an entity that does not exist yet.
	Create
	// Command steps only an entity that exists.
	Command
	// Rewrite writes an existing entity's record as it stands, through
	// the kind's Stage and under the entity's fence, stepping nothing:
	// a rekey's reseal, which on a cluster only the owner of
	// the record's shard may do.
	Rewrite
	// DryRun steps an existing entity's record as a Command would, in its
	// turn, at the request's time, and answers what the step would do,
	// writing nothing, starting nothing, recording no delivery and moving
	// no timer. A delivery already recorded answers as its repeat.
	DryRun
)

// Request is one caller's question to an entity.
type Request[E any] struct {
	Mode  Mode
	Event E
	// Delivery, when its ID is set, is a delivery's identity: a
	// repeat gets the first answer's bytes, and the step's reply is stored
	// with it in the step's batch.
	Delivery Delivery
	// ReplyOnly says the caller reads the answer's Reply and Duplicate
	// only: the record is not copied into it (a callback's answer is its
	// reply's bytes, and the copy was a clone of the whole state).
	ReplyOnly bool
}

// Delivery identifies one delivery of a message from outside.
type Delivery struct {
	ID       string
	BodyHash [32]byte
}

// Response is an entity's answer.
type Response[S any, O Outcome] struct {
	// Record is the entity's record after the request (as it stands for a
	// Read or a refusal), copied by the kind's Copy; zero for a ReplyOnly request.
	Record S
	Exists bool
	// Reply is a delivery's answer: the step's encoded reply, or the
	// first answer's bytes again (Duplicate).
	Reply     []byte
	Duplicate bool
	// Outcome is the step's (zero for a Read or a duplicate).
	Outcome O
	// Before is the record a DryRun stepped from (Record is the one the
	// step would leave).
	Before S
}
