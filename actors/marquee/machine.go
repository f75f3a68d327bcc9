package marquee

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/internal/jsonappend"
)

// Config holds the durations and limits of the rules. Every one is a
// default the operator can change (docs/rules/marquee.md).
type Config struct {
	// StaleAfter: no accepted callback for this long makes an attempt
	// stuck.
	StaleAfter time.Duration
	// RetryBackoff[k-1] is the wait after the k-th stuck retry; its length
	// is the retry cap (M21: 1, 2, 4, 8, 16, 30 minutes, six retries).
	RetryBackoff []time.Duration
	// ProvisioningTimeout ends an attempt provisioning for longer.
	ProvisioningTimeout time.Duration
	// NullWindow is how long a first null waits for its confirmation.
	NullWindow time.Duration
	// BootstrapRetries is how many times a failed bootstrap is retried
	// before the marquee fails, BootstrapBackoff the first wait
	// (doubling after each failure).
	BootstrapRetries int
	BootstrapBackoff time.Duration
	// ChatsRecheckAfter is when an unanswered control-plane question is
	// asked again.
	ChatsRecheckAfter time.Duration
}

// DefaultConfig is the spec's defaults.
func DefaultConfig() Config {
	return Config{
		StaleAfter:          5 * time.Minute,
		RetryBackoff:        []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute},
		ProvisioningTimeout: 30 * time.Minute,
		NullWindow:          2 * time.Hour,
		BootstrapRetries:    3,
		BootstrapBackoff:    30 * time.Second,
		ChatsRecheckAfter:   time.Minute,
	}
}

// Machine applies the marquee rules under one Config.
type Machine struct{ Config Config }

// Create makes a new marquee. The caller checks that the id is
// free; Create checks the command itself.
func (m Machine) Create(c Create, now time.Time) (State, Outcome) {
	s, out, err := m.create(c, now)
	if err != nil {
		return State{}, Outcome{Err: err}
	}
	out.Wake = m.Wake(s)
	return s, out
}

func (m Machine) create(c Create, now time.Time) (State, Outcome, error) {
	if !ValidID(c.ID) {
		return State{}, Outcome{}, fmt.Errorf("%w: id %q must match [a-z0-9][a-z0-9-]{0,62}", errs.Invalid, c.ID)
	}
	s := State{ID: c.ID, Kind: c.Kind, CreatedAt: now, UpdatedAt: now}
	out := Outcome{Answer: Applied, Changed: true}
	switch c.Kind {
	case BYO: // M4
		if c.Connection == nil {
			return State{}, Outcome{}, fmt.Errorf("%w: connection is required for a byo marquee", errs.Invalid)
		}
		conn := *c.Connection
		s.Connection = &conn
		s.Serving = Active
		out.Records = []Entry{{At: now, Source: SourceOperator, Verb: "create", Result: Applied, Actor: c.By, Detail: "byo marquee stored with its connection (M4)"}}
	case Tutorial: // M5
		if c.Connection != nil {
			return State{}, Outcome{}, fmt.Errorf("%w: connection is reported by the workflow for a tutorial marquee, not given at create", errs.Invalid)
		}
		if c.Pool == "" {
			c.Pool = "default"
		}
		s.Pool = c.Pool
		s.Serving = Disabled
		s.Lifecycle = Provisioning
		s.Progress = Queued
		s.Attempt = &Attempt{Action: ActionApply, Dispatch: DispatchWaiting}
		s.Admission = &Admission{Pool: c.Pool, Status: AdmissionAsking}
		out.Effects = []Effect{AskAdmission{Pool: c.Pool}}
		out.Records = []Entry{{At: now, Source: SourceOperator, Verb: "create", Result: Applied, Actor: c.By, Detail: "tutorial marquee queued; asking pool " + c.Pool + " for a slot (M5)"}}
	default:
		return State{}, Outcome{}, fmt.Errorf("%w: kind %q must be byo or tutorial", errs.Invalid, c.Kind)
	}
	return s, out, nil
}

// Step applies one event. It never mutates s.
func (m Machine) Step(s State, ev Event, now time.Time) (State, Outcome) {
	before := s
	s = s.Clone()
	var out Outcome
	if s.Tombstone != nil {
		out = m.onTombstone(s, ev, now)
	} else {
		switch e := ev.(type) {
		case Callback:
			out = m.callback(&s, e, now)
		case Redeploy:
			out = operatorBy(m.redeploy(&s, now), e.By)
		case Destroy:
			out = operatorBy(m.destroy(&s, e, now), e.By)
		case Disable:
			out = operatorBy(m.disable(&s, now), e.By)
		case Enable:
			out = operatorBy(m.enable(&s, now), e.By)
		case AdmissionDecided:
			out = m.admissionDecided(&s, e, now)
		case DispatchFinished:
			out = m.dispatchFinished(&s, e, now)
		case BootstrapFinished:
			out = m.bootstrapFinished(&s, e, now)
		case BootstrapRetryDue:
			out = m.bootstrapRetryDue(&s, e, now, false)
		case ChatsAnswered:
			out = m.chatsAnswered(&s, e, now)
		case ChatsRecheckDue:
			out = m.chatsRecheckDue(&s, e, now, false)
		case RetryDue:
			out = m.retryDue(&s, e, now, false)
		case RunNow:
			out = operatorBy(m.runNow(&s, now), e.By)
		case ProvisioningTimedOut:
			out = m.provisioningTimedOut(&s, e, now)
		case NullExpired:
			out = m.nullExpired(&s, now)
		case Reconcile:
			out = m.reconcile(&s, e, now)
		default:
			panic(fmt.Sprintf("marquee: unknown event %T", ev)) // programmer error
		}
	}
	if out.Err != nil {
		return before, Outcome{Err: out.Err}
	}
	out.Changed = !before.equal(s)
	if out.Changed {
		s.UpdatedAt = now
	}
	if c, ok := ev.(Callback); ok {
		out.Reply = Reply(s, c, out.Answer, reasonOf(out))
	}
	out.Wake = m.Wake(s)
	return s, out
}

