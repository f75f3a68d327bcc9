package sim

import (
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/persistence"
)

// Planted bugs: each disables one guard, to prove the simulator sees it.
// They live here, as wrappers around the pure steps (and one store
// option), never inside the rules: production code has no branch for them.
const (
	PlantGenerationCheck     = "generation-check"      // M10 off: a superseded run's deployed is trusted
	PlantSecondNull          = "second-null"           // M16 off: one null tears a live host down
	PlantVeto                = "veto"                  // M18 off: live chats do not preserve a host
	PlantNoLimitCheck        = "admission-check"       // A3 off: a slot is reserved without the check
	PlantAnswerBeforePersist = "persist-before-answer" // A10/I5 off: answered before the write is durable
	PlantLeaseFencing        = "lease-fencing"         // E7 off: a stale lease generation commits
	PlantRouteCAS            = "route-cas"             // E8 off: activation over a newer route generation
)

// Planted names each planted bug and the invariant expected to catch it.
var Planted = []struct {
	Name      string
	Invariant string
}{
	{PlantGenerationCheck, "I1"},
	{PlantSecondNull, "I4"},
	{PlantVeto, "I3"},
	{PlantNoLimitCheck, "I7"},
	{PlantAnswerBeforePersist, "I5"},
	{PlantLeaseFencing, "I13"},
	{PlantRouteCAS, "I14"},
}

// plantedSteps wraps the pure steps to disable the planted guard.
func plantedSteps(plant string) actors.StepWrappers {
	switch plant {
	case PlantGenerationCheck, PlantSecondNull, PlantVeto:
		return actors.StepWrappers{Marquee: func(step actors.MarqueeStep) actors.MarqueeStep { return plantMarquee(plant, step) }}
	case PlantNoLimitCheck:
		return actors.StepWrappers{Pool: plantNoLimitCheck}
	case PlantLeaseFencing, PlantRouteCAS:
		return actors.StepWrappers{Env: func(step actors.EnvStep) actors.EnvStep { return plantEnv(plant, step) }}
	}
	return actors.StepWrappers{}
}

// plantedStore is the store's options under the planted bug: without
// fsync, "applied" is answered before the write is durable, and a crash
// loses it.
func plantedStore(plant string, o persistence.Options) persistence.Options {
	o.NoSync = plant == PlantAnswerBeforePersist
	return o
}

func plantMarquee(plant string, step actors.MarqueeStep) actors.MarqueeStep {
	return func(s marquee.State, ev marquee.Event, now time.Time) (marquee.State, marquee.Ready) {
		switch e := ev.(type) {
		case marquee.Callback:
			if plant == PlantGenerationCheck && e.Generation > 0 {
				// Whatever generation it names, it is taken for the current one.
				e.Generation = s.Generation
				return step(s, e, now)
			}
			if plant == PlantSecondNull && e.Verb == marquee.VerbNull && s.Lifecycle == marquee.Provisioned && !s.NullPending(now) {
				// The first null is taken as its own confirmation: the
				// pending-confirmation step happens and is forgotten.
				first, _ := step(s, e, now)
				return step(first, e, now)
			}
		case marquee.ChatsAnswered:
			if plant == PlantVeto && e.Err == "" {
				e.Live, e.Reachable = 0, 0 // live chats are not counted
				return step(s, e, now)
			}
		}
		return step(s, ev, now)
	}
}

// plantNoLimitCheck reserves a newcomer whatever the limit and the queue.
func plantNoLimitCheck(step actors.PoolStep) actors.PoolStep {
	return func(p admission.Pool, ev admission.Event, now time.Time) (admission.Pool, admission.Ready) {
		a, ok := ev.(admission.Ask)
		if !ok || p.Lookup(a.Job).Status != admission.None {
			return step(p, ev, now)
		}
		limit, queued := p.Limit, p.Queued
		p.Limit, p.Queued = len(p.Reserved)+1, nil
		next, rd := step(p, ev, now)
		next.Limit, next.Queued = limit, append(append([]admission.Job(nil), queued...), next.Queued...)
		return next, rd
	}
}

func plantEnv(plant string, step actors.EnvStep) actors.EnvStep {
	return func(e environment.Env, ev environment.Event, now time.Time) (environment.Env, environment.Outcome) {
		switch x := ev.(type) {
		case environment.Result:
			a := e.Attempt
			if plant == PlantLeaseFencing && a != nil && a.ID == x.AttemptID {
				x.LeaseGeneration = a.Lease.Generation // any lease generation passes
				return step(e, x, now)
			}
			if plant == PlantRouteCAS && a != nil && a.Capability == environment.Route && x.Observation != nil && x.Observation.RouteTarget > e.Generation {
				// "Expect what is there": the route at a newer generation is
				// treated as the predecessor and activated over.
				target := x.Observation.RouteTarget
				o := *x.Observation
				o.RouteTarget = e.Generation - 1
				x.Observation = &o
				next, out := step(e, x, now)
				for i, eff := range out.Effects {
					if d, ok := eff.(environment.Do); ok && d.Capability == environment.Route {
						d.ExpectedRoute = target
						out.Effects[i] = d
					}
				}
				return next, out
			}
		case environment.Advance:
			if plant == PlantRouteCAS {
				x.BranchNewest = 0 // a newer sibling does not supersede
				return step(e, x, now)
			}
		}
		return step(e, ev, now)
	}
}

// FindPlanted runs seeds from 1 until one catches the planted bug, and
// returns that seed's result; limit bounds the search.
func FindPlanted(name string, limit uint64) (Result, uint64) {
	for seed := uint64(1); seed <= limit; seed++ {
		r := Check(Options{Seed: seed, Plant: name})
		if r.Violation != nil {
			return r, seed
		}
	}
	return Result{}, 0
}
