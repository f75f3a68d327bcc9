// Package runtime is the one loop every entity of warden runs, whatever its
// kind, on protoactor-go: one actor per entity, activated on demand by a
// registry that is also its supervisor, each message of an entity handled
// in its mailbox as
//
//	request ─► admit ─► dedup ─► Step (pure) ─► Err? answer it; write nothing
//	                                          ─► one synced batch: records,
//	                                             state, wake entry, the
//	                                             delivery's reply
//	                                          ─► effects ─► wake armed ─► answer
//
// An entity is messaged two ways: Ask, which waits for its answer, and
// Tell, which does not. Besides messages, the shell may run code of its
// own in an entity's turn (InTurn), and a handle applies an event of its
// own at once, in the turn it is in (Apply).
//
// It knows no kind: a kind is a Kind (its machine lifted to its durable
// record, how a step goes into a batch, how its effects start) registered
// with Register, which gives back typed Entities to ask. Timers and the
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

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// Outcome is what the runtime needs of a step's outcome (every
// entity.Outcome is one): whether it refused, the
// encoded reply a delivery keeps, whether it writes, and its wake.
type Outcome interface {
	Refusal() error
	Encoded() []byte
	Writes() bool
	WakeAt() time.Time
}

// Kind is one kind of entity: a marquee, a pool, an environment, a
// branch. S is its durable record, E its machine's events, O its step's
// outcome. These four are all a kind must say; what more it needs it says
// by the optional interfaces below, each found once, at Register.
type Kind[S, E any, O Outcome] interface {
	// Name names the kind in keys, logs, metrics and actor names.
	Name() string
	// Load decodes an entity's record: whether it exists, or an error that
	// leaves it unusable (logged; the entity acts as absent).
	Load(id string) (rec S, exists bool, err error)
	// Step is the kind's pure machine on its record.
	Step(rec S, ev E, now time.Time) (S, O)
	Stager[S, O]
}

// Stager is what a step writes of a kind's record.
type Stager[S any, O Outcome] interface {
	// Stage puts a step's writes into b (before is the record it
	// replaces). The runtime adds the wake entry (WakeIndexed) and a
	// delivery's record.
	Stage(b persistence.Writer, id string, before, next S, out O)
}

// The optional parts of a kind.
type (
	// Effects starts a durable step's calls to the outside world, after
	// the messages it sends (Sends).
	Effects[S, E any, O Outcome] interface {
		Run(h *Handle[S, E, O], next S, out O)
	}
	// Sends names the messages a durable step sends to other entities (or
	// to its own, later): data, delivered by the runtime after the commit,
	// once it has checked this node still owns the entity.
	Sends[S any, O Outcome] interface {
		Sends(id string, next S, out O) []Message
	}
	// WakeIndexed: the kind's deadlines are in the wake index under its
	// letter, at WakeOf of a record.
	WakeIndexed[S any] interface {
		WakeLetter() string
		WakeOf(rec S) time.Time
	}
	// KeepsDeliveries: the kind's record keeps the newest chunk of the
	// entity's deliveries (persistence.Deliveries.Recent, store format 4),
	// which the runtime sets on every record a step makes, so that a
	// delivery writes no key of its own (found by the stager, as
	// WakeIndexed is).
	KeepsDeliveries[S any] interface {
		RecentDeliveries(rec S) persistence.InRecord
		WithRecentDeliveries(rec S, chunk []byte) S
	}
	// Observes sees every step taken, for logs and metrics only: it
	// is given a view, not a handle, and sends nothing.
	Observes[S, E any, O Outcome] interface {
		Observe(v View[S], ev E, before, next S, out O)
	}
	// Starts runs once the record is loaded (reconciliation, deadlines
	// due); afterFailure says the instance replaced one that crashed.
	Starts[S, E any, O Outcome] interface {
		Started(h *Handle[S, E, O], afterFailure bool)
	}
	// Wakes runs when the entity's wake timer fires.
	Wakes[S, E any, O Outcome] interface {
		Woken(h *Handle[S, E, O])
	}
	// Stores reports, without decoding, whether a record exists: only a
	// create may activate an entity that does not (default: always).
	Stores interface {
		Stored(id string) (bool, error)
	}
	// Admits refuses a request before anything is read for it.
	Admits[S, E any] interface {
		Admit(rec S, ev E) error
	}
	// Conflicts is the refusal of a create whose entity exists.
	Conflicts[S any] interface {
		Conflict(id string, rec S) error
	}
	// Holds reports whether requests' answers wait (A10: until the pool's
	// decision is durable here).
	Holds[S any] interface {
		Holds(rec S) bool
	}
	// Idles reports whether the entity may be passivated now (default:
	// never).
	Idles[S any] interface {
		Idle(rec S, exists bool) bool
	}
	// Copies is the record as an answer leaves the mailbox with it.
	Copies[S any] interface {
		Copy(rec S) S
	}
	// Wire is the form of the events another node's entity may send this
	// kind; false for events only the owner makes (timers, effect
	// results). DecodeEvent reads one, bounded and strict.
	Wire[E any] interface {
		EncodeEvent(ev E) ([]byte, bool)
		DecodeEvent(b []byte) (E, error)
	}
)