// Reply encodes a callback's answer after the step, as the caller hears it
// and as a repeated delivery hears it again (M20): the body of every
// callback answer (docs/rules/http-api.md), result, marquee_id,
// generation and received_generation, and for every answer but applied
// its reason (O15). It is written by hand, every callback makes one, byte
// for byte as encoding/json would (TestReplyEncodesAsEncodingJSONDoes).
func Reply(s State, c Callback, r Answer, reason string) []byte {
	o := jsonappend.Object{B: make([]byte, 0, 64+len(s.ID)+len(reason))}
	o.Begin()
	o.String("result", string(r))
	o.String("marquee_id", s.ID)
	o.Uint("generation", s.Generation)
	o.Uint("received_generation", c.Generation)
	if r != Applied {
		o.StringOmitEmpty("reason", reason)
	}
	o.End()
	return o.B
}

// reasonOf is why a step answered as it did: its history entry's detail,
// a sentence naming what decided it.
func reasonOf(out Outcome) string {
	if n := len(out.Records); n > 0 {
		return out.Records[n-1].Detail
	}
	return ""
}

// staleReason tells a callback of a superseded run from one whose
// generation no dispatch gave out yet (M10).
func staleReason(received, current uint64) string {
	if received > current {
		return fmt.Sprintf("generation %d is ahead of the marquee's %d: no dispatch gave it out, so it is no run of this marquee's (M10)", received, current)
	}
	return fmt.Sprintf("generation %d is older than the marquee's %d: a superseded run's (M10)", received, current)
}

// Wake is the state's earliest deadline, the time the shell arms: every
// step asks, so it reads the times without making the events.
func (m Machine) Wake(s State) time.Time {
	var earliest time.Time
	first := true
	for _, d := range m.deadlineTimes(s) {
		if d.set && (first || d.At.Before(earliest)) {
			earliest, first = d.At, false
		}
	}
	return earliest
}

// operatorBy records who asked on an operator command's history.
func operatorBy(out Outcome, by string) Outcome {
	for i := range out.Records {
		if out.Records[i].Source == SourceOperator {
			out.Records[i].Actor = by
		}
	}
	return out
}

func (m Machine) onTombstone(s State, ev Event, now time.Time) Outcome {
	switch e := ev.(type) {
	case Callback:
		// docs/rules/http-api.md: a callback for a reaped marquee gets 200 stale.
		return Outcome{Answer: Stale, Records: []Entry{{At: now, Source: SourceCallback, Verb: string(e.Verb), Generation: s.Generation, DeliveryID: e.DeliveryID, Auth: e.Auth,
			ReceivedGeneration: e.Generation, Result: Stale, Detail: "the marquee is a tombstone: it was reaped, and every callback for it is stale"}}}
	case Redeploy, Destroy, Disable, Enable:
		return Outcome{Err: conflictf("marquee %s is a tombstone (reaped %s)", s.ID, s.Tombstone.At.Format(time.RFC3339))}
	case AdmissionDecided:
		// A grant that raced the reap: give the slot straight back.
		return Outcome{Answer: Ignored, Effects: []Effect{ReleaseAdmission{Pool: s.Pool}}}
	default:
		return Outcome{Answer: Ignored}
	}
}

// --- callbacks ------------------------------------------------------------

func (m Machine) callback(s *State, c Callback, now time.Time) Outcome {
	done := answerWith{Entry{At: now, Source: SourceCallback, Verb: string(c.Verb), Generation: s.Generation, ReceivedGeneration: c.Generation,
		DeliveryID: c.DeliveryID, Auth: c.Auth}}
	if s.Kind != Tutorial {
		return done.answer(Ignored, "a byo marquee has no infrastructure lifecycle for a workflow to report on")
	}
	// M10: positive and different is stale, for every verb; M11: zero is
	// unversioned and fails open.
	if c.Generation > 0 && c.Generation != s.Generation {
		return done.answer(Stale, staleReason(c.Generation, s.Generation))
	}
	if s.Attempt != nil && s.Attempt.Dispatch != DispatchWaiting {
		// M21: an accepted callback of the current attempt is a sign of life.
		s.Attempt.LastCallbackAt = now
		if c.Generation > 0 && s.Attempt.Dispatch == DispatchPending {
			// The run called back under its own generation: the dispatch is
			// observed, whatever its driver's answer turns out to be.
			s.Attempt.Dispatch = DispatchSent
		}
	}
	switch c.Verb {
	case VerbStep: // M12
		return m.stepCallback(s, c, now, done)
	case VerbDeployed: // M13
		return m.deployedCallback(s, c, now, done)
	case VerbDestroyed: // M14
		if s.Lifecycle == Destroyed {
			return done.answer(Ignored, "the marquee is destroyed already")
		}
		effects := m.settleDestroyed(s, now)
		return done.answer(Applied, destroyedDetail(s), effects...)
	case VerbFailed: // M15
		switch s.Lifecycle {
		case Provisioning, Destroying:
			effects := m.settleFailed(s, false, now, "M15", "the workflow reported failure: "+clip(c.Reason))
			return done.answer(Applied, "workflow failed: "+clip(c.Reason), effects...)
		case Provisioned:
			return m.downgrade(s, c, now, done)
		}
		return done.answer(Ignored, "a failed report changes nothing while the marquee is "+string(s.Lifecycle)+" (M15)")
	case VerbNull: // M16
		return m.nullCallback(s, c, now, done)
	case VerbRebooted: // M17
		return rebootedCallback(s, done)
	}
	panic("marquee: unknown verb " + string(c.Verb)) // the decoder only lets known verbs in
}

// answerWith is a callback's history entry before its result: answer
// records it with one and answers. A value, not a closure over the entry,
// which would put the entry on the heap with every callback.
type answerWith struct{ entry Entry }

