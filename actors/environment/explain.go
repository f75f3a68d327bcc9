package environment

import (
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Input is one input that would move an environment now, found by
// stepping it on a copy (O17).
type Input = entity.Input

// candidate is an input explain asks the machine about, and the time it
// would come (zero: now).
type candidate struct {
	ev Event
	at time.Time
}

// Awaiting is what would move the environment now: its attempt's driver
// answers, the lease's renewal, end or its owner's death, a retry's
// next step, its TTL, the operator's removal and actions, the
// reconciler's finding at rest, the branch's generation, the outbox's
// delivery. Each is stepped on a copy; those that are refused or change
// nothing are left out. Inputs of one name (InputName) are listed once.
func (m Machine) Awaiting(e Env, now time.Time) []Input {
	var out []Input
	listed := map[string]bool{}
	for _, c := range m.candidates(e) {
		name := InputName(e, c.ev)
		if listed[name] {
			continue
		}
		if next, o, moves := m.Moves(e, c.ev, later(now, c.at)); moves {
			listed[name] = true
			out = append(out, Input{Event: name, At: c.at, Effect: effectOf(e, next, o)})
		}
	}
	return out
}

// Moves steps ev on e at at and says whether it would move the
// environment: taken (no error, not refused) and changing it or starting
// an effect.
func (m Machine) Moves(e Env, ev Event, at time.Time) (Env, Outcome, bool) {
	next, o := m.Step(e, ev, at)
	return next, o, o.Err == nil && !o.Answer.Rejected && (o.Changed || len(o.Effects) > 0)
}

func later(now, at time.Time) time.Time {
	if at.After(now) {
		return at
	}
	return now
}

// InputName names an input as explain lists it. Inputs that do the same
// kind of thing share a name: a driver's failure of any category, the
// reconciler's finding on any resource, any observation other than
// present-and-matching or absent.
func InputName(e Env, ev Event) string {
	call := "driver"
	if a := e.Attempt; a != nil {
		call = fmt.Sprintf("driver %s %s", a.Capability, a.Op)
	}
	switch v := ev.(type) {
	case Advance:
		if e.Attempt != nil {
			return "timer lease end"
		}
		return "next step"
	case DriverAnswer:
		verifying := e.Attempt != nil && e.Attempt.Verifying
		switch {
		case v.Timeout:
			return call + " no answer"
		case verifying && v.Observation != nil:
			return call + " " + observed(e, *v.Observation)
		case v.OK && !verifying:
			return call + " done"
		}
		return call + " failed" // a verification that observed nothing fails too
	case RenewLease:
		return call + " lease renewed"
	case OwnerGone:
		return "lease owner's process gone"
	case RemoveEnv:
		return "operator remove"
	case Expire:
		return "timer ttl"
	case AtRest:
		if e.Tombstone != nil {
			return "reconciler finds something of it left"
		}
		return "reconciler finds it changed"
	case Action:
		return "operator action " + v.Name
	case GenerationGiven:
		return "branch gives its generation"
	case Traffic:
		if v.LastRequest.IsZero() {
			return "proxy reports no request since"
		}
		return "proxy reports a request since"
	case Visited:
		return "request to its host"
	case Delivered:
		if v.OK {
			return "notification delivered"
		}
		return "notification failed"
	}
	return fmt.Sprintf("%T", ev)
}

// observed names an observation: as declared, absent, or otherwise.
func observed(e Env, o Observation) string {
	switch {
	case !o.Exists:
		return "observed absent"
	case o.Owner == e.ID && o.Matches && !o.Replace:
		return "observed present and matching"
	}
	return "observed otherwise"
}

// candidates are the inputs an environment can be sent now, one or more
// of each name.
func (m Machine) candidates(e Env) []candidate {
	var cs []candidate
	add := func(at time.Time, evs ...Event) {
		for _, ev := range evs {
			cs = append(cs, candidate{ev: ev, at: at})
		}
	}
	if a := e.Attempt; a != nil {
		answer := func(ok bool, obs *Observation, timeout bool) DriverAnswer {
			return DriverAnswer{AttemptID: a.ID, LeaseGeneration: e.LeaseGeneration, OK: ok, Observation: obs, Timeout: timeout,
				Category: Transient, Message: "a transient failure"}
		}
		if a.Verifying {
			add(time.Time{}, answer(true, &Observation{Exists: true, Owner: e.ID, Matches: true, RouteTarget: e.Generation}, false),
				answer(true, &Observation{}, false),
				answer(true, &Observation{Exists: true, Owner: e.ID, Detail: "not as declared"}, false))
		} else {
			add(time.Time{}, answer(true, nil, false))
		}
		add(time.Time{}, answer(false, nil, false), answer(false, nil, true),
			RenewLease{AttemptID: a.ID, LeaseGeneration: e.LeaseGeneration}, OwnerGone{Owner: a.Lease.Owner})
		add(a.Lease.ExpiresAt, Advance{Owner: "another worker"})
	} else {
		if e.Tombstone == nil {
			add(e.RetryAt, Advance{Owner: m.Config.Worker})
		}
		for _, c := range StepCapabilities {
			add(time.Time{}, AtRest{Capability: c, Seq: e.AttemptSeq},
				AtRest{Capability: c, Seq: e.AttemptSeq, Observation: Observation{Exists: true, Owner: e.ID, Detail: "not as declared"}})
		}
	}
	if e.Desired != "removed" && !e.ExpiresAt.IsZero() {
		add(e.ExpiresAt, Expire{})
	}
	if e.Desired != "removed" {
		add(time.Time{}, RemoveEnv{Reason: "asked by an operator", By: "operator"})
	}
	if due := e.sleepDue(); !due.IsZero() {
		add(due, Traffic{}, Traffic{LastRequest: due})
	}
	add(time.Time{}, Visited{})
	for _, name := range m.Actions(e) {
		add(time.Time{}, Action{Name: name, Actor: "operator", Reason: "asked by an operator"})
	}
	add(time.Time{}, GenerationGiven{Generation: e.Generation + 1})
	for _, n := range e.Outbox {
		if !n.Delivered {
			add(time.Time{}, Delivered{Key: n.Key, OK: true}, Delivered{Key: n.Key, Error: "the receiver did not answer"})
		}
	}
	return cs
}

// effectOf says what a step did, in its own terms: the states it went
// through, what it starts, and the machine's note.
func effectOf(before, after Env, o Outcome) string {
	var parts []string
	if after.State != before.State {
		parts = append(parts, fmt.Sprintf("%s -> %s", before.State, after.State))
	}
	if after.Desired != before.Desired {
		parts = append(parts, "desired "+after.Desired)
	}
	for _, eff := range o.Effects {
		if d, ok := eff.(Do); ok {
			parts = append(parts, fmt.Sprintf("starts %s %s", d.Op, d.Capability))
		}
	}
	if n := o.Answer.Note; n != "" {
		parts = append(parts, n)
	}
	if len(parts) == 0 {
		return "records it"
	}
	return strings.Join(parts, "; ")
}

// Change is one field a step changed, as a dry run reports it.
type Change = entity.Change

// Changes are the fields that say where an environment is, as they differ
// between before and after: its state, what is desired of it, its route
// generation, its failures, its open drift and its tombstone.
func Changes(before, after Env) []Change {
	out := []Change{}
	add := func(field, from, to string) {
		if from != to {
			out = append(out, Change{Field: field, From: from, To: to})
		}
	}
	add("state", string(before.State), string(after.State))
	add("desired", before.Desired, after.Desired)
	add("generation", fmt.Sprint(before.Generation), fmt.Sprint(after.Generation))
	add("failures", fmt.Sprint(before.Failures), fmt.Sprint(after.Failures))
	add("open_drift", fmt.Sprint(openDrift(before)), fmt.Sprint(openDrift(after)))
	add("tombstone", fmt.Sprint(before.Tombstone != nil), fmt.Sprint(after.Tombstone != nil))
	return out
}

func openDrift(e Env) int {
	n := 0
	for _, d := range e.Drift {
		if d.Outcome == "" {
			n++
		}
	}
	return n
}
