package marquee

import (
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Input is one input that would move a marquee, as its explanation lists
// it (O17).
type Input = entity.Input

// candidate is an input explain asks the machine about, and the time it
// would be stepped at (zero: now).
type candidate struct {
	ev Event
	at time.Time
}

// Awaiting lists the inputs that would move s now: every input a marquee
// can be sent is stepped on a copy (Step is pure), at now or, for a timer,
// at its deadline, and kept where the machine takes it (no refusal) and it
// changes the marquee or starts an effect. Derived from Step, not written
// beside it: what explain says a marquee waits for is what Step would do.
func (m Machine) Awaiting(s State, now time.Time) []Input {
	var out []Input
	for _, c := range m.candidates(s) {
		at := now
		if !c.at.IsZero() {
			at = c.at
		}
		if effect, moves := m.Moves(s, c.ev, at); moves {
			out = append(out, Input{Event: InputName(c.ev), At: c.at, Effect: effect})
		}
	}
	return out
}

// Moves steps ev on a copy of s at at and says whether it would move the
// marquee (taken, not ignored, stale, a duplicate or locked, and changing
// it or starting an effect), and what it would do in words.
func (m Machine) Moves(s State, ev Event, at time.Time) (string, bool) {
	next, out := m.Step(s.Clone(), ev, at)
	if out.Err != nil || !out.Changed && len(out.Effects) == 0 {
		return "", false
	}
	switch out.Answer {
	case Ignored, Stale, Duplicate, Locked:
		return "", false
	}
	if n := len(out.Records); n > 0 && out.Records[n-1].Detail != "" {
		return out.Records[n-1].Detail, true
	}
	return m.Status(next, at).Text, true
}

// candidates are every input a marquee can be sent: the workflow's
// callbacks at its current generation, the operator's commands, its
// drivers' answers, and its timers at their deadlines.
func (m Machine) candidates(s State) []candidate {
	g := s.Generation
	conn := &Connection{Host: "host.example", Port: 22, User: "root", SSHPrivateKey: "key"}
	if s.Connection != nil {
		c := *s.Connection
		conn = &c
	}
	step := min(s.Progress+1, AppDeploying)
	cs := []candidate{
		{ev: Callback{Verb: VerbStep, Generation: g, Step: step}},
		{ev: Callback{Verb: VerbDeployed, Generation: g, Connection: conn}},
		{ev: Callback{Verb: VerbDestroyed, Generation: g}},
		{ev: Callback{Verb: VerbFailed, Generation: g, Reason: "the workflow reported failure"}},
		{ev: Callback{Verb: VerbNull, Generation: g}},
		{ev: Callback{Verb: VerbRebooted, Generation: g}},
		{ev: Redeploy{By: "operator"}},
		{ev: Destroy{By: "operator"}},
		{ev: Destroy{By: "operator", Reap: true}},
		{ev: Disable{By: "operator"}},
		{ev: Enable{By: "operator"}},
		{ev: RunNow{By: "operator"}},
		{ev: AdmissionDecided{Status: AdmissionReserved, Sequence: admissionSequence(s)}},
		{ev: AdmissionDecided{Status: AdmissionQueued, Sequence: admissionSequence(s)}},
		{ev: DispatchFinished{Generation: g, Outcome: DispatchOK}},
		{ev: BootstrapFinished{Generation: g, OK: true}},
		{ev: ChatsAnswered{Generation: g}},
	}
	for _, d := range m.Deadlines(s) {
		cs = append(cs, candidate{ev: d.Event, at: d.At})
	}
	return cs
}

// InputName names an input as explain lists it: "callback VERB",
// "operator COMMAND", "admission STATUS" (the pool's answer), "driver
// WHAT" or "timer NAME".
func InputName(ev Event) string {
	switch e := ev.(type) {
	case Callback:
		return "callback " + string(e.Verb)
	case Redeploy:
		return "operator redeploy"
	case Destroy:
		if e.Reap {
			return "operator destroy --reap"
		}
		return "operator destroy"
	case Disable:
		return "operator disable"
	case Enable:
		return "operator enable"
	case RunNow:
		return "operator run-now"
	case AdmissionDecided:
		return "admission " + string(e.Status)
	case DispatchFinished:
		return "driver dispatch answered"
	case BootstrapFinished:
		return "driver bootstrap finished"
	case ChatsAnswered:
		return "driver control plane answered"
	}
	return "timer " + timerName(ev)
}

func admissionSequence(s State) uint64 {
	if s.Admission != nil {
		return s.Admission.Sequence
	}
	return 0
}

// timerName names a timer's event as its history entry does.
func timerName(ev Event) string {
	switch ev.(type) {
	case RetryDue:
		return "retry"
	case ProvisioningTimedOut:
		return "timeout"
	case BootstrapRetryDue:
		return "bootstrap_retry"
	case NullExpired:
		return "null_expired"
	case ChatsRecheckDue:
		return "chats_recheck"
	}
	return "timer"
}