func (a answerWith) answer(r Answer, detail string, effects ...Effect) Outcome {
	a.entry.Result, a.entry.Detail = r, detail
	return Outcome{Answer: r, Effects: effects, Records: []Entry{a.entry}}
}

func (m Machine) stepCallback(s *State, c Callback, now time.Time, done answerWith) Outcome {
	switch s.Lifecycle {
	case Provisioning:
		if c.Step > s.Progress {
			s.Progress = c.Step
			return done.answer(Applied, "progress "+c.Step.String())
		}
		return done.answer(Ignored, "step "+c.Step.String()+" does not advance progress "+s.Progress.String()+" (M12)")
	case Provisioned:
		return m.healthy(s, now, done)
	}
	return done.answer(Ignored, "a step reports progress only while the marquee is provisioning; it is "+string(s.Lifecycle)+" (M12)")
}

func (m Machine) deployedCallback(s *State, c Callback, now time.Time, done answerWith) Outcome {
	if c.Connection == nil {
		panic("marquee: deployed callback without connection") // the decoder requires it
	}
	switch s.Lifecycle {
	case Provisioning:
		if s.Connection != nil {
			return m.lockedOrDuplicate(s, *c.Connection, done)
		}
		conn := *c.Connection
		s.Connection = &conn
		s.ConnectionGeneration = s.Generation
		s.Progress = AppDeploying
		s.NullPendingUntil = time.Time{}
		s.Bootstrap = &Bootstrap{Generation: s.Generation, Running: true}
		return done.answer(Applied, "connection stored; bootstrap started (M13, M19)", StartBootstrap{Generation: s.Generation})
	case Provisioned:
		if s.Connection != nil && !s.Connection.sameLocked(*c.Connection) {
			return done.answer(Locked, "a deployed may not change the connection this generation reported already (M13)")
		}
		if s.NullPending(now) {
			return m.healthy(s, now, done)
		}
		return m.lockedOrDuplicate(s, *c.Connection, done)
	}
	return done.answer(Ignored, "a deployed changes nothing while the marquee is "+string(s.Lifecycle)+" (M13)")
}

func (m Machine) nullCallback(s *State, c Callback, now time.Time, done answerWith) Outcome {
	switch s.Lifecycle {
	case Provisioning:
		s.Lifecycle = Failed
		s.Progress = Queued
		s.Failure = &Failure{Reason: "the workflow's plan found nothing to provision (null while provisioning)", Rule: "M16", At: now, Generation: s.Generation}
		effects := m.settle(s)
		return done.answer(Applied, "null plan while provisioning is conclusive (M16)", effects...)
	case Provisioned:
		if !s.NullPending(now) {
			s.NullPendingUntil = now.Add(m.Config.NullWindow)
			return done.answer(PendingConfirmation, "first null: waiting for a second opinion until "+s.NullPendingUntil.Format(time.RFC3339)+" (M16, I4)")
		}
		return m.downgrade(s, c, now, done)
	case Destroying:
		effects := m.settleDestroyed(s, now)
		return done.answer(Applied, "null while destroying: the infrastructure is gone (M16)", effects...)
	}
	return done.answer(Ignored, "a null changes nothing while the marquee is "+string(s.Lifecycle)+" (M16)")
}

func rebootedCallback(s *State, done answerWith) Outcome {
	switch s.Lifecycle {
	case Provisioning, Provisioned:
		s.Progress = Queued
		s.NullPendingUntil = time.Time{}
		if s.Downgrade != nil {
			s.Downgrade = nil
			return done.answer(Applied, "host rebooted: progress reset; pending downgrade withdrawn (M17)")
		}
		return done.answer(Applied, "host rebooted: progress reset (M17)")
	}
	return done.answer(Ignored, "a rebooted changes nothing while the marquee is "+string(s.Lifecycle)+" (M17)")
}

// healthy handles a healthy signal on a provisioned marquee: it clears
// a pending null and withdraws a downgrade that waits for the control plane.
func (m Machine) healthy(s *State, now time.Time, done answerWith) Outcome {
	var cleared []string
	if s.NullPending(now) {
		cleared = append(cleared, "pending null cleared")
	}
	s.NullPendingUntil = time.Time{}
	if s.Downgrade != nil {
		s.Downgrade = nil
		cleared = append(cleared, "pending downgrade withdrawn")
	}
	if len(cleared) == 0 {
		return done.answer(Ignored, "the marquee is "+string(s.Lifecycle)+": a step or deployed is a sign of health, and no null or downgrade is pending for it to clear (M16)")
	}
	return done.answer(Applied, "healthy signal: "+strings.Join(cleared, "; ")+" (M16)")
}

func (m Machine) lockedOrDuplicate(s *State, c Connection, done answerWith) Outcome {
	switch {
	case s.Connection == nil:
		// Not reached by the machine (a provisioned marquee stored its
		// connection), but a state written by hand may hold none.
		return done.answer(Ignored, "no connection is stored for this generation to compare with")
	case !s.Connection.sameLocked(c):
		return done.answer(Locked, "a deployed may not change the connection this generation reported already (M13)")
	case *s.Connection == c:
		return done.answer(Duplicate, "the same connection was reported again for this generation (M13)")
	default:
		return done.answer(Ignored, "the connection for this generation is stored already")
	}
}

// downgrade starts the veto check of a confirmed null or a failed on a
// provisioned marquee. Only an active one can be vetoed, so only then
// is the control plane asked.
func (m Machine) downgrade(s *State, c Callback, now time.Time, done answerWith) Outcome {
	if s.Downgrade != nil {
		return done.answer(Checking, "a downgrade already waits for the control plane (M18)")
	}
	if s.Serving != Active {
		// Described before the downgrade changes what it describes.
		detail := fmt.Sprintf("%s on a %s marquee: nothing to preserve (M18)", c.Verb, s.Serving)
		effects := m.applyDowngrade(s, c.Verb, now)
		return done.answer(Applied, detail, effects...)
	}
	s.Downgrade = &Downgrade{Verb: c.Verb, Generation: s.Generation, Reason: clip(c.Reason), Asking: true}
	return done.answer(Checking, "asking the control plane for live chats before downgrading (M18)", AskChats{Generation: s.Generation})
}

