package environment

// Removal: forward only, through every identity, to a tombstone.

import (
	"time"
)

// remove starts the forward removal: the route detaches first; a
// worker still holding a provisioning attempt is fenced off by a new lease
// generation, so it can never commit (I13).
func (m Machine) remove(e *Env, reason string, now time.Time) decision {
	if e.Desired == "removed" {
		return decision{Note: "already being removed"}
	}
	e.Desired, e.RemovalReason = "removed", reason
	// A removal is itself one of the three outcomes: drift still
	// waiting for an operator is answered "continue removal", never left
	// to rewind a preview that is going away.
	for i := range e.Drift {
		if e.Drift[i].Outcome == "" {
			e.Drift[i].Outcome = "continue-removal"
		}
	}
	if e.State.Provisioning() {
		e.State = RemovalRequested
		if e.Attempt != nil {
			e.Attempt = nil
			e.LeaseGeneration++
		}
		e.LastFailure, e.Failures, e.RetryAt = nil, 0, time.Time{}
	}
	return decision{Note: "removal requested: " + reason + " (E11)"}
}

// atRestTombstone: a resource outliving its tombstone is detected (I12).
func (m Machine) atRestTombstone(e *Env, r AtRest, now time.Time) decision {
	if !r.Observation.Exists || (r.Observation.Owner != "" && r.Observation.Owner != e.ID) {
		return decision{Note: "nothing of ours left"}
	}
	if i := m.openDrift(e); i >= 0 && e.Drift[i].Identity == e.Identity(r.Capability) {
		return decision{Note: "leak already recorded (I12)"}
	}
	e.Drift = append(e.Drift, Drift{Capability: r.Capability, Identity: e.Identity(r.Capability), Desired: "absent",
		Observed: "present after the tombstone", DetectedAt: now})
	return decision{Note: string(r.Capability) + " outlives the tombstone; recorded (E15, I12)"}
}
