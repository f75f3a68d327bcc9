package environment

// Sleep and wake: a ready preview nobody has asked for in a while gives
// its host to warden's waker and stops its application, keeping its data
// and artifact; the first request to the host wakes it, and it provisions
// again from data-ready, as a new one does.

import (
	"fmt"
	"strings"
	"time"
)

// The bounds of a preview's sleep_after: a second (tests, demos) to the
// longest a preview is kept anyway.
const (
	MinSleepAfter = time.Second
	MaxSleepAfter = 90 * 24 * time.Hour
)

// IsVisit reports whether a request is someone's visit to a preview, the
// kind that wakes a sleeping one and keeps a ready one awake: not a HEAD
// or OPTIONS, and not a health check (warden's own smoke checks are on
// /healthz) (E20).
func IsVisit(method, path string) bool {
	switch method {
	case "HEAD", "OPTIONS", "":
		return false
	}
	switch path {
	case "/healthz", "/health", "/livez", "/readyz":
		return false
	}
	return true
}

// SleepAfterDefault, as a Create's SleepAfter, asks for the server's
// default (the shell resolves it before the machine sees the create).
const SleepAfterDefault time.Duration = -1

// Desired states besides ready and removed.
const desiredAsleep = "asleep"

// Asleep reports whether the preview is desired asleep: its sleep decided
// and no request having woken it since.
func (e Env) Asleep() bool { return e.Desired == desiredAsleep }

// waking reports whether e is in a sleep state but desired ready: its next
// transition is the application's start, from data-ready.
func (e Env) waking() bool {
	return e.Desired == "ready" && (e.State == RouteAtWaker || e.State == Sleeping)
}

// nextFrom is the transition e takes next on its own: the table's from its
// state, except that a ready preview goes to sleep only once desired
// asleep, and a waking one starts its application again (E20).
func (m Machine) nextFrom(e *Env) (transition, bool) {
	switch {
	case e.waking():
		return m.transitionFrom(DataReady)
	case (e.State == Ready || e.State == RouteAtWaker) && !e.Asleep():
		return transition{}, false
	}
	return m.transitionFrom(e.State)
}

// sleepDue is when a ready preview's sleep falls due, if it may sleep
// (zero: never): SleepAfter after it was last known in use.
func (e Env) sleepDue() time.Time {
	if e.SleepAfter <= 0 || e.State != Ready || e.Desired != "ready" || e.Attempt != nil {
		return time.Time{}
	}
	return e.ActiveAt.Add(e.SleepAfter)
}

// SleepDue reports whether the proxy's word on e's traffic is wanted
// now: its sleep is due, unless a request is found since.
func (e Env) SleepDue(now time.Time) bool {
	due := e.sleepDue()
	return !due.IsZero() && !now.Before(due)
}

// traffic judges the proxy's word on a ready preview's host: a request
// since it was last known in use moves that on; none for SleepAfter puts
// it to sleep (E19). Before the sleep is due the word changes nothing, so
// a preview in use is written once per SleepAfter at most.
func (m Machine) traffic(e *Env, t Traffic, now time.Time) decision {
	if !e.SleepDue(now) {
		return decision{Note: "no sleep due"}
	}
	// A superseded preview's host is its newer sibling's: the visits
	// the proxy saw there were not to it, and it sleeps once SleepAfter
	// has passed since it was last in use itself.
	if e.SupersededBy == 0 && t.LastRequest.After(e.ActiveAt) {
		e.ActiveAt = t.LastRequest
		if !e.SleepDue(now) {
			return decision{Note: fmt.Sprintf("in use: last request at %s; sleeps at %s unless asked again", t.LastRequest.UTC().Format(time.RFC3339),
				e.sleepDue().UTC().Format(time.RFC3339))}
		}
	}
	if why, ok := m.eligible(e, now); !ok {
		return decision{Note: "sleep due but held: " + why}
	}
	reason := fmt.Sprintf("no request for %s", e.SleepAfter)
	e.Audit = append(e.Audit, AuditEntry{Actor: "controller", Action: "sleep", Reason: reason, At: now})
	return m.sleep(e, reason, now)
}

// sleep decides the preview sleeps; the route's switch to the waker is
// the next transition's (proceed begins it in the same step). The caller
// audits who asked.
func (m Machine) sleep(e *Env, reason string, now time.Time) decision {
	e.Desired, e.AsleepSince = desiredAsleep, now
	return decision{Note: "sleep decided: " + reason + " (E19)"}
}

// visited wakes a preview desired asleep: a request reached its host
// through the waker (E20). Asked again while it wakes, it changes
// nothing: many requests make one wake.
func (m Machine) visited(e *Env, v Visited, now time.Time) decision {
	if !e.Asleep() {
		return decision{Note: "not asleep; a request needs no wake"}
	}
	e.Audit = append(e.Audit, AuditEntry{Actor: "waker", Action: "wake", Reason: "a request to its host", At: now})
	return m.wake(e, "a request to its host", v.At)
}

// wake makes the preview desired ready again; its next transition (now,
// or after the sleep's attempt in flight ends) starts its application.
// The caller audits who asked.
func (m Machine) wake(e *Env, reason string, at time.Time) decision {
	e.Desired, e.AsleepSince = "ready", time.Time{}
	e.ActiveAt = later(at, e.ActiveAt)
	return decision{Note: "wake requested: " + reason + " (E20)"}
}

