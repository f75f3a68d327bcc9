package environment

// Verification: a step ends only on an observation that shows it done,
// and a failure is recorded with what it left.

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// verify judges an observation of the attempt's identity.
func (m Machine) verify(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	op := a.Op
	if t, _ := m.transitionFrom(a.From); t.steps != nil {
		op = t.steps[a.Step].op
	}
	if op == Sleep {
		return m.verifySlept(e, o, now)
	}
	if a.Capability == Route {
		if op == Apply {
			return m.verifyActivation(e, o, now)
		}
		// A route generation is owned by its number: ours exists only while
		// the branch route resolves to it. One held by a newer generation
		// is not ours to remove and is already absent for us.
		o.Exists = o.Exists && o.RouteTarget == e.Generation
		o.Owner = e.ID
	}
	if a.Capability == Smoke {
		if o.RouteTarget > e.Generation {
			// Between activation and the smoke check a newer preview took
			// the branch hostname: superseded, not a failure.
			m.supersede(e, o.RouteTarget, now)
			return m.stepDone(e, fmt.Sprintf("the hostname serves newer generation %d: superseded (E8, I14)", o.RouteTarget), "", now)
		}
		if e.SupersededBy == 0 && o.RouteTarget < e.Generation {
			return m.lostBeforeSmoke(e, Route, o, now)
		}
		if e.SupersededBy == 0 && !o.Exists {
			return m.lostBeforeSmoke(e, App, o, now) // the route is ours; nothing answers behind it
		}
		o.Owner = e.ID // the hostname's answer is not an ownership claim
	}
	if o.Exists && o.Owner != "" && o.Owner != e.ID {
		// E3: a same-name resource owned by someone else is a conflict,
		// never reused; removal never deletes it.
		return m.fail(e, Conflict, fmt.Sprintf("%s exists but belongs to %s (E3)", a.Identity, o.Owner), now)
	}
	if again, ok := m.applyAgain(e, op, o); ok {
		return again
	}
	switch op {
	case Remove:
		if o.Exists {
			return m.fail(e, Transient, a.Identity+" still present after removal", now)
		}
		m.setResource(e, a.Capability, "", "removed")
		return m.stepDone(e, "already absent or removed, ownership verified (E11)", "", now)
	case Observe:
		return m.verifyObserved(e, o, now)
	}
	return m.verifyApplied(e, o, now)
}

// verifyObserved judges an observation step: absence verified, or a
// resource ready.
func (m Machine) verifyObserved(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	if a.From == DataRemoved { // resources-verified-absent
		if o.Exists {
			return m.fail(e, Transient, a.Identity+" is still present", now)
		}
		return m.stepDone(e, a.Identity+" verified absent", "", now)
	}
	if a.From == AppStarting && (!o.Exists || o.Replace) {
		// Waiting cannot make it ready: the next attempt starts it
		// again, after the back-off of an observed failure.
		out := m.fail(e, Transient, fmt.Sprintf("%s cannot become ready as it is, started again next: %s", a.Identity, o.Detail), now)
		e.State = DataReady
		m.setResource(e, App, "", "absent")
		return out
	}
	if !o.Exists || !o.Matches {
		return m.fail(e, Transient, fmt.Sprintf("%s not ready: %s", a.Identity, o.Detail), now)
	}
	return m.stepDone(e, a.Identity+" ready: "+o.Detail, "", now)
}

// verifyApplied judges what an apply left.
func (m Machine) verifyApplied(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	if !o.Exists {
		return m.fail(e, Transient, a.Identity+" not found after apply", now)
	}
	if o.Replace {
		return m.fail(e, Transient, a.Identity+" cannot run as it is after apply: "+o.Detail, now)
	}
	if !o.Matches && a.Capability == App {
		// The instance exists and is this environment's; whether it is
		// ready is the next transition's observation (app-starting ->
		// app-ready), which may wait for it. A slow start is not a
		// configuration failure.
		m.setResource(e, App, o.ProviderID, "present")
		return m.stepDone(e, a.Identity+" started: "+o.Detail, o.ProviderID, now)
	}
	if !o.Matches {
		return m.fail(e, Configuration, a.Identity+" does not match the declared configuration: "+o.Detail, now)
	}
	m.setResource(e, a.Capability, o.ProviderID, "present")
	return m.stepDone(e, a.Identity+" verified: "+o.Detail, o.ProviderID, now)
}

// applyAgain: an effect whose outcome was unknown (a timeout, a takeover
// after a crash) and that is observed not to have happened simply did not
// happen, and is asked for again at once, once per attempt (E8, P16). A
// back-off is for failures that were observed; a second unknown outcome
// that is observed undone is one.
func (m Machine) applyAgain(e *Env, op Op, o Observation) (decision, bool) {
	a := e.Attempt
	// An application that exists but can never run as it is (exited,
	// killed) is not what an apply leaves behind.
	undone := op == Apply && (!o.Exists || o.Replace) || op == Remove && o.Exists
	if !a.Unknown || a.Reapplied || !undone || a.From == DataRemoved {
		return decision{}, false
	}
	a.Unknown, a.Reapplied, a.Verifying = false, true, false
	return decision{Note: fmt.Sprintf("%s: the %s whose outcome was unknown did not happen; asked again now (E8, P16)", a.Identity, op),
		Effects: []Effect{m.do(e, op)}}, true
}

