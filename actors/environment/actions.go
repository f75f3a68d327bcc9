package environment

// Operator actions: what may be done by hand now, and doing it.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/errs"
)

// Actions lists the manual actions available now (E16, E17).
func (m Machine) Actions(e Env) []string {
	var out []string
	if e.LastFailure != nil && e.Tombstone == nil {
		out = append(out, "resume")
	}
	if i := m.openDrift(&e); i >= 0 {
		if e.Tombstone == nil {
			out = append(out, "repair", "adopt")
		}
		out = append(out, "continue-removal")
		if e.Drift[i].Capability == Route && e.Tombstone == nil {
			out = append(out, "rollback-route")
		}
	} else if e.LastFailure != nil && e.Data == Preserve && e.State == AppStopped && !e.DataRemovalOK {
		out = append(out, "continue-removal")
	}
	if e.Tombstone == nil && e.Desired != "removed" {
		out = append(out, "abandon")
	}
	switch {
	case e.Tombstone != nil:
	case e.Asleep():
		out = append(out, "wake")
	case m.Config.Sleeps && e.State == Ready && e.Desired == "ready" && e.Attempt == nil:
		out = append(out, "sleep")
	}
	return out
}

func (m Machine) action(e *Env, a Action, now time.Time) decision {
	if !slices.Contains(ActionNames, a.Name) {
		return decision{Err: fmt.Errorf("%w: %q is not an action (actions: %s)", errs.Invalid, a.Name, strings.Join(ActionNames, ", "))}
	}
	if a.Actor == "" || a.Reason == "" {
		return decision{Err: fmt.Errorf("%w: a manual action records who and why: give its reason (E16)", errs.Invalid)}
	}
	if !slices.Contains(m.Actions(*e), a.Name) {
		return decision{Err: fmt.Errorf("%w: %s is not available now (available: %v)", errs.Conflict, a.Name, m.Actions(*e))}
	}
	e.Audit = append(e.Audit, AuditEntry{Actor: a.Actor, Action: a.Name, Reason: a.Reason, At: now})
	i := m.openDrift(e)
	switch a.Name {
	case "resume":
		// Reconciliation from the last verified state, never the recipe.
		e.LastFailure, e.Failures, e.RetryAt = nil, 0, time.Time{}
		return decision{Note: "resumed from " + string(e.State) + " (E16)"}
	case "repair", "rollback-route":
		e.Drift[i].Outcome = a.Name
		e.State = map[Capability]Phase{Route: AppReady, App: DataReady, Database: ArtifactReady, Migrations: ArtifactReady, Artifact: Requested}[e.Drift[i].Capability]
		return decision{Note: fmt.Sprintf("%s toward generation %d: back to %s (E15)", a.Name, e.Generation, e.State)}
	case "adopt":
		d := &e.Drift[i]
		d.Outcome = "adopt"
		e.Receipts = append(e.Receipts, Receipt{Transition: "adopt", AttemptID: "manual", Capability: d.Capability, Op: Observe,
			Identity: d.Identity, Detail: "adopted observed state: " + d.Observed, At: now})
		return decision{Note: "observed state adopted through a recorded transition (E15)"}
	case "continue-removal":
		if i >= 0 {
			e.Drift[i].Outcome = "continue-removal"
			if e.Tombstone != nil {
				// Remove the leaked resource with the removal machinery.
				e.Tombstone = nil
				e.State, e.Desired = RemovalRequested, "removed"
				return decision{Note: "removal continues for a resource that outlived the tombstone (E15)"}
			}
			return m.remove(e, "operator: "+a.Reason, now)
		}
		e.DataRemovalOK = true
		e.LastFailure = nil
		return decision{Note: "operator decided the preserved data may be removed (E12)"}
	case "abandon":
		return m.remove(e, "abandoned by "+a.Actor+": "+a.Reason, now)
	case "sleep":
		return m.sleep(e, "asked by "+a.Actor+": "+a.Reason, now)
	case "wake":
		return m.wake(e, "asked by "+a.Actor+": "+a.Reason, now)
	}
	return decision{Err: fmt.Errorf("%w: unknown action %s", errs.Invalid, a.Name)}
}

// ActionNames are the manual actions an operator may take; which of
// them an environment offers now is Actions.
var ActionNames = []string{"resume", "repair", "adopt", "continue-removal", "abandon", "rollback-route", "sleep", "wake"}

func (m Machine) delivered(e *Env, d Delivered) decision {
	for i := range e.Outbox {
		if e.Outbox[i].Key == d.Key {
			if e.Outbox[i].Delivered {
				// A report repeated after a crash: the news is out already.
				return decision{Note: "notification " + d.Key + " already delivered"}
			}
			e.Outbox[i].Attempts++
			if d.OK {
				e.Outbox[i].Delivered = true
				e.Outbox[i].LastError = ""
				return decision{Note: "notification " + d.Key + " delivered"}
			}
			e.Outbox[i].LastError = clipNote(d.Error)
			// A failed delivery never changes readiness.
			return decision{Note: "notification " + d.Key + " not delivered; the sender retries"}
		}
	}
	return decision{Note: "unknown notification"}
}