// applyDowngrade moves a provisioned marquee to errored and failed.
func (m Machine) applyDowngrade(s *State, v Verb, now time.Time) []Effect {
	s.NullPendingUntil = time.Time{}
	s.Downgrade = nil
	reason := "the workflow reported failure on a provisioned host"
	if v == VerbNull {
		reason = "a confirmed null: the infrastructure is gone"
	}
	effects := m.settleFailed(s, false, now, "M18", reason)
	if v == VerbNull {
		effects = append(effects, TeardownPlaygrounds{Generation: s.Generation})
	}
	return effects
}

// --- settling ---------------------------------------------------------------

// settle is what every settled lifecycle shares: the admission slot is
// released and the retry counter cleared.
func (m Machine) settle(s *State) []Effect {
	var effects []Effect
	if s.Admission != nil {
		effects = append(effects, ReleaseAdmission{Pool: s.Admission.Pool})
		s.Admission = nil
	}
	s.RetryCount = 0
	s.Bootstrap = nil
	s.Downgrade = nil
	return effects
}

// settleFailed ends an attempt in failure, saying why (O2).
func (m Machine) settleFailed(s *State, clearProgress bool, now time.Time, rule, reason string) []Effect {
	s.Lifecycle = Failed
	s.Serving = Errored
	s.Failure = &Failure{Reason: reason, Rule: rule, At: now, Generation: s.Generation}
	if clearProgress {
		s.Progress = Queued
	}
	return m.settle(s)
}

func (m Machine) settleDestroyed(s *State, now time.Time) []Effect {
	s.Lifecycle = Destroyed
	s.Serving = Disabled
	s.Failure, s.LastVeto = nil, nil
	s.Connection = nil
	s.ConnectionGeneration = 0
	s.NullPendingUntil = time.Time{}
	effects := append(m.settle(s), TeardownPlaygrounds{Generation: s.Generation})
	if s.ReapOnDestroyed {
		s.Tombstone = &Tombstone{Reason: "reaped after destroy", At: now}
	}
	return effects
}

func destroyedDetail(s *State) string {
	if s.Tombstone != nil {
		return "infrastructure destroyed; marquee reaped (M14)"
	}
	return "infrastructure destroyed (M14)"
}

// --- operator commands ------------------------------------------------------

// dispatch starts a workflow attempt under a fresh generation (M3, I2).
func (m Machine) dispatch(s *State, a Action, now time.Time) Effect {
	if s.Generation == s.DispatchedGeneration {
		s.Generation++
	}
	s.DispatchedGeneration = s.Generation
	s.Attempt = &Attempt{Generation: s.Generation, Action: a, Dispatch: DispatchPending, DispatchedAt: now}
	return StartDispatch{Generation: s.Generation, Action: a}
}

func (m Machine) redeploy(s *State, now time.Time) Outcome {
	if s.Kind != Tutorial {
		return Outcome{Err: conflictf("redeploy is for tutorial marquees; %s is %s (M6)", s.ID, s.Kind)}
	}
	// M6: supersede at once, so that no callback of the old attempt counts
	// while the new one waits for its slot.
	s.Generation++
	s.Connection = nil
	s.ConnectionGeneration = 0
	s.NullPendingUntil = time.Time{}
	s.RetryCount = 0
	s.Bootstrap = nil
	s.Downgrade = nil
	s.Failure, s.LastVeto = nil, nil
	s.Lifecycle = Provisioning
	s.Progress = Queued
	s.Serving = Disabled
	entry := Entry{At: now, Source: SourceOperator, Verb: "redeploy", Generation: s.Generation, Result: Applied}
	var effects []Effect
	switch {
	case s.Admission != nil && s.Admission.Status == AdmissionReserved:
		effects = append(effects, m.dispatch(s, ActionRedeploy, now))
		entry.Detail = "superseded; slot kept; redeploy dispatched (M6)"
	case s.Admission != nil:
		s.Attempt = &Attempt{Generation: s.Generation, Action: ActionRedeploy, Dispatch: DispatchWaiting}
		entry.Detail = "superseded; still waiting for a slot (M6)"
	default:
		s.Attempt = &Attempt{Generation: s.Generation, Action: ActionRedeploy, Dispatch: DispatchWaiting}
		s.Admission = &Admission{Pool: s.Pool, Status: AdmissionAsking}
		effects = append(effects, AskAdmission{Pool: s.Pool})
		entry.Detail = "superseded; asking pool " + s.Pool + " for a slot (M6)"
	}
	return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
}

func (m Machine) destroy(s *State, d Destroy, now time.Time) Outcome {
	if s.Kind != Tutorial {
		return Outcome{Err: conflictf("destroy is for tutorial marquees; %s is %s (M7)", s.ID, s.Kind)}
	}
	entry := Entry{At: now, Source: SourceOperator, Verb: "destroy", Result: Applied}
	switch s.Lifecycle {
	case Destroying:
		// Idempotent: an operator repeating the command gets the view; a
		// reap request is remembered.
		s.ReapOnDestroyed = s.ReapOnDestroyed || d.Reap
		entry.Generation, entry.Detail = s.Generation, "already destroying"
		return Outcome{Answer: Ignored, Records: []Entry{entry}}
	case Destroyed:
		if !d.Reap {
			return Outcome{Err: conflictf("marquee %s is already destroyed", s.ID)}
		}
		s.Tombstone = &Tombstone{Reason: "reaped after destroy", At: now}
		entry.Generation, entry.Detail = s.Generation, "already destroyed; reaped (M14)"
		return Outcome{Answer: Applied, Records: []Entry{entry}}
	}
	effects := m.settle(s) // M7: destroy never waits for a slot and releases one it holds
	s.NullPendingUntil = time.Time{}
	s.Failure, s.LastVeto = nil, nil
	s.Lifecycle = Destroying
	// I1 (decided): the destroy takes a new generation, so the host reported
	// by the old one stops serving now, not when "destroyed" lands.
	s.Serving = Disabled
	s.ReapOnDestroyed = d.Reap
	effects = append(effects, m.dispatch(s, ActionDestroy, now))
	entry.Generation, entry.Detail = s.Generation, "destroy dispatched (M7)"
	return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
}

