package environment

import (
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Status is what the status line, next step and classes are (entity.Status).
type Status = entity.Status

// Next is warden's own next step (entity.Next).
type Next = entity.Next

// Status classes a list can filter by.
const (
	ClassRetrying        = "retrying"
	ClassWaitingOperator = "waiting_operator"
	ClassDriftOpen       = "drift_open"
	ClassFailed          = "failed"
)

// Status describes e at now.
func (m Machine) Status(e Env, now time.Time) Status {
	var st Status
	if e.Tombstone != nil {
		st.Text = fmt.Sprintf("removed at %s: %s; tombstone kept for leak audits (E12)", entity.Clock(e.Tombstone.RemovedAt, now), e.Tombstone.Reason)
		if i := m.openDrift(&e); i >= 0 {
			d := e.Drift[i]
			st.Classes = append(st.Classes, ClassDriftOpen, ClassWaitingOperator)
			st.Text += fmt.Sprintf("; leftover %s %s found (E15) - actions: %s", d.Capability, d.Identity, strings.Join(m.Actions(e), ", "))
		}
		return st
	}
	next := func(at time.Time, what string) {
		if !at.IsZero() && (st.Next == nil || at.Before(st.Next.At)) {
			st.Next = &Next{At: at, What: what}
		}
	}
	var b strings.Builder
	f := e.LastFailure
	switch {
	case e.Attempt != nil:
		a := e.Attempt
		fmt.Fprintf(&b, "%s -> %s: %s %s %s", a.From, a.To, a.Op, a.Capability, a.Identity)
		if a.Verifying {
			b.WriteString(", verifying")
		}
		fmt.Fprintf(&b, " (attempt %s, leased to %s until %s) (E5, E7)", a.ID, a.Lease.Owner, entity.Clock(a.Lease.ExpiresAt, now))
		next(a.Lease.ExpiresAt, fmt.Sprintf("lease of attempt %s ends: another worker may take over, observing first (E7)", a.ID))
	case f != nil && !f.Retryable:
		st.Classes = append(st.Classes, ClassFailed, ClassWaitingOperator)
		fmt.Fprintf(&b, "waiting for an operator: %s (%s, needs %s) - actions: %s", f.Message, f.Category, f.Needs, strings.Join(m.Actions(e), ", "))
	case f != nil:
		st.Classes = append(st.Classes, ClassRetrying)
		fmt.Fprintf(&b, "%s failed %d time(s) (%s): %s; retrying at %s (E9)", f.Transition, e.Failures, f.Category, f.Message, entity.Clock(e.RetryAt, now))
		next(e.RetryAt, fmt.Sprintf("retry %s (E9)", f.Transition))
	case e.State == Ready && e.Desired == "ready":
		fmt.Fprintf(&b, "ready; route generation %d of branch %s", e.Generation, e.Branch)
		if e.SupersededBy > 0 {
			fmt.Fprintf(&b, ", superseded by generation %d (E8, I14)", e.SupersededBy)
		}
	case e.Desired == "removed":
		fmt.Fprintf(&b, "removing (%s), at %s (E11)", e.RemovalReason, e.State)
	case e.State == Sleeping && e.Asleep():
		fmt.Fprintf(&b, "sleeping since %s: its host is the waker's; the next request to it wakes the preview (E19, E20)", entity.Clock(e.AsleepSince, now))
	case e.Asleep():
		fmt.Fprintf(&b, "going to sleep since %s, at %s (E19)", entity.Clock(e.AsleepSince, now), e.State)
	case e.waking():
		fmt.Fprintf(&b, "waking, at %s (E20)", e.State)
	default:
		fmt.Fprintf(&b, "%s, on its way to ready", e.State)
	}
	if i := m.openDrift(&e); i >= 0 {
		d := e.Drift[i]
		st.Classes = append(st.Classes, ClassDriftOpen)
		if !strings.Contains(b.String(), "waiting for an operator") {
			st.Classes = append(st.Classes, ClassWaitingOperator)
			fmt.Fprintf(&b, "; drift on %s %s: desired %s, observed %s (E15) - actions: %s", d.Capability, d.Identity, d.Desired, d.Observed,
				strings.Join(m.Actions(e), ", "))
		}
	}
	if due := e.sleepDue(); !due.IsZero() {
		next(due, "asks the proxy for its last request: none since, it sleeps (E19)")
	}
	if e.Desired != "removed" && !e.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "; expires at %s", entity.Clock(e.ExpiresAt, now))
		next(e.ExpiresAt, "TTL ends: removal starts (E14)")
	}
	st.Text = b.String()
	return st
}
