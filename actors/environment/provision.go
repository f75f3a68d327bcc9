package environment

// Transitions forward: taking eligible work, beginning an attempt under a
// lease, and a driver's answer coming back.

import (
	"fmt"
	"time"
)

func (m Machine) advance(e *Env, a Advance, now time.Time) decision {
	if e.Generation == 0 {
		if now.Before(e.AskedAt.Add(m.askBranchAgain())) {
			return decision{Note: "waiting for branch " + e.Branch + " to give the route generation"}
		}
		return m.askBranch(e, now)
	}
	if at := e.Attempt; at != nil {
		if now.Before(at.Lease.ExpiresAt) {
			return decision{Note: fmt.Sprintf("attempt %s is leased to %s until %s", at.ID, at.Lease.Owner, at.Lease.ExpiresAt.Format(time.RFC3339))}
		}
		// E7: takeover only after expiry, and the previous attempt is
		// reconciled first: observe what it may have done.
		prev := at.Lease.Owner
		e.LeaseGeneration++
		at.Lease = Lease{Owner: a.Owner, Generation: e.LeaseGeneration, ExpiresAt: now.Add(m.Config.LeaseFor)}
		at.Verifying, at.Unknown = true, at.Op != Observe
		return decision{Note: fmt.Sprintf("took over attempt %s from %s (lease expired); observing first (E7)", at.ID, prev),
			Effects: []Effect{m.do(e, Observe)}}
	}
	if why, ok := m.eligible(e, now); !ok {
		return decision{Note: why}
	}
	return m.start(e, a.Owner, a.BranchNewest, now)
}

// start begins the transition from the current state: the intent recorded
// before its first effect, or, for the last removal state, the
// tombstone.
func (m Machine) start(e *Env, owner string, branchNewest uint64, now time.Time) decision {
	t, ok := m.nextFrom(e)
	if !ok {
		return decision{Note: "no transition from " + string(e.State)}
	}
	var through []Phase
	if e.waking() {
		// The data and the artifact were kept: provisioning goes on
		// from data-ready, as a new preview's does (E20).
		e.State = DataReady
		through = []Phase{DataReady}
	}
	if t.from == AppStopped && e.Data == Preserve && !e.DataRemovalOK {
		e.LastFailure = &Failure{Transition: string(t.from) + " -> " + string(t.to), Category: Configuration, Retryable: false,
			Needs: "review", Message: "data holds review-entered state; removal needs an operator decision (continue-removal, E12)", At: now}
		return decision{Note: e.LastFailure.Message}
	}
	if len(t.steps) == 0 { // resources-verified-absent -> removed
		e.State = t.to
		e.Tombstone = &Tombstone{Reason: e.RemovalReason, RemovedAt: now}
		e.Attempt = nil
		m.announce(e, EventRemoved, "removed: "+e.RemovalReason, now)
		return decision{Note: "removed; tombstone kept for leak audits (E12)", through: []Phase{Removed}}
	}
	out := m.begin(e, t, 0, owner, branchNewest, now)
	out.through = append(through, out.through...)
	return out
}

// askBranch asks the branch for the route generation (again, after
// AskBranchAgain: its answer, or the asking, may have been lost); asking
// twice is told the same one (StepBranch).
func (m Machine) askBranch(e *Env, now time.Time) decision {
	e.AskedAt = now
	return decision{Note: "its route generation asked of branch " + e.Branch, Effects: []Effect{AskGeneration{Branch: e.Branch}}}
}

func (m Machine) askBranchAgain() time.Duration {
	if m.Config.AskBranchAgain > 0 {
		return m.Config.AskBranchAgain
	}
	return time.Minute
}

// given records the route generation the branch gave (GenerationGiven):
// the route's declared identity is named after it.
func (m Machine) given(e *Env, g GenerationGiven) decision {
	if e.Generation != 0 {
		return decision{Note: fmt.Sprintf("route generation %d already given", e.Generation)}
	}
	e.Generation = g.Generation
	for i := range e.Resources {
		if e.Resources[i].Capability == Route {
			e.Resources[i].Identity = e.Identity(Route)
		}
	}
	return decision{Note: fmt.Sprintf("route generation %d given by branch %s", g.Generation, e.Branch)}
}

// proceed begins the next transition in the step that ended the one
// before (a result verified, a drift repaired, a removal asked, a create),
// when one is eligible now; a step that began an attempt, or whose next
// would activate the route without knowing the branch's newest generation
// (an event that does not carry it), leaves it to the next Advance.
func (m Machine) proceed(e *Env, ev Event, owner string, out *decision, now time.Time) {
	var newest uint64
	switch ev := ev.(type) {
	case Create, RemoveEnv, Expire, GenerationGiven, Traffic, Visited:
	case DriverAnswer:
		newest = ev.BranchNewest
	case AtRest:
		newest = ev.BranchNewest
	case Action:
		newest = ev.BranchNewest
	default:
		return // an advance already did; the others never end a transition
	}
	// A step skipped (a superseded preview's route and smoke check) ends
	// its transition at once, so the next may begin in the same step too;
	// each round enters a state, so there are at most as many as states.
	for range maxProceed {
		if e.Attempt != nil || e.Tombstone != nil || e.Generation == 0 {
			return // an attempt in flight, nothing left, or no generation yet
		}
		if t, ok := m.nextFrom(e); !ok || len(t.steps) > 0 && t.steps[0] == (step{Route, Apply}) && newest == 0 {
			return
		}
		if _, ok := m.eligible(e, now); !ok {
			return
		}
		next := m.start(e, owner, newest, now)
		if next.Err != nil {
			return
		}
		out.Note += "; " + next.Note
		out.Effects = append(out.Effects, next.Effects...)
		out.through = append(out.through, next.through...)
	}
}

