// Package entity holds the one shape every machine's step returns, in the
// spirit of etcd's raft Ready: a pure Step(state, event, now) gives back the
// next state and an Outcome that says everything the shell must do about
// it, in order:
//
//	Step ──► Outcome ──► Err?  ── yes ─► answer the error; nothing written
//	                      │ no
//	                      ▼
//	         Records + state (+ Reply as the delivery's dedup record)
//	                    │  one synced batch
//	                    ▼
//	         Effects started ─► Wake armed ─► Answer (or Reply) to the caller
//
// Marquees, pools and environments all return it, so one runtime
// (actors/runtime) drives them all and every golden suite prints a step
// the same way (Format). The one id alphabet every kind's ids keep to
// (ValidID) is here too.
package entity

import (
	"fmt"
	"strings"
	"time"
)

// Outcome is what one step produced besides the next state.
type Outcome[Answer, Effect, Record any] struct {
	// Answer is what was decided, for the caller and for history: a
	// callback's result, a pool's admission, a preview's verdict.
	Answer Answer
	// Err refuses the event: the state is unchanged and nothing is
	// written (an operator command not allowed now, a full queue).
	Err error
	// Reply is the exact encoded answer to a delivery, stored with its
	// dedup record so that a repeat hears the same bytes.
	Reply []byte
	// Records are appended in the same batch as the state (history lines,
	// admission records).
	Records []Record
	// Effects are started only after the batch is durable (intent before
	// effect, E5).
	Effects []Effect
	// Messages go to other entities (or to this one, later) only after
	// the batch is durable, before the effects start: a pool's admission
	// to a job, a preview's ask to its branch. A machine names its effects;
	// its kind, which knows where each entity lives, adds the messages.
	Messages []Message
	// Wake is the state's earliest deadline; zero means none.
	Wake time.Time
	// Changed is false when the state is as it was: with no records and
	// no reply either, the shell writes nothing.
	Changed bool
}

// Message is one message a step sends: to the entity ID of the kind
// named Kind, an event of that kind.
type Message struct {
	Kind, ID string
	Event    any
}

// ToSend is Messages: the runtime's name for what a step sends.
func (r Outcome[A, F, R]) ToSend() []Message { return r.Messages }

// Refusal is Err: the runtime's name for a step it must not write.
func (r Outcome[A, F, R]) Refusal() error { return r.Err }

// Encoded is Reply: what a delivery's record keeps.
func (r Outcome[A, F, R]) Encoded() []byte { return r.Reply }

// WakeAt is Wake.
func (r Outcome[A, F, R]) WakeAt() time.Time { return r.Wake }

// Writes says whether the step has anything to persist.
func (r Outcome[A, F, R]) Writes() bool {
	return r.Changed || len(r.Records) > 0 || r.Reply != nil
}

// Format prints an Outcome the one way every golden suite shows a step:
// the answer (or error), each record and effect on its own line, the wake
// relative to now, and whether the state changed. Answers, records and
// effects print with their String methods.
func Format[A, F, R any](r Outcome[A, F, R], now time.Time) string {
	var b strings.Builder
	if r.Err != nil {
		fmt.Fprintf(&b, "error: %v\n", r.Err)
		return b.String()
	}
	fmt.Fprintf(&b, "answer: %v\n", r.Answer)
	if r.Reply != nil {
		fmt.Fprintf(&b, "reply: %s\n", r.Reply)
	}
	for _, rec := range r.Records {
		fmt.Fprintf(&b, "record: %v\n", rec)
	}
	for _, e := range r.Effects {
		fmt.Fprintf(&b, "effect: %v\n", e)
	}
	switch {
	case r.Wake.IsZero():
	case r.Wake.After(now):
		fmt.Fprintf(&b, "wake: +%s\n", r.Wake.Sub(now))
	default:
		b.WriteString("wake: now\n")
	}
	if !r.Changed {
		b.WriteString("unchanged\n")
	}
	return b.String()
}

// None is the record type of a kind that appends nothing beside its state.
type None struct{}

// Status is the one answer to "what is it doing, and why": a line a
// person reads first, warden's own next step, and the status classes a
// list filters by. Each machine derives it from its record alone.
type Status struct {
	Text    string
	Next    *Next
	Classes []string
}

// Next is an entity's next step that warden itself will take: when,
// and what it is, named for what it is (a stuck retry, a lease ending, a
// TTL).
type Next struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// Clock prints a time in a status line: the time of day in UTC, with the
// date when it is not now's day. It reads no clock: now is given.
func Clock(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05") + " UTC"
	}
	return t.Format("2006-01-02 15:04") + " UTC"
}

// ValidID reports whether id is in the one id alphabet of warden's
// entities, [a-z0-9][a-z0-9-]{0,62}. Ids become workflow inputs, shell
// arguments and storage keys, so nothing outside it is let in.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > 63 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}
