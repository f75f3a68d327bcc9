package environment

// Drift: what an observation at rest found, and how each difference is
// handled.

import (
	"fmt"
	"slices"
	"time"
)

// resolveDrift marks a drift whose outcome was decided resolved once the
// preview is ready again, or gone (O2).
func resolveDrift(e *Env, before Env, now time.Time) {
	if !(e.State == Ready && before.State != Ready) && !(e.Tombstone != nil && before.Tombstone == nil) {
		return
	}
	for i := range e.Drift {
		if e.Drift[i].Outcome != "" && e.Drift[i].ResolvedAt.IsZero() {
			e.Drift[i].ResolvedAt = now
		}
	}
}

func (m Machine) openDrift(e *Env) int {
	for i, d := range e.Drift {
		if d.Outcome == "" {
			return i
		}
	}
	return -1
}

// atRest judges the reconciler's observation of an environment at rest.
// Observation first; it never restarts work blindly. Drift is
// named by what was observed: an application that does not answer
// as itself is the application's drift, whatever the check that saw it;
// a route is drifted only when its content is not what warden wrote.
func (m Machine) atRest(e *Env, r AtRest, now time.Time) decision {
	asleep := e.State == Sleeping && e.Asleep()
	if e.Attempt != nil || !asleep && (e.State != Ready || e.Desired != "ready") {
		return decision{Note: "not at rest; the attempt is reconciled by its worker"}
	}
	if r.Seq != e.AttemptSeq {
		return decision{Note: fmt.Sprintf("%s observed before attempt %d: stale, the next round looks again (P14)", r.Capability, e.AttemptSeq)}
	}
	if asleep {
		return m.atRestAsleep(e, r, now)
	}
	o := r.Observation
	switch r.Capability {
	case Route:
		return m.atRestRoute(e, o, now)
	case App:
		if o.Exists && o.Matches {
			return decision{Note: "application as desired"}
		}
		return m.appDrift(e, fmt.Sprintf("exists=%t matches=%t %s", o.Exists, o.Matches, o.Detail), now)
	case Smoke:
		return m.atRestSmoke(e, o, now)
	}
	return m.atRestKept(e, r, now)
}

// atRestKept judges a resource a preview keeps as it is, awake or asleep
// (its data): present, owned and matching, or drift for an operator.
func (m Machine) atRestKept(e *Env, r AtRest, now time.Time) decision {
	o := r.Observation
	if o.Exists && o.Owner == e.ID && o.Matches {
		return decision{Note: string(r.Capability) + " as desired"}
	}
	return m.recordDrift(e, r.Capability, "present, owned, matching", fmt.Sprintf("exists=%t owner=%q matches=%t", o.Exists, o.Owner, o.Matches),
		"drifted; recorded for an operator: repair, adopt or continue removal (E15)", now)
}

// recordDrift records a difference for an operator, once: note says
// what was done.
func (m Machine) recordDrift(e *Env, c Capability, desired, observed, note string, now time.Time) decision {
	if m.driftOpenFor(e, e.Identity(c)) {
		return decision{Note: e.Identity(c) + ": drift already recorded, waiting for an operator (E15)"}
	}
	e.Drift = append(e.Drift, Drift{Capability: c, Identity: e.Identity(c), DetectedAt: now, Desired: desired, Observed: observed})
	return decision{Note: string(c) + " " + note}
}

// driftOpenFor reports whether a drift of identity waits for an operator.
func (m Machine) driftOpenFor(e *Env, identity string) bool {
	return slices.ContainsFunc(e.Drift, func(d Drift) bool { return d.Outcome == "" && d.Identity == identity })
}

// atRestRoute: as desired means all of it, as warden wrote it: our
// generation, naming this environment, sending to the upstream recorded
// when it was verified (the route's provider id), in the shape the driver
// writes (its Matches). Whether anything answers there is the
// application's business.
func (m Machine) atRestRoute(e *Env, o Observation, now time.Time) decision {
	if e.SupersededBy > 0 {
		return decision{Note: fmt.Sprintf("superseded by route generation %d; the route is not ours (I14)", e.SupersededBy)}
	}
	recorded := e.resource(Route).ProviderID
	written := o.Matches && (recorded == "" || o.ProviderID == "" || o.ProviderID == recorded)
	if o.Exists && o.RouteTarget == e.Generation && o.Owner == e.ID && written {
		return decision{Note: "route as desired"}
	}
	if o.Exists && o.RouteTarget > e.Generation {
		m.supersede(e, o.RouteTarget, now)
		return decision{Note: fmt.Sprintf("a newer preview of the branch holds the route (generation %d): superseded, never pulled back (E15, I14)", o.RouteTarget)}
	}
	observed := fmt.Sprintf("generation %d (exists=%t) -> %q via %q, as written=%t", o.RouteTarget, o.Exists, o.Owner, o.ProviderID, written)
	return m.routeDrift(e, o.Exists, observed, now)
}