func (m Machine) disable(s *State, now time.Time) Outcome {
	entry := Entry{At: now, Source: SourceOperator, Verb: "disable", Generation: s.Generation, Result: Applied, Detail: "serving disabled (M8)"}
	if s.Serving == Disabled {
		entry.Result, entry.Detail = Ignored, "the marquee is disabled already: nothing to change (M8)"
	}
	s.Serving = Disabled
	return Outcome{Answer: entry.Result, Records: []Entry{entry}}
}

func (m Machine) enable(s *State, now time.Time) Outcome {
	if s.Serving != Disabled {
		return Outcome{Err: conflictf("enable needs serving=disabled; %s is %s (M8)", s.ID, s.Serving)}
	}
	if s.Kind == Tutorial && s.Lifecycle != Provisioned {
		return Outcome{Err: conflictf("enable needs lifecycle=provisioned; %s is %s (M8)", s.ID, s.Lifecycle)}
	}
	s.Serving = Active
	return Outcome{Answer: Applied, Records: []Entry{{At: now, Source: SourceOperator, Verb: "enable", Generation: s.Generation, Result: Applied, Detail: "serving active (M8)"}}}
}

// --- results of effects -------------------------------------------------------

func (m Machine) admissionDecided(s *State, d AdmissionDecided, now time.Time) Outcome {
	entry := Entry{At: now, Source: SourceAdmission, Verb: "admission", Generation: s.Generation}
	if s.Admission == nil {
		// The marquee stopped wanting a slot (destroyed, failed) before the
		// pool's answer came in: hand it straight back.
		entry.Result, entry.Detail = Ignored, fmt.Sprintf("pool answered %s after the marquee settled; released", d.Status)
		return Outcome{Answer: Ignored, Effects: []Effect{ReleaseAdmission{Pool: s.Pool}}, Records: []Entry{entry}}
	}
	s.Admission.Status, s.Admission.Sequence = d.Status, d.Sequence
	entry.Result = Applied
	if d.Status != AdmissionReserved {
		entry.Detail = fmt.Sprintf("queued in pool %s at sequence %d (A3)", s.Admission.Pool, d.Sequence)
		return Outcome{Answer: Applied, Records: []Entry{entry}}
	}
	var effects []Effect
	if s.Attempt != nil && s.Attempt.Dispatch == DispatchWaiting {
		effects = append(effects, m.dispatch(s, s.Attempt.Action, now))
		entry.Generation = s.Generation
		entry.Detail = fmt.Sprintf("slot reserved in pool %s at sequence %d; %s dispatched (A3, M5)", s.Admission.Pool, d.Sequence, s.Attempt.Action)
	} else {
		entry.Detail = fmt.Sprintf("slot reserved in pool %s at sequence %d", s.Admission.Pool, d.Sequence)
	}
	return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
}

func (m Machine) dispatchFinished(s *State, d DispatchFinished, now time.Time) Outcome {
	entry := Entry{At: now, Source: SourceDispatch, Verb: "dispatch", Generation: s.Generation, ReceivedGeneration: d.Generation}
	if s.Attempt == nil || s.Attempt.Generation != d.Generation || (s.Attempt.Dispatch != DispatchPending && s.Attempt.Dispatch != DispatchSent) {
		entry.Result, entry.Detail = Stale, fmt.Sprintf("dispatch result for generation %d arrived after the attempt moved on", d.Generation)
		return Outcome{Answer: Stale, Records: []Entry{entry}}
	}
	if s.Attempt.Dispatch == DispatchSent {
		// Already observed through the run's own callbacks; its run id is
		// still worth keeping (T4 binds later callbacks to it).
		entry.Result, entry.Detail = Ignored, fmt.Sprintf("dispatch %s; the run had already called back", d.Outcome)
		if d.Outcome == DispatchOK && d.RunID != 0 && s.Attempt.RunID == 0 {
			recordRun(s, d)
			entry.Result = Applied
			return Outcome{Answer: Applied, Records: []Entry{entry}}
		}
		return Outcome{Answer: Ignored, Records: []Entry{entry}}
	}
	switch d.Outcome {
	case DispatchOK:
		s.Attempt.Dispatch = DispatchSent
		entry.Result, entry.Detail = Applied, string(s.Attempt.Action)+" dispatched"
		if d.RunID != 0 {
			recordRun(s, d)
			entry.Detail += fmt.Sprintf(" as run %d (W6)", d.RunID)
		}
		return Outcome{Answer: Applied, Records: []Entry{entry}}
	case DispatchConfiguration:
		// Retrying a request GitHub refused as malformed cannot help.
		s.Attempt.Dispatch = DispatchFailed
		reason := "dispatch refused (configuration): " + clip(d.Detail)
		if d.Detail == "" {
			reason = "no admission: the pool's queue is full"
		}
		effects := m.settleFailed(s, true, now, "M5", reason)
		entry.Result, entry.Detail = Applied, "dispatch refused (configuration): "+clip(d.Detail)
		return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
	default:
		// Transient: no callback will come, so the stuck retries
		// dispatch again under a new generation.
		s.Attempt.Dispatch = DispatchFailed
		entry.Result, entry.Detail = Applied, "dispatch failed (transient; the stuck retry will dispatch again): "+clip(d.Detail)
		return Outcome{Answer: Applied, Records: []Entry{entry}}
	}
}

