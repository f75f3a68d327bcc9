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

// candidate is an input explain asks the machine about.
type candidate struct {
	name string
	ev   Event
	at   time.Time
}

// Awaiting is what would move the environment now: its attempt's driver
// answers (done, observed present, observed absent, failed, no answer),
// its timers (the lease's end, a retry, its TTL), the operator's removal
// and actions, and the next step of one with nothing in flight. Each is
// stepped on a copy; those that change nothing are left out.
func (m Machine) Awaiting(e Env, now time.Time) []Input {
	var out []Input
	for _, c := range m.candidates(e, now) {
		at := now
		if c.at.After(now) {
			at = c.at
		}
		next, o := m.Step(e, c.ev, at)
		if o.Err != nil || !o.Changed && len(o.Effects) == 0 {
			continue
		}
		out = append(out, Input{Event: c.name, At: c.at, Effect: effectOf(e, next, o)})
	}
	return out
}

func (m Machine) candidates(e Env, now time.Time) []candidate {
	var cs []candidate
	if a := e.Attempt; a != nil {
		call := fmt.Sprintf("driver %s %s", a.Capability, a.Op)
		answer := func(ok bool, obs *Observation, timeout bool) DriverAnswer {
			return DriverAnswer{AttemptID: a.ID, LeaseGeneration: e.LeaseGeneration, OK: ok, Observation: obs, Timeout: timeout,
				Category: Transient, Message: "a transient failure"}
		}
		if a.Verifying {
			cs = append(cs,
				candidate{name: call + " observed present and matching", ev: answer(true, &Observation{Exists: true, Owner: e.ID, Matches: true, RouteTarget: e.Generation}, false)},
				candidate{name: call + " observed absent", ev: answer(true, &Observation{}, false)})
		} else {
			cs = append(cs, candidate{name: call + " done", ev: answer(true, nil, false)})
		}
		cs = append(cs,
			candidate{name: call + " failed (transient)", ev: answer(false, nil, false)},
			candidate{name: call + " no answer", ev: answer(false, nil, true)},
			candidate{name: "timer lease end", ev: Advance{Owner: "another worker"}, at: a.Lease.ExpiresAt})
	} else if e.Tombstone == nil {
		cs = append(cs, candidate{name: "next step", ev: Advance{Owner: m.Config.Worker}, at: e.RetryAt})
	}
	if e.Desired == "ready" && !e.ExpiresAt.IsZero() {
		cs = append(cs, candidate{name: "timer ttl", ev: Expire{}, at: e.ExpiresAt})
	}
	if e.Desired == "ready" {
		cs = append(cs, candidate{name: "operator remove", ev: RemoveEnv{Reason: "asked by an operator", By: "operator"}})
	}
	for _, name := range m.Actions(e) {
		cs = append(cs, candidate{name: "operator action " + name, ev: Action{Name: name, Actor: "operator", Reason: "asked by an operator"}})
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