// verifySlept judges a sleep step's observation: the route sending the
// host to the waker at this preview's generation, or the application
// stopped (or gone: nothing runs either way, and a wake makes it anew).
func (m Machine) verifySlept(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	undone := a.Capability == Route && o.Exists && o.RouteTarget == e.Generation && !o.AtWaker ||
		a.Capability == App && o.Exists && !o.Stopped
	if undone && a.Unknown && !a.Reapplied {
		// As applyAgain: an outcome unknown, observed not to have
		// happened, did not happen; asked again once, at once.
		a.Unknown, a.Reapplied, a.Verifying = false, true, false
		return decision{Note: fmt.Sprintf("%s: the sleep whose outcome was unknown did not happen; asked again now (E8, E19)", a.Identity),
			Effects: []Effect{m.do(e, Sleep)}}
	}
	switch a.Capability {
	case Route:
		switch {
		case o.Exists && o.RouteTarget > e.Generation:
			m.supersede(e, o.RouteTarget, now)
			return m.stepDone(e, fmt.Sprintf("route is at newer generation %d; this preview is superseded (E8, I14)", o.RouteTarget), "", now)
		case o.Exists && o.RouteTarget == e.Generation && o.Owner == e.ID && o.AtWaker:
			return m.stepDone(e, fmt.Sprintf("route generation %d sends its host to the waker (E19)", e.Generation), o.ProviderID, now)
		}
		return m.fail(e, Transient, fmt.Sprintf("%s does not send its host to the waker: %s", a.Identity, o.Detail), now)
	case App:
		if o.Exists && !o.Stopped {
			return m.fail(e, Transient, fmt.Sprintf("%s still runs after its stop: %s", a.Identity, o.Detail), now)
		}
		status := "stopped"
		if !o.Exists {
			status = "absent"
		}
		m.setResource(e, App, o.ProviderID, status)
		return m.stepDone(e, fmt.Sprintf("%s %s (E19)", a.Identity, status), o.ProviderID, now)
	}
	return m.fail(e, Configuration, fmt.Sprintf("%s has no sleep", a.Capability), now)
}

// atRestAsleep judges the reconciler's observation of a sleeping
// preview: the route at the waker, the application stopped, the data
// there. Drift is handled as for a ready one: what is missing is made
// again (a route, by switching it to the waker again; an application, by
// the next wake), anything else waits for an operator.
func (m Machine) atRestAsleep(e *Env, r AtRest, now time.Time) decision {
	o := r.Observation
	switch r.Capability {
	case Route:
		switch {
		case e.SupersededBy > 0:
			return decision{Note: "superseded; the route is not ours (I14)"}
		case o.Exists && o.RouteTarget == e.Generation && o.Owner == e.ID && o.AtWaker:
			return decision{Note: "route at the waker, as desired"}
		case o.Exists && o.RouteTarget > e.Generation:
			m.supersede(e, o.RouteTarget, now)
			return decision{Note: fmt.Sprintf("a newer preview of the branch holds the route (generation %d): superseded (E15, I14)", o.RouteTarget)}
		case !o.Exists:
			// Nothing routes its host: no visit could wake it. It is
			// repaired through full readiness, as a ready preview's
			// missing route is, and sleeps again after SleepAfter.
			return m.repairAsleep(e, Route, strings.TrimSuffix("route absent while asleep: "+o.Detail, ": "), now)
		}
		return m.recordDrift(e, Route, "generation "+fmt.Sprint(e.Generation)+" at the waker",
			fmt.Sprintf("generation %d -> %q at waker=%t", o.RouteTarget, o.Owner, o.AtWaker), asleepDrift, now)
	case App:
		switch {
		case !o.Exists:
			if e.resource(App).Status != "absent" {
				m.setResource(e, App, "", "absent")
				return decision{Note: "application gone while asleep; the next wake makes it again (E21)"}
			}
			return decision{Note: "application absent while asleep; the next wake makes it"}
		case o.Stopped:
			return decision{Note: "application stopped, as desired"}
		}
		return m.repairAsleep(e, App, strings.TrimSuffix("application runs while asleep: "+o.Detail, ": "), now)
	case Smoke:
		return decision{Note: "a sleeping preview's host is the waker's; not asked"}
	}
	return m.atRestKept(e, r, now)
}

// asleepDrift is the note of a drift recorded while asleep.
const asleepDrift = "drifted while asleep; recorded for an operator (E15)"

// repairAsleep undoes a drift found while asleep, unless an operator's
// question is open: an application running again is stopped again (from
// route-at-waker, which says just that); a route gone is repaired
// through full readiness, the preview woken (E15, E21).
func (m Machine) repairAsleep(e *Env, c Capability, observed string, now time.Time) decision {
	d := Drift{Capability: c, Identity: e.Identity(c), DetectedAt: now, Desired: "asleep", Observed: observed}
	if m.driftOpenFor(e, d.Identity) || m.openDrift(e) >= 0 {
		return m.recordDrift(e, c, d.Desired, observed, asleepDrift, now)
	}
	d.Outcome = "auto-repair"
	e.Drift = append(e.Drift, d)
	if c == App {
		e.State = RouteAtWaker
		return decision{Note: fmt.Sprintf("%s: %s; stopped again (E21)", c, observed)}
	}
	e.Audit = append(e.Audit, AuditEntry{Actor: "controller", Action: "wake", Reason: "its route was gone: repaired through full readiness", At: now})
	m.wake(e, "its route was gone", now)
	return decision{Note: fmt.Sprintf("%s: %s; repaired through full readiness, woken (E15, E21)", c, observed)}
}
