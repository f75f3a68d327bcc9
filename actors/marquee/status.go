package marquee

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
	ClassRetrying            = "retrying"
	ClassWaitingConfirmation = "waiting_confirmation"
	ClassVetoed              = "vetoed"
	ClassFailed              = "failed"
)

// deadlineWhat names a deadline for what it is (O1).
func deadlineWhat(ev Event) string {
	switch ev.(type) {
	case RetryDue:
		return "stuck retry: no callback since the last sign of life (M21)"
	case ProvisioningTimedOut:
		return "provisioning timeout (M22)"
	case BootstrapRetryDue:
		return "bootstrap retry (M19)"
	case NullExpired:
		return "the first null's window ends (M16)"
	case ChatsRecheckDue:
		return "ask the control plane about live chats again (M18)"
	}
	return fmt.Sprintf("%T", ev)
}

// Status describes s at now.
func (m Machine) Status(s State, now time.Time) Status {
	var st Status
	if ds := m.Deadlines(s); len(ds) > 0 {
		st.Next = &Next{At: ds[0].At, What: deadlineWhat(ds[0].Event)}
	}
	if s.Tombstone != nil {
		st.Text = fmt.Sprintf("tombstone: %s at %s (M14)", s.Tombstone.Reason, entity.Clock(s.Tombstone.At, now))
		return st
	}
	if s.Kind != Tutorial {
		st.Text = fmt.Sprintf("byo, serving %s (M4, M8)", s.Serving)
		return st
	}
	st.Classes = classes(s, now)
	var b strings.Builder
	b.WriteString(string(s.Lifecycle))
	switch s.Lifecycle {
	case Provisioning, Destroying:
		m.describeAttempt(&b, s, st.Next, now)
	case Provisioned:
		fmt.Fprintf(&b, " (generation %d), serving %s", s.Generation, s.Serving)
		describeHeld(&b, s, now)
	case Failed:
		if f := s.Failure; f != nil {
			fmt.Fprintf(&b, " (generation %d): %s (%s)", f.Generation, f.Reason, f.Rule)
		} else {
			fmt.Fprintf(&b, " (generation %d)", s.Generation)
		}
		b.WriteString("; redeploy or destroy")
	case Destroyed:
		fmt.Fprintf(&b, " (generation %d)", s.Generation)
	}
	st.Text = b.String()
	return st
}

// classes are the tutorial marquee's status classes at now.
func classes(s State, now time.Time) []string {
	var cs []string
	if s.RetryCount > 0 && !s.Lifecycle.Settled() {
		cs = append(cs, ClassRetrying)
	}
	if s.NullPending(now) {
		cs = append(cs, ClassWaitingConfirmation)
	}
	if s.Downgrade != nil || s.LastVeto != nil {
		cs = append(cs, ClassVetoed)
	}
	if s.Lifecycle == Failed {
		cs = append(cs, ClassFailed)
	}
	return cs
}

// describeAttempt says what a provisioning or destroying marquee waits
// for, and its next deadline.
func (m Machine) describeAttempt(b *strings.Builder, s State, next *Next, now time.Time) {
	a := s.Attempt
	attempt := fmt.Sprintf(", attempt %d of %d (generation %d)", s.RetryCount+1, len(m.Config.RetryBackoff)+1, s.Generation)
	switch {
	case s.Admission != nil && s.Admission.Status != AdmissionReserved:
		fmt.Fprintf(b, " (generation %d): waiting for a slot in pool %s", s.Generation, s.Admission.Pool)
		if s.Admission.Status == AdmissionQueued {
			fmt.Fprintf(b, ", queued at sequence %d (A4)", s.Admission.Sequence)
		} else {
			b.WriteString(", asking (A3)")
		}
	case s.Bootstrap != nil && s.Bootstrap.Running:
		fmt.Fprintf(b, " (generation %d): bootstrapping %s (M19)", s.Generation, hostOf(s))
	case s.Bootstrap != nil:
		fmt.Fprintf(b, " (generation %d): bootstrap failed %d time(s); retry at %s (M19)", s.Generation, s.Bootstrap.Failures, entity.Clock(s.Bootstrap.RetryAt, now))
	case a != nil && a.Dispatch == DispatchPending:
		b.WriteString(attempt + ": dispatching the workflow")
	case a != nil:
		b.WriteString(attempt + ": waiting for the workflow")
		if s.Lifecycle == Provisioning && s.Progress > Queued {
			fmt.Fprintf(b, " (last step %s)", s.Progress)
		}
	}
	if next != nil && (s.Bootstrap == nil || s.Bootstrap.Running) {
		fmt.Fprintf(b, "; %s at %s", shortWhat(next.What), entity.Clock(next.At, now))
	}
}

// describeHeld says why a provisioned marquee's teardown is held, if it is.
func describeHeld(b *strings.Builder, s State, now time.Time) {
	switch d := s.Downgrade; {
	case d != nil && d.Asking:
		fmt.Fprintf(b, "; %s held: asking the control plane for live chats (M18)", d.Verb)
	case d != nil:
		fmt.Fprintf(b, "; %s held: control plane unanswered %d time(s), asking again at %s (M18)", d.Verb, d.Unanswered, entity.Clock(d.RecheckAt, now))
	case s.NullPending(now):
		fmt.Fprintf(b, "; first null received, torn down only if a second null arrives before %s (M16)", entity.Clock(s.NullPendingUntil, now))
	case s.LastVeto != nil:
		fmt.Fprintf(b, "; %s vetoed at %s: %d live chat(s) (M18)", s.LastVeto.Verb, entity.Clock(s.LastVeto.At, now), s.LastVeto.Live)
	}
}

// shortWhat is a deadline's name without its explanation, for the line.
func shortWhat(what string) string {
	i, j := strings.Index(what, ":"), strings.LastIndex(what, " (")
	if i > 0 && j > i {
		return what[:i] + what[j:]
	}
	return what
}

func hostOf(s State) string {
	if s.Connection == nil {
		return "the host"
	}
	return s.Connection.Host
}