// recordRun keeps the run GitHub started for the attempt, and in the
// bounded list of recent runs (T4).
func recordRun(s *State, d DispatchFinished) {
	s.Attempt.RunID, s.Attempt.RunURL = d.RunID, clip(d.RunURL)
	s.Runs = append(s.Runs, Run{ID: d.RunID, Generation: d.Generation})
	if len(s.Runs) > MaxRuns {
		s.Runs = append([]Run(nil), s.Runs[len(s.Runs)-MaxRuns:]...)
	}
}

func (m Machine) bootstrapFinished(s *State, b BootstrapFinished, now time.Time) Outcome {
	entry := Entry{At: now, Source: SourceBootstrap, Verb: "bootstrap", Generation: s.Generation, ReceivedGeneration: b.Generation}
	if s.Bootstrap == nil || !s.Bootstrap.Running || b.Generation != s.Generation || s.Lifecycle != Provisioning {
		entry.Result, entry.Detail = Stale, fmt.Sprintf("bootstrap result for generation %d ignored (M19)", b.Generation)
		return Outcome{Answer: Stale, Records: []Entry{entry}}
	}
	if b.OK {
		s.Serving = Active
		s.Lifecycle = Provisioned
		effects := m.settle(s)
		entry.Result, entry.Detail = Applied, "bootstrap verified: active and provisioned (M19)"
		return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
	}
	s.Bootstrap.Failures++
	s.Bootstrap.Running = false
	if s.Bootstrap.Failures > m.Config.BootstrapRetries {
		effects := m.settleFailed(s, false, now, "M19", fmt.Sprintf("bootstrap failed %d times: %s", m.Config.BootstrapRetries+1, clip(b.Detail)))
		entry.Result, entry.Detail = Applied, fmt.Sprintf("bootstrap failed %d times; giving up (M19): %s", m.Config.BootstrapRetries+1, clip(b.Detail))
		return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
	}
	s.Bootstrap.RetryAt = now.Add(m.Config.BootstrapBackoff << (s.Bootstrap.Failures - 1))
	entry.Result, entry.Detail = Applied, fmt.Sprintf("bootstrap failed (%d of %d retries left), retry at %s: %s",
		m.Config.BootstrapRetries-s.Bootstrap.Failures+1, m.Config.BootstrapRetries, s.Bootstrap.RetryAt.Format(time.RFC3339), clip(b.Detail))
	return Outcome{Answer: Applied, Records: []Entry{entry}}
}

func (m Machine) bootstrapRetryDue(s *State, e BootstrapRetryDue, now time.Time, force bool) Outcome {
	b := s.Bootstrap
	if b == nil || b.Running || b.Generation != e.Generation || (!force && now.Before(b.RetryAt)) {
		return Outcome{Answer: Ignored}
	}
	b.Running = true
	b.RetryAt = time.Time{}
	return Outcome{Answer: Applied, Effects: []Effect{StartBootstrap{Generation: b.Generation}},
		Records: []Entry{{At: now, Source: SourceTimer, Verb: "bootstrap_retry", Generation: s.Generation, Result: Applied, Detail: fmt.Sprintf("bootstrap retry %d (M19)", b.Failures)}}}
}

func (m Machine) chatsAnswered(s *State, c ChatsAnswered, now time.Time) Outcome {
	entry := Entry{At: now, Source: SourceControlPlane, Verb: "chats", Generation: s.Generation, ReceivedGeneration: c.Generation}
	d := s.Downgrade
	if d == nil || !d.Asking || d.Generation != c.Generation || s.Generation != c.Generation {
		entry.Result, entry.Detail = Stale, "control-plane answer for a downgrade no longer pending"
		return Outcome{Answer: Stale, Records: []Entry{entry}}
	}
	verb := d.Verb
	if !(s.Kind == Tutorial && s.Serving == Active && s.Lifecycle == Provisioned) {
		effects := m.applyDowngrade(s, verb, now)
		entry.Result, entry.Detail = Applied, fmt.Sprintf("%s applied: marquee no longer active and provisioned (M18)", verb)
		return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
	}
	if c.Err != "" {
		// Uncertainty never tears down a live host: preserve, ask again.
		d.Asking = false
		d.Unanswered++
		d.RecheckAt = now.Add(m.Config.ChatsRecheckAfter)
		// Held, not vetoed: nobody said there are live chats; the callback
		// was answered checking and the check goes on.
		entry.Result, entry.Detail = Checking, "control plane unreachable, marquee preserved; asking again at "+d.RecheckAt.Format(time.RFC3339)+" (M18): "+clip(c.Err)
		return Outcome{Answer: Checking, Records: []Entry{entry}}
	}
	if min(c.Live, c.Reachable) >= 1 {
		s.Downgrade = nil
		s.NullPendingUntil = time.Time{}
		s.LastVeto = &Veto{Verb: verb, Live: min(c.Live, c.Reachable), At: now}
		entry.Result, entry.Detail = Vetoed, fmt.Sprintf("%s vetoed: %d live reachable chats; drift logged (M18, I3)", verb, min(c.Live, c.Reachable))
		return Outcome{Answer: Vetoed, Records: []Entry{entry}}
	}
	effects := m.applyDowngrade(s, verb, now)
	entry.Result, entry.Detail = Applied, fmt.Sprintf("%s applied: no live reachable chats; errored and failed (M18)", verb)
	return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
}

func (m Machine) chatsRecheckDue(s *State, e ChatsRecheckDue, now time.Time, force bool) Outcome {
	d := s.Downgrade
	if d == nil || d.Asking || d.Generation != e.Generation || (!force && now.Before(d.RecheckAt)) {
		return Outcome{Answer: Ignored}
	}
	d.Asking = true
	d.RecheckAt = time.Time{}
	return Outcome{Answer: Applied, Effects: []Effect{AskChats{Generation: d.Generation}},
		Records: []Entry{{At: now, Source: SourceTimer, Verb: "chats_recheck", Generation: s.Generation, Result: Applied, Detail: "asking the control plane again (M18)"}}}
}

// --- deadlines -----------------------------------------

