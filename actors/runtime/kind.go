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
	"time"

	"github.com/wardenhq/warden/actors/errs"

	"github.com/wardenhq/warden/persistence"
)

// Outcome is what the runtime needs of a step's result (entity.Ready and
// the environment machine's Outcome are ones): whether it refused, the
// encoded reply a delivery keeps, whether it writes, and its wake.
type Outcome interface {
	Refusal() error
	Encoded() []byte
	Writes() bool
	WakeAt() time.Time
}

// Kind is one kind of entity: a marquee, a pool, an environment. S is its
// durable record, E its machine's events, O its step's outcome. Embed
// Defaults for the hooks a kind does not need.
type Kind[S, E any, O Outcome] interface {
	// Name names the kind in keys, logs, metrics and actor names.
	Name() string
	// WakeKind is the kind's letter in the wake index ("" for a kind
	// whose deadlines are not indexed).
	WakeKind() string
	// Load reads an entity's record: whether it exists, or an error that
	// leaves it unusable (logged; the entity acts as absent).
	Load(id string) (rec S, exists bool, err error)
	// Stored reports, without decoding, whether a record exists: only a
	// create may activate an entity that does not.
	Stored(id string) (bool, error)
	// Step is the kind's pure machine on its record.
	Step(rec S, ev E, now time.Time) (S, O)
	// Stage puts a step's writes into b (before is the record it
	// replaces). The runtime adds the wake entry and a delivery's record.
	Stage(b persistence.Writer, id string, before, next S, out O)
	// WakeOf is the record's wake-index time (zero: none).
	WakeOf(rec S) time.Time
	// Run starts a durable step's effects.
	Run(h *Handle[S, E, O], next S, out O)
	// Observe sees every step that was taken (logs, metrics, O11).
	Observe(h *Handle[S, E, O], ev E, before, next S, out O)
	// Started runs once the record is loaded (reconciliation, deadlines
	// due); afterFailure says the instance replaced one that crashed.
	Started(h *Handle[S, E, O], afterFailure bool)
	// Woken runs when the entity's wake timer fires.
	Woken(h *Handle[S, E, O])
	// Signaled handles a kind's own message (Entities.Signal).
	Signaled(h *Handle[S, E, O], v any)
	// Admit refuses a request before anything is read for it (T4, T12).
	Admit(rec S, ev E) error
	// Prepare completes a request's event with what only the shell can
	// know (a route generation given out): impure, inside the mailbox.
	Prepare(h *Handle[S, E, O], ev E) (E, error)
	// Conflict is the refusal of a create whose entity exists.
	Conflict(id string, rec S) error
	// Holds reports whether requests' answers wait (A10: until the pool's
	// decision is durable here).
	Holds(rec S) bool
	// Idle reports whether the entity may be passivated now.
	Idle(rec S, exists bool) bool
	// Copy is the record as an answer leaves the mailbox with it.
	Copy(rec S) S
	// EncodeEvent is the wire form of an internal event another node's
	// entity may send this kind (C4); false for events only the owner
	// makes (timers, effect results).
	EncodeEvent(ev E) ([]byte, bool)
	// DecodeEvent reads one, bounded and strict.
	DecodeEvent(b []byte) (E, error)
}

// Defaults gives a Kind the hooks it does not need: nothing indexed,
// always stored, nothing to observe, reconcile, prepare or hold, never
// idle, no wire form.
type Defaults[S, E any, O Outcome] struct{}

func (Defaults[S, E, O]) WakeKind() string                            { return "" }
func (Defaults[S, E, O]) Stored(string) (bool, error)                 { return true, nil }
func (Defaults[S, E, O]) WakeOf(S) time.Time                          { return time.Time{} }
func (Defaults[S, E, O]) Run(*Handle[S, E, O], S, O)                  {}
func (Defaults[S, E, O]) Observe(*Handle[S, E, O], E, S, S, O)        {}
func (Defaults[S, E, O]) Started(*Handle[S, E, O], bool)              {}
func (Defaults[S, E, O]) Woken(*Handle[S, E, O])                      {}
func (Defaults[S, E, O]) Signaled(*Handle[S, E, O], any)              {}
func (Defaults[S, E, O]) Admit(S, E) error                            { return nil }
func (Defaults[S, E, O]) Prepare(_ *Handle[S, E, O], ev E) (E, error) { return ev, nil }
func (Defaults[S, E, O]) Holds(S) bool                                { return false }
func (Defaults[S, E, O]) Conflict(id string, _ S) error {
	return fmt.Errorf("%w: %s already exists", errs.Conflict, id)
}
func (Defaults[S, E, O]) Idle(S, bool) bool            { return false }
func (Defaults[S, E, O]) Copy(rec S) S                 { return rec }
func (Defaults[S, E, O]) EncodeEvent(E) ([]byte, bool) { return nil, false }
func (Defaults[S, E, O]) DecodeEvent([]byte) (E, error) {
	var zero E
	return zero, errNoWireForm
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
	// a rekey's reseal (T10, D9), which on a cluster only the owner of
	// the record's shard may do.
	Rewrite
)

// Request is one caller's question to an entity.
type Request[E any] struct {
	Mode  Mode
	Event E
	// Delivery, when set, is a delivery's identity (M20, T5): a repeat
	// gets the first answer's bytes, and the step's reply is stored with
	// it in the step's batch.
	Delivery *Delivery
}

// Delivery identifies one delivery of a message from outside.
type Delivery struct {
	ID       string
	BodyHash [32]byte
}

// Result is an entity's answer.
type Result[S any, O Outcome] struct {
	// Record is the entity's record after the request (as it stands for a
	// Read or a refusal), copied by Kind.Copy.
	Record S
	Exists bool
	// Reply is a delivery's answer: the step's encoded reply, or the
	// first answer's bytes again (Duplicate).
	Reply     []byte
	Status    int
	Duplicate bool
	// Outcome is the step's (zero for a Read or a duplicate).
	Outcome O
}