// maxProceed bounds the transitions one step may begin: more than the
// provisioning path has states.
const maxProceed = 8

// begin records the attempt (intent before effect, E5) and asks for the
// step's effect.
func (m Machine) begin(e *Env, t transition, stepIdx int, owner string, branchNewest uint64, now time.Time) decision {
	st := t.steps[stepIdx]
	e.AttemptSeq++
	e.LeaseGeneration++
	e.Attempt = &Attempt{ID: fmt.Sprintf("att-%s-%d", e.ID, e.AttemptSeq), From: t.from, To: t.to, Step: stepIdx,
		Capability: st.cap, Op: st.op, Identity: e.Identity(st.cap), StartedAt: now,
		Lease: Lease{Owner: owner, Generation: e.LeaseGeneration, ExpiresAt: now.Add(m.Config.LeaseFor)}}
	// An observe step's effect is its own verification.
	e.Attempt.Verifying = st.op == Observe
	if st.cap == Route && st.op == Apply && branchNewest > e.Generation && e.SupersededBy == 0 {
		m.supersede(e, branchNewest, now)
	}
	if e.SupersededBy > 0 && (st.cap == Route && (st.op == Apply || st.op == Sleep) || st.cap == Smoke) {
		// A newer generation of the branch holds the route: activating
		// this one would pull it back, and the hostname's smoke check
		// would answer for the newer one.
		return m.stepDone(e, fmt.Sprintf("%s skipped: superseded by route generation %d (E8, I14)", st.cap, e.SupersededBy), "", now)
	}
	return decision{Note: fmt.Sprintf("attempt %s: %s -> %s, %s %s %s (E5)", e.Attempt.ID, t.from, t.to, st.op, st.cap, e.Attempt.Identity),
		Effects: []Effect{m.do(e, st.op)}}
}

func (m Machine) do(e *Env, op Op) Do {
	a := e.Attempt
	d := Do{AttemptID: a.ID, LeaseGeneration: a.Lease.Generation, Capability: a.Capability, Op: op, Identity: a.Identity, Generation: e.Generation}
	if a.Capability == Route && op == Apply {
		d.ExpectedRoute = e.Generation - 1 // the predecessor this activation replaces
	}
	if a.Capability == Database && op == Apply {
		d.DataFrom = e.DataFrom
	}
	return d
}

func (m Machine) ownerGone(e *Env, g OwnerGone, now time.Time) decision {
	a := e.Attempt
	if a == nil || a.Lease.Owner != g.Owner || !now.Before(a.Lease.ExpiresAt) {
		return decision{Note: "no live lease of " + g.Owner}
	}
	a.Lease.ExpiresAt = now
	return decision{Note: fmt.Sprintf("lease of attempt %s held by %s, which is gone, ends now; the next worker observes first (E7)", a.ID, g.Owner)}
}

func (m Machine) renew(e *Env, r RenewLease, now time.Time) decision {
	a := e.Attempt
	if a == nil || a.ID != r.AttemptID || a.Lease.Generation != r.LeaseGeneration {
		return decision{Rejected: true, Note: "lease renewal by a stale worker rejected (E7)"}
	}
	a.Lease.ExpiresAt = now.Add(m.Config.LeaseFor)
	return decision{Note: "lease renewed until " + a.Lease.ExpiresAt.Format(time.RFC3339)}
}

func (m Machine) result(e *Env, r DriverAnswer, now time.Time) decision {
	a := e.Attempt
	fenced := a != nil && a.Lease.Generation != r.LeaseGeneration
	if a == nil || a.ID != r.AttemptID || fenced {
		// E7, I13: a paused or stale worker never completes a newer attempt.
		e.Audit = append(e.Audit, AuditEntry{Actor: "controller", Action: ActionRejectStaleResult,
			Reason: fmt.Sprintf("result for %s under lease generation %d refused", r.AttemptID, r.LeaseGeneration), At: now})
		return decision{Rejected: true, Note: fmt.Sprintf("stale result for %s (lease generation %d) rejected and recorded (E7, I13)", r.AttemptID, r.LeaseGeneration)}
	}
	if !a.Verifying {
		if r.Timeout || r.OK {
			// Success is not evidence and a timeout is not failure: observe
			// the declared identity.
			a.Verifying, a.Unknown = true, r.Timeout
			note := "effect answered; verifying by observation (E4)"
			if r.Timeout {
				note = "effect timed out, decision unknown; observing (E8)"
			}
			return decision{Note: note, Effects: []Effect{m.do(e, Observe)}}
		}
		return m.fail(e, r.Category, r.Message, now)
	}
	a.Input, a.Output = r.Input, r.Output
	if r.Observation == nil {
		if r.Timeout || r.Category == "" {
			return m.fail(e, Transient, "observation did not answer", now)
		}
		return m.fail(e, r.Category, r.Message, now)
	}
	return m.verify(e, *r.Observation, now)
}