// awaitingCallback reports whether the current attempt is waiting for its
// workflow to call: dispatched (or tried), no connection yet. Only then can
// it be stuck; a bootstrap in progress is our own work, not the
// workflow's.
func awaitingCallback(s State) bool {
	if s.Attempt == nil || s.Attempt.Dispatch == DispatchWaiting {
		return false
	}
	switch s.Lifecycle {
	case Provisioning:
		return s.Connection == nil
	case Destroying:
		return true
	}
	return false
}

// stuckAt is when the current attempt counts as stuck.
func (m Machine) stuckAt(s State) time.Time {
	a := s.Attempt
	if a.LastCallbackAt.After(a.DispatchedAt) {
		return a.LastCallbackAt.Add(m.Config.StaleAfter)
	}
	if s.RetryCount == 0 {
		return a.DispatchedAt.Add(m.Config.StaleAfter)
	}
	return a.DispatchedAt.Add(m.Config.RetryBackoff[min(s.RetryCount, len(m.Config.RetryBackoff))-1])
}

// Deadline is a moment at which an event becomes due.
type Deadline struct {
	At    time.Time
	Event Event
}

// Deadlines lists the marquee's timers, earliest first (ties in a fixed
// order). The shell persists the earliest in its timer index with the
// snapshot, and turns each due one into its event (M23).
func (m Machine) Deadlines(s State) []Deadline {
	var ds []Deadline
	for t, d := range m.deadlineTimes(s) {
		if d.set {
			ds = append(ds, Deadline{At: d.At, Event: timer(t).event(s)})
		}
	}
	slices.SortStableFunc(ds, func(a, b Deadline) int { return a.At.Compare(b.At) })
	return ds
}

// timer is one of the marquee's deadlines before its event is made.
type timer uint8

const (
	stuckTimer timer = iota
	provisioningTimer
	bootstrapTimer
	nullTimer
	recheckTimer
	timers
)

// timerAt is a deadline's time and whether it is set; its index in
// deadlineTimes says which it is.
type timerAt struct {
	At  time.Time
	set bool
}

// deadlineTimes are the marquee's deadlines in their fixed order: the one
// place that says which are set and when.
func (m Machine) deadlineTimes(s State) [timers]timerAt {
	var ds [timers]timerAt
	if s.Tombstone != nil || s.Kind != Tutorial {
		return ds
	}
	set := func(t timer, at time.Time) { ds[t].At, ds[t].set = at, true }
	if awaitingCallback(s) {
		set(stuckTimer, m.stuckAt(s))
	}
	if s.Lifecycle == Provisioning && s.Attempt != nil && !s.Attempt.DispatchedAt.IsZero() {
		set(provisioningTimer, s.Attempt.DispatchedAt.Add(m.Config.ProvisioningTimeout))
	}
	if s.Bootstrap != nil && !s.Bootstrap.Running {
		set(bootstrapTimer, s.Bootstrap.RetryAt)
	}
	if !s.NullPendingUntil.IsZero() {
		set(nullTimer, s.NullPendingUntil)
	}
	if s.Downgrade != nil && !s.Downgrade.Asking {
		set(recheckTimer, s.Downgrade.RecheckAt)
	}
	return ds
}

// event is the event this timer of s turns into when it is due.
func (t timer) event(s State) Event {
	switch t {
	case stuckTimer:
		return RetryDue{Generation: s.Attempt.Generation}
	case provisioningTimer:
		return ProvisioningTimedOut{Generation: s.Attempt.Generation}
	case bootstrapTimer:
		return BootstrapRetryDue{Generation: s.Bootstrap.Generation}
	case nullTimer:
		return NullExpired{}
	default:
		return ChatsRecheckDue{Generation: s.Downgrade.Generation}
	}
}

// Due returns the events of the deadlines that have passed at now.
func (m Machine) Due(s State, now time.Time) []Event {
	var evs []Event
	for _, d := range m.Deadlines(s) {
		if !d.At.After(now) {
			evs = append(evs, d.Event)
		}
	}
	return evs
}

func (m Machine) retryDue(s *State, e RetryDue, now time.Time, force bool) Outcome {
	if !awaitingCallback(*s) || s.Attempt.Generation != e.Generation || (!force && now.Before(m.stuckAt(*s))) {
		return Outcome{Answer: Ignored}
	}
	entry := Entry{At: now, Source: SourceTimer, Verb: "retry", Generation: s.Generation, Result: Applied}
	if s.RetryCount >= len(m.Config.RetryBackoff) {
		effects := m.settleFailed(s, true, now, "M21", fmt.Sprintf("no callback from the workflow after %d retries", len(m.Config.RetryBackoff)))
		entry.Detail = fmt.Sprintf("no callback after %d retries: failed (M21)", len(m.Config.RetryBackoff))
		return Outcome{Answer: Applied, Effects: effects, Records: []Entry{entry}}
	}
	s.RetryCount++
	eff := m.dispatch(s, s.Attempt.Action, now)
	entry.Generation = s.Generation
	entry.Detail = fmt.Sprintf("stuck: retry %d of %d, %s re-dispatched under generation %d (M21)", s.RetryCount, len(m.Config.RetryBackoff), s.Attempt.Action, s.Generation)
	return Outcome{Answer: Applied, Effects: []Effect{eff}, Records: []Entry{entry}}
}

// runNow cuts short the back-off that waits: a stuck retry after the
// first, a bootstrap retry, or a control-plane recheck makes its due
// transition now, recorded as the operator's. Safety windows are not
// back-offs: the first stuck wait (the workflow may still call), the
// null window and the provisioning timeout are never cut.
func (m Machine) runNow(s *State, now time.Time) Outcome {
	for _, d := range m.Deadlines(*s) {
		var out Outcome
		switch ev := d.Event.(type) {
		case RetryDue:
			if s.RetryCount == 0 {
				continue
			}
			out = m.retryDue(s, ev, now, true)
		case BootstrapRetryDue:
			out = m.bootstrapRetryDue(s, ev, now, true)
		case ChatsRecheckDue:
			out = m.chatsRecheckDue(s, ev, now, true)
		default:
			continue
		}
		for i := range out.Records {
			out.Records[i].Source = SourceOperator
			out.Records[i].Detail = fmt.Sprintf("run now (due %s): %s", d.At.UTC().Format(time.RFC3339), out.Records[i].Detail)
		}
		return out
	}
	return Outcome{Err: conflictf("marquee %s has no back-off waiting: run-now cuts short a stuck retry after the first, a bootstrap retry or a control-plane recheck (O5)", s.ID)}
}

