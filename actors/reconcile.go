package actors

import (
	"context"

	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/environment"
)

// The reconciler (E14): environments at rest are observed for drift, and
// those with nothing in flight are nudged.

// reconcile observes an environment at rest, or a tombstone's leftovers
// (E14, I12): observation first, never a blind restart; each answer comes
// back as an AtRest event the machine judges (E15). One that is not at
// rest, with nothing in flight, is asked for its next step.
func (a *envActor) reconcile() {
	e := a.env()
	if !a.exists || e.Attempt != nil {
		return
	}
	if e.Tombstone == nil && (e.State != environment.Ready || e.Desired != "ready") {
		// Not at rest and nothing in flight: ask the machine whether a
		// transition is eligible, never restart work blindly (E14).
		a.next()
		return
	}
	sys, id := a.sys, a.id
	for _, c := range []environment.Capability{environment.Route, environment.App, environment.Database, environment.Migrations} {
		drv := sys.cfg.Env.Drivers[c]
		if drv == nil {
			continue
		}
		req := driver.CapabilityRequest{Capability: string(c), Op: "observe", EnvID: id, Identity: e.Identity(c),
			Generation: e.Generation, Branch: e.Branch, Revision: e.Revision}
		sys.goEffect(func(ctx context.Context) {
			out, err := drv.Do(ctx, req)
			if err != nil || out.Observation == nil {
				return // unknown is not drift; the next round looks again
			}
			o := out.Observation
			sys.route(kindEnv, id, envEvent{ev: environment.AtRest{Capability: c, Observation: environment.Observation{
				Exists: o.Exists, Owner: o.Owner, Matches: o.Matches, ProviderID: o.ProviderID, RouteTarget: o.RouteTarget, Detail: redactString(o.Detail, sys.cfg.Secrets...)}}})
		})
	}
}

// armReconcileSweep schedules the reconciler: every ReconcileEvery, each
// stored environment with no attempt in flight is asked to look at itself.
func (s *System) armReconcileSweep() {
	every := s.cfg.Env.ReconcileEvery
	if every < 0 || s.stopping.Load() {
		return
	}
	stop := s.cfg.Clock.AfterFunc(every, func() {
		// Counted as work in flight before the stopping check, so Stop
		// either waits for this sweep or this sweep sees it stopping and
		// never touches a store about to close.
		s.effects.Add(1)
		defer s.effects.Add(-1)
		if s.stopping.Load() {
			return
		}
		// Each actor decides from its own record; an attempt in flight is
		// its lease's business (E7). Environment actors stay live anyway
		// (the idle sweep passivates marquees only).
		ids, err := s.cfg.Store.ListEnvIDs()
		if err != nil {
			s.warnStore("reconciler: list environments", err)
		}
		for _, id := range ids {
			s.route(kindEnv, id, envReconcile{})
		}
		s.armReconcileSweep()
	})
	s.timers.mu.Lock()
	s.timers.reconcileStop = stop
	s.timers.mu.Unlock()
}