// verifyActivation judges the route after an activation or its timeout:
// at the target, success; at the predecessor, again under the same
// generation; at a newer generation, this preview is superseded. At the
// target the route must name this environment: generations are per
// branch, so one that names another is not this branch's route but a
// read gone wrong (P19), never recorded as ours.
func (m Machine) verifyActivation(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	switch {
	case o.Exists && o.RouteTarget == e.Generation && o.AtWaker:
		// A wake's activation not yet landed: the route still sends the
		// host to the waker. Asked again under the same generation.
		a.Verifying = false
		return decision{Note: fmt.Sprintf("route generation %d still sends its host to the waker; activating again (E8, E20)", e.Generation),
			Effects: []Effect{m.do(e, Apply)}}
	case o.Exists && o.RouteTarget == e.Generation && o.Owner != e.ID:
		return m.fail(e, Transient, fmt.Sprintf("the route read at generation %d names %q, not this environment: not taken as its route (E8, P19)",
			o.RouteTarget, o.Owner), now)
	case o.Exists && o.RouteTarget == e.Generation:
		m.setResource(e, Route, o.ProviderID, "present")
		if o.URL != "" {
			e.URL = o.URL // where the route says the preview is served
		}
		return m.stepDone(e, fmt.Sprintf("route resolves to generation %d (E8)", e.Generation), o.ProviderID, now)
	case o.RouteTarget <= e.Generation:
		// Still at the predecessor (or none): retry under the same generation.
		a.Verifying = false
		return decision{Note: fmt.Sprintf("route still at generation %d; retrying activation of %d (E8)", o.RouteTarget, e.Generation),
			Effects: []Effect{m.do(e, Apply)}}
	default:
		// Newer work owns the route: this attempt is stale and must not
		// overwrite it. Decided: that is supersession, not a
		// failure; the transition completes without the route.
		m.supersede(e, o.RouteTarget, now)
		return m.stepDone(e, fmt.Sprintf("route is at newer generation %d; not overwritten, this preview is superseded (E8, I14)", o.RouteTarget), "", now)
	}
}

// lostBeforeSmoke: the smoke check found the route (gone, or pointing to an
// older generation) or the application (nothing answers behind our route)
// lost after its step was verified. Retrying the smoke check could never
// pass, since that step's verification no longer holds, so this is drift,
// handled as at rest: a missing route is re-activated, a missing
// application reprovisioned through full readiness, automatically; a route
// pointing elsewhere, or anything while another drift is open, waits for
// an operator. Found by the simulator (seed 174): an application killed by
// hand between activation and smoke check left the preview retrying its
// smoke check into review, and resuming could not help. A repair that the
// smoke check keeps finding undone is a failure, retried with back-off: a
// walk repairs one capability at most maxRepairsPerWalk times.
func (m Machine) lostBeforeSmoke(e *Env, c Capability, o Observation, now time.Time) decision {
	d := Drift{Capability: c, Identity: e.Identity(c), DetectedAt: now, Desired: fmt.Sprintf("generation %d serving", e.Generation),
		Observed: fmt.Sprintf("route at generation %d, answered=%t (smoke check): %s", o.RouteTarget, o.Exists, o.Detail)}
	missing := c == App || o.RouteTarget == 0
	if missing && m.repairsUnderWay(e, c) >= maxRepairsPerWalk {
		return m.fail(e, Transient, fmt.Sprintf("the smoke check still finds %s lost after %d repairs: %s", d.Identity, maxRepairsPerWalk, o.Detail), now)
	}
	e.Attempt = nil
	if missing && m.openDrift(e) < 0 && (e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt)) {
		d.Outcome = "auto-repair"
		e.Drift = append(e.Drift, d)
		e.State = map[Capability]Phase{Route: AppReady, App: DataReady}[c]
		m.setResource(e, c, "", "absent")
		return decision{Note: fmt.Sprintf("%s lost before the smoke check: back to %s (E15)", c, e.State)}
	}
	e.Drift = append(e.Drift, d)
	return decision{Note: fmt.Sprintf("%s not as verified at the smoke check; recorded for an operator (E15)", c)}
}

// maxRepairsPerWalk bounds the automatic repairs of one capability that
// one walk to ready makes: a preview whose application dies again each
// time it is started would otherwise be reprovisioned in a loop.
const maxRepairsPerWalk = 3

// repairsUnderWay counts the automatic repairs of c not yet resolved by
// reaching ready: those of the walk under way.
func (m Machine) repairsUnderWay(e *Env, c Capability) int {
	n := 0
	for _, d := range e.Drift {
		if d.Capability == c && d.Outcome == "auto-repair" && d.ResolvedAt.IsZero() {
			n++
		}
	}
	return n
}