func (m Machine) provisioningTimedOut(s *State, e ProvisioningTimedOut, now time.Time) Outcome {
	a := s.Attempt
	if s.Lifecycle != Provisioning || a == nil || a.Generation != e.Generation || a.DispatchedAt.IsZero() || now.Before(a.DispatchedAt.Add(m.Config.ProvisioningTimeout)) {
		return Outcome{Answer: Ignored}
	}
	effects := m.settleFailed(s, false, now, "M22", fmt.Sprintf("still provisioning %s after the dispatch", m.Config.ProvisioningTimeout))
	return Outcome{Answer: Applied, Effects: effects, Records: []Entry{{At: now, Source: SourceTimer, Verb: "timeout", Generation: s.Generation, Result: Applied,
		Detail: fmt.Sprintf("attempt %d provisioning for %s: failed (M22)", a.Generation, m.Config.ProvisioningTimeout)}}}
}

func (m Machine) nullExpired(s *State, now time.Time) Outcome {
	if s.NullPendingUntil.IsZero() || now.Before(s.NullPendingUntil) {
		return Outcome{Answer: Ignored}
	}
	s.NullPendingUntil = time.Time{}
	return Outcome{Answer: Applied, Records: []Entry{{At: now, Source: SourceTimer, Verb: "null_expired", Generation: s.Generation, Result: Applied,
		Detail: "first null was never confirmed; forgotten (M16)"}}}
}

// reconcile settles what a crash may have left in flight. The snapshot
// records intent before every effect, so each open intent is resumed:
//   - a dispatch whose outcome is unknown is observed or superseded, never
//     assumed: if its run has called back (or the marquee settled) it was
//     sent; otherwise a new generation supersedes it, so if the old run
//     exists after all its callbacks are stale;
//   - a running bootstrap is run again for the same generation (the probe
//     is an observation, safe to repeat);
//   - a control-plane question is asked again;
//   - an admission question is asked again (A6 makes it idempotent).
func (m Machine) reconcile(s *State, r Reconcile, now time.Time) Outcome {
	var effects []Effect
	var details []string
	if s.Admission != nil && s.Admission.Status == AdmissionAsking {
		effects = append(effects, AskAdmission{Pool: s.Admission.Pool})
		details = append(details, "admission asked again")
	}
	if s.Attempt != nil && s.Attempt.Dispatch == DispatchPending {
		old := s.Attempt.Generation
		if !s.Attempt.LastCallbackAt.IsZero() || s.Connection != nil || s.Lifecycle.Settled() {
			// Observed: the run called back, so it was sent.
			s.Attempt.Dispatch = DispatchSent
			details = append(details, fmt.Sprintf("dispatch of generation %d observed through its callbacks", old))
		} else {
			effects = append(effects, m.dispatch(s, s.Attempt.Action, now))
			details = append(details, fmt.Sprintf("dispatch of generation %d had an unknown outcome; superseded by generation %d", old, s.Generation))
		}
	}
	if s.Bootstrap != nil && s.Bootstrap.Running {
		effects = append(effects, StartBootstrap{Generation: s.Bootstrap.Generation})
		details = append(details, "bootstrap run again")
	}
	if s.Downgrade != nil && s.Downgrade.Asking {
		effects = append(effects, AskChats{Generation: s.Downgrade.Generation})
		details = append(details, "control plane asked again")
	}
	if r.AfterFailure && s.Kind == Tutorial && s.Admission == nil && s.Pool != "" {
		effects = append(effects, ReleaseAdmission{Pool: s.Pool})
		details = append(details, "slot released again in case the release was lost (A5)")
	}
	if r.AfterFailure && s.Lifecycle == Destroyed {
		effects = append(effects, TeardownPlaygrounds{Generation: s.Generation})
		details = append(details, "playground teardown asked again")
	}
	if len(details) == 0 {
		return Outcome{Answer: Ignored}
	}
	detail := ""
	for i, d := range details {
		if i > 0 {
			detail += "; "
		}
		detail += d
	}
	return Outcome{Answer: Applied, Effects: effects, Records: []Entry{{At: now, Source: SourceRecovery, Verb: "reconcile", Generation: s.Generation, Result: Applied, Detail: detail}}}
}

// clip bounds text that came from outside before it goes into history.
func clip(s string) string {
	const maxDetail = 200 // history is bounded; one reason must not fill it
	if len(s) > maxDetail {
		return s[:maxDetail] + "..."
	}
	return s
}

// SlotMayBeHeld names the pool of a settled tutorial marquee, whose slot
// its pool may still hold: the release was a message, lost if the node
// that sent it died first. A new owner sends it again when it first reads
// the record; a release of a job the pool does not hold changes nothing,
// so the message is safe to repeat and needs no history entry.
func SlotMayBeHeld(s State) (pool string, ok bool) {
	settled := s.Tombstone != nil || s.Lifecycle.Settled()
	if s.Kind != Tutorial || s.Pool == "" || s.Admission != nil || !settled {
		return "", false
	}
	return s.Pool, true
}

// NeedsReconcile reports whether a snapshot has effects in flight that a
// restarted actor must settle before new work.
func NeedsReconcile(s State) bool {
	return s.Tombstone == nil && ((s.Admission != nil && s.Admission.Status == AdmissionAsking) ||
		(s.Attempt != nil && s.Attempt.Dispatch == DispatchPending) ||
		(s.Bootstrap != nil && s.Bootstrap.Running) ||
		(s.Downgrade != nil && s.Downgrade.Asking))
}