// routeDrift records a route not as warden wrote it: one that is missing
// from a ready, unexpired environment is restored automatically;
// one that is there but says something else waits for an operator.
func (m Machine) routeDrift(e *Env, exists bool, observed string, now time.Time) decision {
	d := Drift{Capability: Route, Identity: e.Identity(Route), DetectedAt: now, Observed: observed,
		Desired: fmt.Sprintf("generation %d -> %s, via %q", e.Generation, e.ID, e.resource(Route).ProviderID)}
	if m.driftOpenFor(e, d.Identity) {
		return decision{Note: d.Identity + ": drift already recorded, waiting for an operator (E15)"}
	}
	if !exists && m.openDrift(e) < 0 && (e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt)) {
		d.Outcome = "auto-repair"
		e.Drift = append(e.Drift, d)
		e.State = AppReady // re-run the activation under the same generation
		return decision{Note: "route missing on a ready, unexpired environment: repaired automatically (E15)"}
	}
	e.Drift = append(e.Drift, d)
	if !exists {
		return decision{Note: "route missing, but expired or another drift is open; recorded for an operator (E15)"}
	}
	return decision{Note: "route points elsewhere; recorded for an operator (E15)"}
}

// appDrift: the application does not answer as itself (exited, killed,
// removed, unhealthy, or its dependencies unreachable). It is reprovisioned
// through full readiness, never "marked running", unless
// another drift waits for an operator: the system never silently chooses
// while a question is open.
func (m Machine) appDrift(e *Env, observed string, now time.Time) decision {
	d := Drift{Capability: App, Identity: e.Identity(App), DetectedAt: now, Desired: "running, candidate identity, dependencies reachable", Observed: observed}
	if m.driftOpenFor(e, d.Identity) {
		return decision{Note: d.Identity + ": drift already recorded, waiting for an operator (E15)"}
	}
	if m.openDrift(e) >= 0 {
		e.Drift = append(e.Drift, d)
		return decision{Note: "application not answering as itself; another drift waits for an operator, so this one does too (E15)"}
	}
	d.Outcome = "auto-repair"
	e.Drift = append(e.Drift, d)
	e.State = DataReady
	m.setResource(e, App, "", "absent")
	return decision{Note: "application not answering as itself: reprovisioning through full readiness (E15, P14)"}
}

// atRestSmoke is the end-to-end observation repeated at rest: a
// request under the preview's host name through the route must reach
// this environment's application at this generation and revision, its
// dependencies reachable. The route and the application are observed
// just before it, each judged on its own (P14), so what the host name
// answers is judged knowing that: our route answering with an application
// that does not answer as itself is left to those two observations (the
// application's found it dead, or the route was changed since its own);
// no route of ours answering at all is the route's drift.
func (m Machine) atRestSmoke(e *Env, o Observation, now time.Time) decision {
	switch {
	case e.SupersededBy > 0:
		return decision{Note: fmt.Sprintf("the host name serves route generation %d; this preview is superseded (I14)", e.SupersededBy)}
	case o.Exists && o.Matches && o.RouteTarget == e.Generation && o.Owner == e.ID:
		return decision{Note: "served end to end"}
	case m.openDrift(e) >= 0:
		return decision{Note: "host name not served end to end; the open drift explains it (E15)"}
	case o.RouteTarget > e.Generation:
		m.supersede(e, o.RouteTarget, now)
		return decision{Note: fmt.Sprintf("the host name serves newer generation %d: superseded (E15, I14)", o.RouteTarget)}
	case o.RouteTarget == e.Generation && o.Owner == e.ID:
		return decision{Note: "our route answered and the application behind it did not: the application's and the route's own observations decide (P14): " + clipNote(o.Detail)}
	}
	return m.routeDrift(e, o.RouteTarget != 0 || o.Owner != "", fmt.Sprintf("through the host name: %s", o.Detail), now)
}

// resource is the record's resource of capability c (zero if none).
func (e *Env) resource(c Capability) Resource {
	for _, r := range e.Resources {
		if r.Capability == c {
			return r
		}
	}
	return Resource{}
}