// View is an entity as Observe sees it: what it is, nothing to act with.
type View[S any] struct {
	ID     string
	Record S
	Now    time.Time
	Log    *slog.Logger
}

// kindOf is a Kind with its optional parts found, defaults where it has
// none: nothing indexed, always stored, nothing to send, observe,
// reconcile, admit or hold, never idle, no wire form.
type kindOf[S, E any, O Outcome] struct {
	Kind[S, E, O]
	staging[S, O]
	run      func(h *Handle[S, E, O], next S, out O)
	sends    func(id string, next S, out O) []Message
	observe  func(View[S], E, S, S, O)
	started  func(*Handle[S, E, O], bool)
	woken    func(*Handle[S, E, O])
	stored   func(string) (bool, error)
	admit    func(S, E) error
	conflict func(string, S) error
	holds    func(S) bool
	idle     func(S, bool) bool
	copy     func(S) S
	encode   func(E) ([]byte, bool)
	decode   func([]byte) (E, error)
}

// staging is a Stager with its wake letter found (none: not indexed) and
// whether its record keeps the newest chunk of its deliveries (keeps nil:
// it does not).
type staging[S any, O Outcome] struct {
	stager     Stager[S, O]
	wakeLetter string
	wakeOf     func(S) time.Time
	keeps      KeepsDeliveries[S]
}

func stagingOf[S any, O Outcome](st Stager[S, O]) staging[S, O] {
	k := staging[S, O]{stager: st, wakeOf: func(S) time.Time { return time.Time{} }}
	if x, ok := st.(WakeIndexed[S]); ok {
		k.wakeLetter, k.wakeOf = x.WakeLetter(), x.WakeOf
	}
	if x, ok := st.(KeepsDeliveries[S]); ok {
		k.keeps = x
	}
	return k
}

// recent is the chunk of deliveries rec keeps (none, for a kind that
// keeps none in its record).
func (k staging[S, O]) recent(rec S) persistence.InRecord {
	if k.keeps == nil {
		return persistence.InRecord{}
	}
	return k.keeps.RecentDeliveries(rec)
}

// carry gives a step's record the chunk of deliveries it keeps: the
// delivery's, with its reply, or else the one before's, which the
// machine does not see and so does not carry itself.
func (k staging[S, O]) carry(next, before S, d *delivery) S {
	switch {
	case k.keeps == nil:
		return next
	case d != nil:
		return k.keeps.WithRecentDeliveries(next, d.after.Recent())
	}
	return k.keeps.WithRecentDeliveries(next, k.keeps.RecentDeliveries(before).Chunk)
}

func resolve[S, E any, O Outcome](k Kind[S, E, O]) *kindOf[S, E, O] {
	r := &kindOf[S, E, O]{Kind: k, staging: stagingOf[S, O](k),
		run:      func(*Handle[S, E, O], S, O) {},
		sends:    func(string, S, O) []Message { return nil },
		observe:  func(View[S], E, S, S, O) {},
		started:  func(*Handle[S, E, O], bool) {},
		woken:    func(*Handle[S, E, O]) {},
		stored:   func(string) (bool, error) { return true, nil },
		admit:    func(S, E) error { return nil },
		conflict: func(id string, _ S) error { return fmt.Errorf("%w: %s already exists", errs.Conflict, id) },
		holds:    func(S) bool { return false },
		idle:     func(S, bool) bool { return false },
		copy:     func(rec S) S { return rec },
		encode:   func(E) ([]byte, bool) { return nil, false },
		decode:   func([]byte) (E, error) { var zero E; return zero, errNoWireForm },
	}
	if x, ok := k.(Effects[S, E, O]); ok {
		r.run = x.Run
	}
	if x, ok := k.(Sends[S, O]); ok {
		r.sends = x.Sends
	}
	if x, ok := k.(Observes[S, E, O]); ok {
		r.observe = x.Observe
	}
	if x, ok := k.(Starts[S, E, O]); ok {
		r.started = x.Started
	}
	if x, ok := k.(Wakes[S, E, O]); ok {
		r.woken = x.Woken
	}
	if x, ok := k.(Stores); ok {
		r.stored = x.Stored
	}
	if x, ok := k.(Admits[S, E]); ok {
		r.admit = x.Admit
	}
	if x, ok := k.(Conflicts[S]); ok {
		r.conflict = x.Conflict
	}
	if x, ok := k.(Holds[S]); ok {
		r.holds = x.Holds
	}
	if x, ok := k.(Idles[S]); ok {
		r.idle = x.Idle
	}
	if x, ok := k.(Copies[S]); ok {
		r.copy = x.Copy
	}
	if x, ok := k.(Wire[E]); ok {
		r.encode, r.decode = x.EncodeEvent, x.DecodeEvent
	}
	return r
}

// Message is one message to an entity, as a step's outcome names it
// (Sends): made by Entities.Message, delivered once the step is durable.
type Message struct {
	key Key
	msg message
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
	// Read or a refusal), copied by Copies; zero for a ReplyOnly request.
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