// supersede records that a newer preview of the branch holds the route
// (decided, see docs/decisions): it is the controller's own committed work, not a
// manual change, so no operator is asked; the route is never restored to
// this preview again and the view shows why.
func (m Machine) supersede(e *Env, newer uint64, now time.Time) {
	e.SupersededBy = newer
	m.setResource(e, Route, "", "superseded")
	reason := fmt.Sprintf("branch route taken by generation %d", newer)
	e.Audit = append(e.Audit, AuditEntry{Actor: "controller", Action: "superseded", Reason: reason, At: now})
	m.announce(e, EventSuperseded, reason, now)
}

func (m Machine) setResource(e *Env, c Capability, providerID, status string) {
	if c == Migrations || c == Smoke {
		c = map[Capability]Capability{Migrations: Database, Smoke: App}[c]
		if status == "removed" {
			return // the ledger goes with its database
		}
	}
	for i := range e.Resources {
		if e.Resources[i].Capability == c {
			e.Resources[i].Status = status
			e.Resources[i].Owner = e.ID
			if providerID != "" {
				e.Resources[i].ProviderID = providerID
			}
		}
	}
}

// stepDone records the receipt, then starts the next step or completes the
// transition.
func (m Machine) stepDone(e *Env, detail, providerID string, now time.Time) decision {
	a := e.Attempt
	t, _ := m.transitionFrom(a.From)
	op := t.steps[a.Step].op
	verifiedBy := op
	if a.Verifying {
		verifiedBy = Observe
	}
	e.Receipts = append(e.Receipts, Receipt{Transition: string(t.from) + " -> " + string(t.to), AttemptID: a.ID,
		Capability: a.Capability, Op: op, Identity: a.Identity, ProviderID: providerID, Detail: detail, At: now,
		VerifiedBy: verifiedBy, Input: a.Input, Output: a.Output})
	e.LastFailure, e.Failures, e.RetryAt = nil, 0, time.Time{}
	if a.Step+1 < len(t.steps) {
		out := m.begin(e, t, a.Step+1, a.Lease.Owner, 0, now)
		out.Note = detail + "; " + out.Note
		return out
	}
	e.State = t.to
	e.Attempt = nil
	out := decision{Note: fmt.Sprintf("%s; %s -> %s committed", detail, t.from, t.to), through: []Phase{t.to}}
	if t.to == Ready {
		e.ActiveAt = later(now, e.ActiveAt) // becoming ready is being in use
		m.announce(e, EventReady, "ready", now)
	}
	return out
}

// announce puts a notification in the outbox, committed with the state
// change it announces; Step sends every record a step added. The
// key of a ready notification is the environment and generation (as it
// always was); the others add their event.
func (m Machine) announce(e *Env, event, detail string, now time.Time) {
	key := fmt.Sprintf("%s-%d", e.ID, e.Generation)
	if event != EventReady {
		key += "-" + strings.TrimPrefix(event, "environment-")
	}
	if slices.ContainsFunc(e.Outbox, func(x Notification) bool { return x.Key == key }) {
		return
	}
	n := Notification{Key: key, Event: event, EnvID: e.ID, Branch: e.Branch, Revision: e.Revision, Generation: e.Generation,
		Detail: detail, CreatedAt: now}
	if event != EventRemoved {
		n.URL = m.URLOf(*e)
	}
	e.Outbox = append(e.Outbox, n)
}

// clipNote bounds a driver's message kept in the record.
func clipNote(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// sends are the Send effects for the outbox records a step added.
func sends(before, after []Notification) []Effect {
	var out []Effect
	for _, n := range after {
		if !slices.ContainsFunc(before, func(x Notification) bool { return x.Key == n.Key }) {
			out = append(out, Send{Notification: n})
		}
	}
	return out
}

// fail records a structured failure; the environment stays in its last
// verified state with the failed attempt attached (E9).
func (m Machine) fail(e *Env, c Category, msg string, now time.Time) decision {
	a := e.Attempt
	f := &Failure{Transition: string(a.From) + " -> " + string(a.To), AttemptID: a.ID, Category: c, Message: msg, At: now}
	for _, r := range e.Resources {
		if r.Status == "present" {
			f.Resources = append(f.Resources, r.Identity)
		}
	}
	switch c {
	case Transient:
		e.Failures++
		if e.Failures > m.Config.MaxRetries {
			f.Retryable, f.Needs = false, "review"
			f.Message = fmt.Sprintf("%s (after %d retries; nothing retries forever)", msg, m.Config.MaxRetries)
		} else {
			f.Retryable, f.Needs = true, "backoff"
			e.RetryAt = now.Add(m.Config.RetryBackoff << (e.Failures - 1))
		}
	case Configuration:
		f.Needs = "new-input"
	case Permission:
		f.Needs = "policy-repair"
	default:
		f.Needs = "review"
	}
	e.LastFailure = f
	e.Attempt = nil
	return decision{Note: fmt.Sprintf("%s failure (%s): %s (E9)", c, f.Needs, msg)}
}
