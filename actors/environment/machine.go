package environment

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/entity"

	"github.com/wardenhq/warden/actors/errs"
)

// Limits on what one record keeps. A long-lived preview repaired again and
// again would otherwise grow without bound, and every transition rewrites
// the whole record. The newest entries are the ones an operator needs; a
// drift still waiting for an decision is never dropped.
const (
	MaxReceipts = 100
	MaxAudit    = 100
	MaxDrift    = 50
)

// Config holds the machine's limits.
type Config struct {
	// RemoveArtifacts: the platform's artifacts are each environment's
	// own, and removal removes them too (the local platform, P9).
	RemoveArtifacts bool
	// RetryBackoff is the first wait after a transient failure, doubling;
	// MaxRetries transient failures of one transition end in review:
	// nothing retries forever (E9).
	RetryBackoff time.Duration
	MaxRetries   int
	// LeaseFor is how long a worker holds a transition before another may
	// take it over (E7).
	LeaseFor time.Duration
	// PreviewURL is the template of a preview's public URL, sent with its
	// readiness notification (E10, W8): {id}, {branch} and {generation}
	// are replaced. Empty: the URL the route driver observed, if any.
	PreviewURL string
	// Worker names the lease owner of the attempts this machine begins on
	// its own, where one transition ends and the next begins in one step
	// (a created environment's first, a repair's): the process that runs
	// it (E7).
	Worker string
	// AskBranchAgain is how long a created preview waits for its branch's
	// generation before asking again: the ask, or the answer, is lost
	// with a node that dies holding it, and the create's caller waits
	// meanwhile. Asking twice is told the same generation.
	AskBranchAgain time.Duration
}

// DefaultConfig is the defaults.
func DefaultConfig() Config {
	return Config{RetryBackoff: 30 * time.Second, MaxRetries: 5, LeaseFor: 2 * time.Minute, Worker: "worker-a", AskBranchAgain: 10 * time.Second}
}

// URLOf is a preview's public URL (W8): the configured template with its
// placeholders filled, or else what the route driver observed.
func (m Machine) URLOf(e Env) string {
	if m.Config.PreviewURL == "" {
		return e.URL
	}
	return strings.NewReplacer("{id}", e.ID, "{branch}", e.Branch, "{generation}", strconv.FormatUint(e.Generation, 10)).Replace(m.Config.PreviewURL)
}

// Machine applies the environment rules under one Config.
type Machine struct{ Config Config }

// --- events -------------------------------------------------------------------

// Event is anything that can happen to an environment.
type Event interface{ isEvent() }

// Create records a new environment (E1) and begins its first transition
// in the same step. Generation is the branch's route generation for this
// environment, given out in order per branch by the branch's own counter
// (StepBranch): a newer preview of a branch always has a higher one, which
// is what the route's compare-and-set protects (E8, I14). Zero: the record
// asks its branch for one (AskGeneration) and begins once it is given.
type Create struct {
	ID, Branch, Revision string
	Data                 DataPolicy
	TTL                  time.Duration
	Generation           uint64
	// By names the operator who asked (T8), audited when set.
	By string
}

// Advance asks a worker (Owner) to take the next eligible transition: the
// intent is recorded before the effect (E5). A worker finding an attempt
// whose lease has expired takes it over and observes first (E7).
// BranchNewest is the newest route generation given out for the branch: a
// preview with a newer sibling never activates the route, not even over an
// absent one, since the newer one may have held it already (I14).
type Advance struct {
	Owner        string
	BranchNewest uint64
}

// Observation is what a driver's observe reported.
type Observation struct {
	Exists     bool
	Owner      string // the environment the resource belongs to
	Matches    bool   // configuration matches the receipt / candidate identity / health
	ProviderID string
	// RouteTarget is the generation the route resolves to (0: none).
	RouteTarget uint64
	// URL is where a route driver says the route serves the preview (W8).
	URL string
	// Replace: it exists but can never become ready as it is (exited,
	// or started with a configuration that is no longer current): it is
	// applied again rather than waited for (P15).
	Replace bool
	Detail  string
}

// DriverAnswer is a driver's answer for one attempt, under one lease generation.
// BranchNewest, as in Advance, is the branch's newest route generation
// when the answer came back: the result may end a transition and begin
// the route's activation in the same step.
type DriverAnswer struct {
	AttemptID       string
	LeaseGeneration uint64
	BranchNewest    uint64
	// OK is the effect's own answer (ignored for verification, E4).
	OK bool
	// Timeout: no answer; the decision is unknown.
	Timeout  bool
	Category Category
	Message  string
	// Observation is set for an observe's answer.
	Observation *Observation
	// Input and Output are the driver call's request and answer, verbatim
	// (JSON), kept in the receipt (E13).
	Input, Output string
}

// RenewLease extends a worker's lease during long work (E7).
type RenewLease struct {
	AttemptID       string
	LeaseGeneration uint64
}

// RemoveEnv starts the forward removal (E11). By names the operator who
// asked (T8), audited when set.
type RemoveEnv struct{ Reason, By string }

// Expire is the TTL deadline (E14): removal with reason ttl.
type Expire struct{}

// AtRest is the reconciler's observation of a resource of an environment
// with no transition in flight (E14, E15). Seq is the record's AttemptSeq
// when the observation was asked for: one taken before a later attempt
// says nothing about the world that attempt made (P13).
type AtRest struct {
	Capability   Capability
	Observation  Observation
	Seq          uint64
	BranchNewest uint64 // as in DriverAnswer: a repair may begin with the route
}

// Action is an audited manual intervention (E16); BranchNewest as in
// DriverAnswer.
type Action struct {
	Name, Actor, Reason string
	BranchNewest        uint64
}

// GenerationGiven is the branch's answer to a created environment's
// AskGeneration: its route generation. Told at least once; a second
// telling changes nothing.
type GenerationGiven struct{ Generation uint64 }

// OwnerGone says a lease owner is known to be dead: a process that
// restarted on a store only one process can open knows that every other
// owner named in it was an earlier incarnation of itself. Its
// lease ends now instead of at its expiry; the next worker still takes
// the attempt over by observing first (E7).
type OwnerGone struct{ Owner string }

// Delivered is the notification sender's report (E10).
type Delivered struct {
	Key string
	OK  bool
	// Error says why a delivery failed (O2), without secrets.
	Error string
}

func (Create) isEvent()       {}
func (Advance) isEvent()      {}
func (DriverAnswer) isEvent() {}
func (RenewLease) isEvent()   {}
func (RemoveEnv) isEvent()    {}
func (Expire) isEvent()       {}
func (AtRest) isEvent()       {}
func (Action) isEvent()       {}
func (Delivered) isEvent()    {}
func (OwnerGone) isEvent()    {}

func (GenerationGiven) isEvent() {}

// --- effects -------------------------------------------------------------------

// Effect is work for the shell after the record is persisted.
type Effect interface{ isEffect() }

// Do calls a driver. Every call carries the attempt and lease generation;
// drivers reject obsolete generations where the target allows (E7). A
// route apply is a compare-and-set on ExpectedRoute (E8).
type Do struct {
	AttemptID       string
	LeaseGeneration uint64
	Capability      Capability
	Op              Op
	Identity        string
	Generation      uint64
	ExpectedRoute   uint64
}

// Send delivers an outbox notification (E10).
type Send struct{ Notification Notification }

// AskGeneration asks the branch for the environment's route generation:
// the created record's first effect, when the create came without one.
type AskGeneration struct{ Branch string }

func (Do) isEffect()            {}
func (Send) isEffect()          {}
func (AskGeneration) isEffect() {}

// String prints the ask in golden files.
func (a AskGeneration) String() string { return "ask-generation(" + a.Branch + ")" }

// String prints a driver call in golden files and logs.
func (d Do) String() string {
	s := fmt.Sprintf("%s(%s %s att=%s lease=%d", d.Op, d.Capability, d.Identity, d.AttemptID, d.LeaseGeneration)
	if d.Capability == Route && d.Op == Apply {
		s += fmt.Sprintf(" expect=%d", d.ExpectedRoute)
	}
	return s + ")"
}

// String prints a notification to send.
func (s Send) String() string {
	return fmt.Sprintf("send(%s %s)", s.Notification.Event, s.Notification.Key)
}

// Outcome is what one step produced besides the new record, the
// entity.Outcome of this kind:
// a Verdict as its Answer, the driver calls and notifications to start
// after the record is durable as its Effects (intent before effect, E5),
// and the record's next deadline as its Wake. The outbox and receipts live
// in the record itself, so there are no separate records.
type Outcome = entity.Outcome[Verdict, Effect, entity.None]

// Verdict says what a step decided, for the audit, logs and tests.
type Verdict struct {
	Note string
	// Rejected: a stale worker's commit was refused (E7, I13).
	Rejected bool
	// Through are the states the step entered, in order, the last the
	// record's: a step that ends a transition and the next one too (the
	// last removal state) passes more than one boundary (O11).
	Through []Phase
}

func (v Verdict) String() string {
	if v.Rejected {
		return "REJECTED " + v.Note
	}
	return v.Note
}

// decision is what a rule's handler returns; Step makes it an Outcome.
// through are the states a transition's end entered (stepDone, the
// tombstone's).
type decision struct {
	Effects  []Effect
	Note     string
	Rejected bool
	Err      error
	through  []Phase
}

// Create is the Create step on an environment that does not exist yet
// (Step does the same).
func (m Machine) Create(c Create, now time.Time) (Env, Outcome) { return m.Step(Env{}, c, now) }

// --- the machine ----------------------------------------------------------------

// Validate checks a Create's names and policy (E1, E2); the shell calls it
// before it gives out a route generation, New again before the record.
func (c Create) Validate() error {
	switch {
	case !ValidID(c.ID):
		return fmt.Errorf("%w: id %q must match [a-z0-9][a-z0-9-]{0,62}", errs.Invalid, c.ID)
	case !ValidID(c.Branch):
		return fmt.Errorf("%w: branch %q must match [a-z0-9][a-z0-9-]{0,62}", errs.Invalid, c.Branch)
	case !ValidRevision(c.Revision):
		return fmt.Errorf("%w: revision %q must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}", errs.Invalid, c.Revision)
	case c.Data != "" && c.Data != Disposable && c.Data != Preserve:
		return fmt.Errorf("%w: data must be disposable or preserve", errs.Invalid)
	}
	return nil
}

// New records a requested environment with its declared identities (E1, E2).
func (m Machine) New(c Create, now time.Time) (Env, error) {
	if err := c.Validate(); err != nil {
		return Env{}, err
	}
	if c.Data == "" {
		c.Data = Disposable
	}
	e := Env{ID: c.ID, Branch: c.Branch, Revision: c.Revision, Data: c.Data, Desired: "ready", State: Requested,
		Generation: c.Generation, CreatedAt: now, UpdatedAt: now}
	if c.TTL > 0 {
		e.ExpiresAt = now.Add(c.TTL)
	}
	for _, cap := range []Capability{Artifact, Database, App, Route} {
		e.Resources = append(e.Resources, Resource{Capability: cap, Identity: e.Identity(cap), Status: "absent"})
	}
	if c.By != "" {
		e.Audit = append(e.Audit, AuditEntry{Actor: c.By, Action: "create", Reason: "requested", At: now})
	}
	return e, nil
}

// Step applies one event. It never mutates e. Where the event ends a
// transition and nothing but the machine's own decision lies before the
// next, the next begins in the same step (proceed): one commit per state
// boundary.
func (m Machine) Step(e Env, ev Event, now time.Time) (Env, Outcome) {
	before := e
	e = e.Clone()
	owner := m.Config.Worker
	if e.Attempt != nil {
		owner = e.Attempt.Lease.Owner // the worker whose attempt ends here goes on
	}
	out := m.decide(&e, before, ev, now)
	if out.Err != nil {
		return before, Outcome{Err: out.Err}
	}
	if !out.Rejected && !before.equal(e) {
		// An event that decided nothing (a TTL not yet due, a resource
		// found as desired, a refused result) begins nothing either: the
		// next step is the Advance's, at its time, and explain can say
		// which input does what (O17).
		m.proceed(&e, ev, owner, &out, now)
	}
	resolveDrift(&e, before, now)
	e.trim()
	through := out.through
	if e.State != before.State && (len(through) == 0 || through[len(through)-1] != e.State) {
		through = append(through, e.State)
	}
	r := Outcome{Answer: Verdict{Note: out.Note, Rejected: out.Rejected, Through: through}, Effects: append(out.Effects, sends(before.Outbox, e.Outbox)...),
		Changed: !before.equal(e)}
	if r.Changed {
		e.UpdatedAt = now
	}
	r.Wake = m.Wake(e)
	return e, r
}

// decide is the event's own transition on e (a clone of before).
func (m Machine) decide(e *Env, before Env, ev Event, now time.Time) decision {
	if c, ok := ev.(Create); ok {
		return m.create(e, before, c, now)
	}
	if g, ok := ev.(GenerationGiven); ok {
		return m.given(e, g)
	}
	if e.Tombstone != nil {
		switch ev := ev.(type) {
		case AtRest:
			return m.atRestTombstone(e, ev, now)
		case Action:
			return m.action(e, ev, now)
		case Delivered:
			return m.delivered(e, ev)
		}
		return decision{Note: "tombstone: nothing to do"}
	}
	switch ev := ev.(type) {
	case Advance:
		return m.advance(e, ev, now)
	case DriverAnswer:
		return m.result(e, ev, now)
	case RenewLease:
		return m.renew(e, ev, now)
	case OwnerGone:
		return m.ownerGone(e, ev, now)
	case RemoveEnv:
		if ev.By != "" && e.Desired != "removed" {
			e.Audit = append(e.Audit, AuditEntry{Actor: ev.By, Action: "remove", Reason: ev.Reason, At: now})
		}
		return m.remove(e, ev.Reason, now)
	case Expire:
		if e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt) || e.Desired == "removed" {
			return decision{Note: "not expired"}
		}
		return m.remove(e, "ttl expired", now)
	case AtRest:
		return m.atRest(e, ev, now)
	case Action:
		return m.action(e, ev, now)
	case Delivered:
		return m.delivered(e, ev)
	}
	panic(fmt.Sprintf("environment: unknown event %T", ev))
}

// create makes the environment, asking its branch for a route generation
// when the create brought none.
func (m Machine) create(e *Env, before Env, c Create, now time.Time) decision {
	if before.ID != "" {
		return decision{Err: fmt.Errorf("%w: environment %s already exists", errs.Conflict, before.ID)}
	}
	created, err := m.New(c, now)
	if err != nil {
		return decision{Err: err}
	}
	*e = created
	if e.Generation != 0 {
		return decision{Note: "created"}
	}
	out := m.askBranch(e, now)
	out.Note = "created; " + out.Note
	return out
}

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

// trim keeps the record within MaxReceipts, MaxAudit and MaxDrift.
func (e *Env) trim() {
	if n := len(e.Receipts) - MaxReceipts; n > 0 {
		e.Receipts = slices.Delete(e.Receipts, 0, n)
		e.Trimmed += n
	}
	if n := len(e.Audit) - MaxAudit; n > 0 {
		e.Audit = slices.Delete(e.Audit, 0, n)
		e.Trimmed += n
	}
	for i := 0; len(e.Drift) > MaxDrift && i < len(e.Drift); {
		if e.Drift[i].Outcome != "" {
			e.Drift = slices.Delete(e.Drift, i, i+1)
			continue
		}
		i++
	}
}

// equal reports whether e and o hold the same record: what a step's
// change check asks, field by field (reflect.DeepEqual was a twentieth of
// the simulator). A nil and an empty list differ, as they encode
// differently. TestEqualSeesEveryField fails on a field added here and not
// compared.
func (e Env) equal(o Env) bool {
	return e.ID == o.ID && e.Branch == o.Branch && e.URL == o.URL && e.Revision == o.Revision &&
		e.Data == o.Data && e.Desired == o.Desired && e.State == o.State && e.Generation == o.Generation &&
		e.AskedAt == o.AskedAt && e.ExpiresAt == o.ExpiresAt && samePtr(e.Attempt, o.Attempt) &&
		e.AttemptSeq == o.AttemptSeq && e.LeaseGeneration == o.LeaseGeneration &&
		sameList(e.Receipts, o.Receipts) && sameList(e.Resources, o.Resources) &&
		sameFailure(e.LastFailure, o.LastFailure) && e.Failures == o.Failures && e.RetryAt == o.RetryAt &&
		sameList(e.Outbox, o.Outbox) && sameList(e.Drift, o.Drift) && sameList(e.Audit, o.Audit) &&
		e.RemovalReason == o.RemovalReason && e.DataRemovalOK == o.DataRemovalOK && e.Trimmed == o.Trimmed &&
		e.SupersededBy == o.SupersededBy && samePtr(e.Tombstone, o.Tombstone) &&
		e.CreatedAt == o.CreatedAt && e.UpdatedAt == o.UpdatedAt
}

func sameFailure(a, b *Failure) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Transition == b.Transition && a.AttemptID == b.AttemptID && a.Category == b.Category &&
		a.Message == b.Message && a.Retryable == b.Retryable && a.Needs == b.Needs &&
		sameList(a.Resources, b.Resources) && a.At == b.At
}

// samePtr reports whether a and b are both nil or point to equal values.
func samePtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// sameList reports whether a and b are both nil or hold equal elements.
func sameList[T comparable](a, b []T) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

func (e Env) Clone() Env {
	if e.Attempt != nil {
		a := *e.Attempt
		e.Attempt = &a
	}
	if e.LastFailure != nil {
		f := *e.LastFailure
		e.LastFailure = &f
	}
	if e.Tombstone != nil {
		t := *e.Tombstone
		e.Tombstone = &t
	}
	e.Receipts = slices.Clone(e.Receipts)
	e.Resources = slices.Clone(e.Resources)
	e.Outbox = slices.Clone(e.Outbox)
	e.Drift = slices.Clone(e.Drift)
	e.Audit = slices.Clone(e.Audit)
	return e
}

// eligible reports whether a new attempt may start now.
func (m Machine) eligible(e *Env, now time.Time) (string, bool) {
	if f := e.LastFailure; f != nil {
		if !f.Retryable {
			return "waiting for " + f.Needs + " after a " + string(f.Category) + " failure", false
		}
		if now.Before(e.RetryAt) {
			return "backing off until " + e.RetryAt.Format(time.RFC3339), false
		}
	}
	if m.openDrift(e) >= 0 {
		return "drift waits for an operator decision (E15)", false
	}
	return "", true
}

// Wake is when the environment next needs its worker: at once (its last
// update) when a transition is eligible and none is in flight, so a process
// that died right after a commit picks the work up on recovery (I11);
// otherwise a back-off ending, a lease expiring (a crashed worker's attempt
// is taken over then), or TTL. Zero means nothing is due.
func (m Machine) Wake(e Env) time.Time {
	var at time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if e.Tombstone != nil {
		return at
	}
	if e.Attempt != nil {
		// Only the lease matters while an attempt is in flight: a back-off
		// that led to it is over (a past wake here would be spent on a
		// leased attempt and the expiry never armed).
		earliest(e.Attempt.Lease.ExpiresAt)
	} else if e.Generation == 0 {
		earliest(e.AskedAt.Add(m.askBranchAgain())) // its answer may have been lost
	} else if e.LastFailure != nil && e.LastFailure.Retryable && !e.RetryAt.IsZero() {
		earliest(e.RetryAt)
	} else if _, next := m.transitionFrom(e.State); next {
		if _, ok := m.eligible(&e, e.UpdatedAt); ok {
			earliest(e.UpdatedAt)
		}
	}
	if e.Desired == "ready" {
		earliest(e.ExpiresAt)
	}
	return at
}

func (m Machine) advance(e *Env, a Advance, now time.Time) decision {
	if e.Generation == 0 {
		if now.Before(e.AskedAt.Add(m.askBranchAgain())) {
			return decision{Note: "waiting for branch " + e.Branch + " to give the route generation"}
		}
		return m.askBranch(e, now)
	}
	if at := e.Attempt; at != nil {
		if now.Before(at.Lease.ExpiresAt) {
			return decision{Note: fmt.Sprintf("attempt %s is leased to %s until %s", at.ID, at.Lease.Owner, at.Lease.ExpiresAt.Format(time.RFC3339))}
		}
		// E7: takeover only after expiry, and the previous attempt is
		// reconciled first: observe what it may have done.
		prev := at.Lease.Owner
		e.LeaseGeneration++
		at.Lease = Lease{Owner: a.Owner, Generation: e.LeaseGeneration, ExpiresAt: now.Add(m.Config.LeaseFor)}
		at.Verifying, at.Unknown = true, at.Op != Observe
		return decision{Note: fmt.Sprintf("took over attempt %s from %s (lease expired); observing first (E7)", at.ID, prev),
			Effects: []Effect{m.do(e, Observe)}}
	}
	if why, ok := m.eligible(e, now); !ok {
		return decision{Note: why}
	}
	return m.start(e, a.Owner, a.BranchNewest, now)
}

// start begins the transition from the current state: the intent recorded
// before its first effect (E5), or, for the last removal state, the
// tombstone.
func (m Machine) start(e *Env, owner string, branchNewest uint64, now time.Time) decision {
	t, ok := m.transitionFrom(e.State)
	if !ok {
		return decision{Note: "no transition from " + string(e.State)}
	}
	if t.from == AppStopped && e.Data == Preserve && !e.DataRemovalOK {
		e.LastFailure = &Failure{Transition: string(t.from) + " -> " + string(t.to), Category: Configuration, Retryable: false,
			Needs: "review", Message: "data holds review-entered state; removal needs an operator decision (continue-removal, E12)", At: now}
		return decision{Note: e.LastFailure.Message}
	}
	if len(t.steps) == 0 { // resources-verified-absent -> removed
		e.State = t.to
		e.Tombstone = &Tombstone{Reason: e.RemovalReason, RemovedAt: now}
		e.Attempt = nil
		m.announce(e, EventRemoved, "removed: "+e.RemovalReason, now)
		return decision{Note: "removed; tombstone kept for leak audits (E12)", through: []Phase{Removed}}
	}
	return m.begin(e, t, 0, owner, branchNewest, now)
}

// askBranch asks the branch for the route generation (again, after
// AskBranchAgain: its answer, or the asking, may have been lost); asking
// twice is told the same one (StepBranch).
func (m Machine) askBranch(e *Env, now time.Time) decision {
	e.AskedAt = now
	return decision{Note: "its route generation asked of branch " + e.Branch, Effects: []Effect{AskGeneration{Branch: e.Branch}}}
}

func (m Machine) askBranchAgain() time.Duration {
	if m.Config.AskBranchAgain > 0 {
		return m.Config.AskBranchAgain
	}
	return time.Minute
}

// given records the route generation the branch gave (GenerationGiven):
// the route's declared identity is named after it (E2).
func (m Machine) given(e *Env, g GenerationGiven) decision {
	if e.Generation != 0 {
		return decision{Note: fmt.Sprintf("route generation %d already given", e.Generation)}
	}
	e.Generation = g.Generation
	for i := range e.Resources {
		if e.Resources[i].Capability == Route {
			e.Resources[i].Identity = e.Identity(Route)
		}
	}
	return decision{Note: fmt.Sprintf("route generation %d given by branch %s", g.Generation, e.Branch)}
}

// proceed begins the next transition in the step that ended the one
// before (a result verified, a drift repaired, a removal asked, a create),
// when one is eligible now; a step that began an attempt, or whose next
// would activate the route without knowing the branch's newest generation
// (an event that does not carry it), leaves it to the next Advance.
func (m Machine) proceed(e *Env, ev Event, owner string, out *decision, now time.Time) {
	var newest uint64
	switch ev := ev.(type) {
	case Create, RemoveEnv, Expire, GenerationGiven:
	case DriverAnswer:
		newest = ev.BranchNewest
	case AtRest:
		newest = ev.BranchNewest
	case Action:
		newest = ev.BranchNewest
	default:
		return // an advance already did; the others never end a transition
	}
	// A step skipped (a superseded preview's route and smoke check) ends
	// its transition at once, so the next may begin in the same step too;
	// each round enters a state, so there are at most as many as states.
	for range maxProceed {
		if e.Attempt != nil || e.Tombstone != nil || e.Generation == 0 {
			return // an attempt in flight, nothing left, or no generation yet
		}
		if t, ok := m.transitionFrom(e.State); !ok || len(t.steps) > 0 && t.steps[0] == (step{Route, Apply}) && newest == 0 {
			return
		}
		if _, ok := m.eligible(e, now); !ok {
			return
		}
		next := m.start(e, owner, newest, now)
		if next.Err != nil {
			return
		}
		out.Note += "; " + next.Note
		out.Effects = append(out.Effects, next.Effects...)
		out.through = append(out.through, next.through...)
	}
}

// maxProceed bounds the transitions one step may begin: more than the
// provisioning path has states.
const maxProceed = 8

// begin records the attempt (intent before effect, E5) and asks for the
// step's effect.
func (m Machine) begin(e *Env, t transition, stepIdx int, owner string, branchNewest uint64, now time.Time) decision {
	st := t.steps[stepIdx]
	e.AttemptSeq++
	e.LeaseGeneration++
	e.Attempt = &Attempt{ID: fmt.Sprintf("att-%s-%d", e.ID, e.AttemptSeq), From: t.from, To: t.to, Step: stepIdx,
		Capability: st.cap, Op: st.op, Identity: e.Identity(st.cap), StartedAt: now,
		Lease: Lease{Owner: owner, Generation: e.LeaseGeneration, ExpiresAt: now.Add(m.Config.LeaseFor)}}
	// An observe step's effect is its own verification.
	e.Attempt.Verifying = st.op == Observe
	if st.cap == Route && st.op == Apply && branchNewest > e.Generation && e.SupersededBy == 0 {
		m.supersede(e, branchNewest, now)
	}
	if e.SupersededBy > 0 && (st.cap == Route && st.op == Apply || st.cap == Smoke) {
		// A newer generation of the branch holds the route: activating
		// this one would pull it back (I14), and the hostname's smoke check
		// would answer for the newer one.
		return m.stepDone(e, fmt.Sprintf("%s skipped: superseded by route generation %d (E8, I14)", st.cap, e.SupersededBy), "", now)
	}
	return decision{Note: fmt.Sprintf("attempt %s: %s -> %s, %s %s %s (E5)", e.Attempt.ID, t.from, t.to, st.op, st.cap, e.Attempt.Identity),
		Effects: []Effect{m.do(e, st.op)}}
}

func (m Machine) do(e *Env, op Op) Do {
	a := e.Attempt
	d := Do{AttemptID: a.ID, LeaseGeneration: a.Lease.Generation, Capability: a.Capability, Op: op, Identity: a.Identity, Generation: e.Generation}
	if a.Capability == Route && op == Apply {
		d.ExpectedRoute = e.Generation - 1 // the predecessor this activation replaces (E8)
	}
	return d
}

func (m Machine) ownerGone(e *Env, g OwnerGone, now time.Time) decision {
	a := e.Attempt
	if a == nil || a.Lease.Owner != g.Owner || !now.Before(a.Lease.ExpiresAt) {
		return decision{Note: "no live lease of " + g.Owner}
	}
	a.Lease.ExpiresAt = now
	return decision{Note: fmt.Sprintf("lease of attempt %s held by %s, which is gone, ends now; the next worker observes first (E7)", a.ID, g.Owner)}
}

func (m Machine) renew(e *Env, r RenewLease, now time.Time) decision {
	a := e.Attempt
	if a == nil || a.ID != r.AttemptID || a.Lease.Generation != r.LeaseGeneration {
		return decision{Rejected: true, Note: "lease renewal by a stale worker rejected (E7)"}
	}
	a.Lease.ExpiresAt = now.Add(m.Config.LeaseFor)
	return decision{Note: "lease renewed until " + a.Lease.ExpiresAt.Format(time.RFC3339)}
}

func (m Machine) result(e *Env, r DriverAnswer, now time.Time) decision {
	a := e.Attempt
	fenced := a != nil && a.Lease.Generation != r.LeaseGeneration
	if a == nil || a.ID != r.AttemptID || fenced {
		// E7, I13: a paused or stale worker never completes a newer attempt.
		e.Audit = append(e.Audit, AuditEntry{Actor: "controller", Action: ActionRejectStaleResult,
			Reason: fmt.Sprintf("result for %s under lease generation %d refused", r.AttemptID, r.LeaseGeneration), At: now})
		return decision{Rejected: true, Note: fmt.Sprintf("stale result for %s (lease generation %d) rejected and recorded (E7, I13)", r.AttemptID, r.LeaseGeneration)}
	}
	if !a.Verifying {
		if r.Timeout || r.OK {
			// Success is not evidence and a timeout is not failure: observe
			// the declared identity (E4, E8).
			a.Verifying, a.Unknown = true, r.Timeout
			note := "effect answered; verifying by observation (E4)"
			if r.Timeout {
				note = "effect timed out, decision unknown; observing (E8)"
			}
			return decision{Note: note, Effects: []Effect{m.do(e, Observe)}}
		}
		return m.fail(e, r.Category, r.Message, now)
	}
	a.Input, a.Output = r.Input, r.Output
	if r.Observation == nil {
		if r.Timeout || r.Category == "" {
			return m.fail(e, Transient, "observation did not answer", now)
		}
		return m.fail(e, r.Category, r.Message, now)
	}
	return m.verify(e, *r.Observation, now)
}

// verify judges an observation of the attempt's identity.
func (m Machine) verify(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	op := a.Op
	if t, _ := m.transitionFrom(a.From); t.steps != nil {
		op = t.steps[a.Step].op
	}
	if a.Capability == Route {
		if op == Apply {
			return m.verifyActivation(e, o, now)
		}
		// A route generation is owned by its number: ours exists only while
		// the branch route resolves to it. One held by a newer generation
		// is not ours to remove and is already absent for us (E11).
		o.Exists = o.Exists && o.RouteTarget == e.Generation
		o.Owner = e.ID
	}
	if a.Capability == Smoke {
		if o.RouteTarget > e.Generation {
			// Between activation and the smoke check a newer preview took
			// the branch hostname: superseded, not a failure (I14).
			m.supersede(e, o.RouteTarget, now)
			return m.stepDone(e, fmt.Sprintf("the hostname serves newer generation %d: superseded (E8, I14)", o.RouteTarget), "", now)
		}
		if e.SupersededBy == 0 && o.RouteTarget < e.Generation {
			return m.lostBeforeSmoke(e, Route, o, now)
		}
		if e.SupersededBy == 0 && !o.Exists {
			return m.lostBeforeSmoke(e, App, o, now) // the route is ours; nothing answers behind it
		}
		o.Owner = e.ID // the hostname's answer is not an ownership claim (E3)
	}
	if o.Exists && o.Owner != "" && o.Owner != e.ID {
		// E3: a same-name resource owned by someone else is a conflict,
		// never reused; removal never deletes it (E11).
		return m.fail(e, Conflict, fmt.Sprintf("%s exists but belongs to %s (E3)", a.Identity, o.Owner), now)
	}
	if again, ok := m.applyAgain(e, op, o); ok {
		return again
	}
	switch op {
	case Remove:
		if o.Exists {
			return m.fail(e, Transient, a.Identity+" still present after removal", now)
		}
		m.setResource(e, a.Capability, "", "removed")
		return m.stepDone(e, "already absent or removed, ownership verified (E11)", "", now)
	case Observe:
		return m.verifyObserved(e, o, now)
	}
	return m.verifyApplied(e, o, now)
}

// verifyObserved judges an observation step: absence verified, or a
// resource ready.
func (m Machine) verifyObserved(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	if a.From == DataRemoved { // resources-verified-absent
		if o.Exists {
			return m.fail(e, Transient, a.Identity+" is still present", now)
		}
		return m.stepDone(e, a.Identity+" verified absent", "", now)
	}
	if a.From == AppStarting && (!o.Exists || o.Replace) {
		// Waiting cannot make it ready: the next attempt starts it
		// again (P15), after the back-off of an observed failure.
		out := m.fail(e, Transient, fmt.Sprintf("%s cannot become ready as it is, started again next: %s", a.Identity, o.Detail), now)
		e.State = DataReady
		m.setResource(e, App, "", "absent")
		return out
	}
	if !o.Exists || !o.Matches {
		return m.fail(e, Transient, fmt.Sprintf("%s not ready: %s", a.Identity, o.Detail), now)
	}
	return m.stepDone(e, a.Identity+" ready: "+o.Detail, "", now)
}

// verifyApplied judges what an apply left.
func (m Machine) verifyApplied(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	if !o.Exists {
		return m.fail(e, Transient, a.Identity+" not found after apply", now)
	}
	if o.Replace {
		return m.fail(e, Transient, a.Identity+" cannot run as it is after apply: "+o.Detail, now)
	}
	if !o.Matches && a.Capability == App {
		// The instance exists and is this environment's; whether it is
		// ready is the next transition's observation (app-starting ->
		// app-ready), which may wait for it. A slow start is not a
		// configuration failure.
		m.setResource(e, App, o.ProviderID, "present")
		return m.stepDone(e, a.Identity+" started: "+o.Detail, o.ProviderID, now)
	}
	if !o.Matches {
		return m.fail(e, Configuration, a.Identity+" does not match the declared configuration: "+o.Detail, now)
	}
	m.setResource(e, a.Capability, o.ProviderID, "present")
	return m.stepDone(e, a.Identity+" verified: "+o.Detail, o.ProviderID, now)
}

// applyAgain: an effect whose outcome was unknown (a timeout, a takeover
// after a crash) and that is observed not to have happened simply did not
// happen, and is asked for again at once, once per attempt (E8, P16). A
// back-off is for failures that were observed; a second unknown outcome
// that is observed undone is one.
func (m Machine) applyAgain(e *Env, op Op, o Observation) (decision, bool) {
	a := e.Attempt
	// An application that exists but can never run as it is (exited,
	// killed) is not what an apply leaves behind.
	undone := op == Apply && (!o.Exists || o.Replace) || op == Remove && o.Exists
	if !a.Unknown || a.Reapplied || !undone || a.From == DataRemoved {
		return decision{}, false
	}
	a.Unknown, a.Reapplied, a.Verifying = false, true, false
	return decision{Note: fmt.Sprintf("%s: the %s whose outcome was unknown did not happen; asked again now (E8, P16)", a.Identity, op),
		Effects: []Effect{m.do(e, op)}}, true
}

// verifyActivation judges the route after an activation or its timeout
// (E8): at the target, success; at the predecessor, again under the same
// generation; at a newer generation, this preview is superseded. At the
// target the route must name this environment: generations are per
// branch, so one that names another is not this branch's route but a
// read gone wrong (P19), never recorded as ours.
func (m Machine) verifyActivation(e *Env, o Observation, now time.Time) decision {
	a := e.Attempt
	switch {
	case o.Exists && o.RouteTarget == e.Generation && o.Owner != e.ID:
		return m.fail(e, Transient, fmt.Sprintf("the route read at generation %d names %q, not this environment: not taken as its route (E8, P19)",
			o.RouteTarget, o.Owner), now)
	case o.Exists && o.RouteTarget == e.Generation:
		m.setResource(e, Route, o.ProviderID, "present")
		if o.URL != "" {
			e.URL = o.URL // where the route says the preview is served (W8)
		}
		return m.stepDone(e, fmt.Sprintf("route resolves to generation %d (E8)", e.Generation), o.ProviderID, now)
	case o.RouteTarget <= e.Generation:
		// Still at the predecessor (or none): retry under the same generation.
		a.Verifying = false
		return decision{Note: fmt.Sprintf("route still at generation %d; retrying activation of %d (E8)", o.RouteTarget, e.Generation),
			Effects: []Effect{m.do(e, Apply)}}
	default:
		// Newer work owns the route: this attempt is stale and must not
		// overwrite it (E8, I14). Decided: that is supersession, not a
		// failure; the transition completes without the route.
		m.supersede(e, o.RouteTarget, now)
		return m.stepDone(e, fmt.Sprintf("route is at newer generation %d; not overwritten, this preview is superseded (E8, I14)", o.RouteTarget), "", now)
	}
}

// lostBeforeSmoke: the smoke check found the route (gone, or pointing to an
// older generation) or the application (nothing answers behind our route)
// lost after its step was verified. Retrying the smoke check could never
// pass, since that step's verification no longer holds, so this is drift
// (E15), handled as at rest: a missing route is re-activated, a missing
// application reprovisioned through full readiness, automatically; a route
// pointing elsewhere, or anything while another drift is open, waits for
// an operator. Found by the simulator (seed 174): an application killed by
// hand between activation and smoke check left the preview retrying its
// smoke check into review, and resuming could not help. A repair that the
// smoke check keeps finding undone is a failure, retried with back-off: a
// walk repairs one capability at most maxRepairsPerWalk times.
func (m Machine) lostBeforeSmoke(e *Env, c Capability, o Observation, now time.Time) decision {
	d := Drift{Capability: c, Identity: e.Identity(c), DetectedAt: now, Desired: fmt.Sprintf("generation %d serving", e.Generation),
		Observed: fmt.Sprintf("route at generation %d, answered=%t (smoke check): %s", o.RouteTarget, o.Exists, o.Detail)}
	missing := c == App || o.RouteTarget == 0
	if missing && m.repairsUnderWay(e, c) >= maxRepairsPerWalk {
		return m.fail(e, Transient, fmt.Sprintf("the smoke check still finds %s lost after %d repairs: %s", d.Identity, maxRepairsPerWalk, o.Detail), now)
	}
	e.Attempt = nil
	if missing && m.openDrift(e) < 0 && (e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt)) {
		d.Outcome = "auto-repair"
		e.Drift = append(e.Drift, d)
		e.State = map[Capability]Phase{Route: AppReady, App: DataReady}[c]
		m.setResource(e, c, "", "absent")
		return decision{Note: fmt.Sprintf("%s lost before the smoke check: back to %s (E15)", c, e.State)}
	}
	e.Drift = append(e.Drift, d)
	return decision{Note: fmt.Sprintf("%s not as verified at the smoke check; recorded for an operator (E15)", c)}
}

// maxRepairsPerWalk bounds the automatic repairs of one capability that
// one walk to ready makes: a preview whose application dies again each
// time it is started would otherwise be reprovisioned in a loop.
const maxRepairsPerWalk = 3

// repairsUnderWay counts the automatic repairs of c not yet resolved by
// reaching ready: those of the walk under way.
func (m Machine) repairsUnderWay(e *Env, c Capability) int {
	n := 0
	for _, d := range e.Drift {
		if d.Capability == c && d.Outcome == "auto-repair" && d.ResolvedAt.IsZero() {
			n++
		}
	}
	return n
}

// supersede records that a newer preview of the branch holds the route
// (decided, see docs/decisions): it is the controller's own committed work, not a
// manual change, so no operator is asked; the route is never restored to
// this preview again (I14) and the view shows why.
func (m Machine) supersede(e *Env, newer uint64, now time.Time) {
	e.SupersededBy = newer
	m.setResource(e, Route, "", "superseded")
	reason := fmt.Sprintf("branch route taken by generation %d", newer)
	e.Audit = append(e.Audit, AuditEntry{Actor: "controller", Action: "superseded", Reason: reason, At: now})
	m.announce(e, EventSuperseded, reason, now)
}

func (m Machine) setResource(e *Env, c Capability, providerID, status string) {
	if c == Migrations || c == Smoke {
		c = map[Capability]Capability{Migrations: Database, Smoke: App}[c]
		if status == "removed" {
			return // the ledger goes with its database
		}
	}
	for i := range e.Resources {
		if e.Resources[i].Capability == c {
			e.Resources[i].Status = status
			e.Resources[i].Owner = e.ID
			if providerID != "" {
				e.Resources[i].ProviderID = providerID
			}
		}
	}
}

// stepDone records the receipt, then starts the next step or completes the
// transition.
func (m Machine) stepDone(e *Env, detail, providerID string, now time.Time) decision {
	a := e.Attempt
	t, _ := m.transitionFrom(a.From)
	op := t.steps[a.Step].op
	verifiedBy := op
	if a.Verifying {
		verifiedBy = Observe
	}
	e.Receipts = append(e.Receipts, Receipt{Transition: string(t.from) + " -> " + string(t.to), AttemptID: a.ID,
		Capability: a.Capability, Op: op, Identity: a.Identity, ProviderID: providerID, Detail: detail, At: now,
		VerifiedBy: verifiedBy, Input: a.Input, Output: a.Output})
	e.LastFailure, e.Failures, e.RetryAt = nil, 0, time.Time{}
	if a.Step+1 < len(t.steps) {
		out := m.begin(e, t, a.Step+1, a.Lease.Owner, 0, now)
		out.Note = detail + "; " + out.Note
		return out
	}
	e.State = t.to
	e.Attempt = nil
	out := decision{Note: fmt.Sprintf("%s; %s -> %s committed", detail, t.from, t.to), through: []Phase{t.to}}
	if t.to == Ready {
		m.announce(e, EventReady, "ready", now)
	}
	return out
}

// announce puts a notification in the outbox, committed with the state
// change it announces (E10); Step sends every record a step added. The
// key of a ready notification is the environment and generation (as it
// always was); the others add their event.
func (m Machine) announce(e *Env, event, detail string, now time.Time) {
	key := fmt.Sprintf("%s-%d", e.ID, e.Generation)
	if event != EventReady {
		key += "-" + strings.TrimPrefix(event, "environment-")
	}
	if slices.ContainsFunc(e.Outbox, func(x Notification) bool { return x.Key == key }) {
		return
	}
	n := Notification{Key: key, Event: event, EnvID: e.ID, Branch: e.Branch, Revision: e.Revision, Generation: e.Generation,
		Detail: detail, CreatedAt: now}
	if event != EventRemoved {
		n.URL = m.URLOf(*e)
	}
	e.Outbox = append(e.Outbox, n)
}

// clipNote bounds a driver's message kept in the record.
func clipNote(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// sends are the Send effects for the outbox records a step added.
func sends(before, after []Notification) []Effect {
	var out []Effect
	for _, n := range after {
		if !slices.ContainsFunc(before, func(x Notification) bool { return x.Key == n.Key }) {
			out = append(out, Send{Notification: n})
		}
	}
	return out
}

// fail records a structured failure; the environment stays in its last
// verified state with the failed attempt attached (E9).
func (m Machine) fail(e *Env, c Category, msg string, now time.Time) decision {
	a := e.Attempt
	f := &Failure{Transition: string(a.From) + " -> " + string(a.To), AttemptID: a.ID, Category: c, Message: msg, At: now}
	for _, r := range e.Resources {
		if r.Status == "present" {
			f.Resources = append(f.Resources, r.Identity)
		}
	}
	switch c {
	case Transient:
		e.Failures++
		if e.Failures > m.Config.MaxRetries {
			f.Retryable, f.Needs = false, "review"
			f.Message = fmt.Sprintf("%s (after %d retries; nothing retries forever)", msg, m.Config.MaxRetries)
		} else {
			f.Retryable, f.Needs = true, "backoff"
			e.RetryAt = now.Add(m.Config.RetryBackoff << (e.Failures - 1))
		}
	case Configuration:
		f.Needs = "new-input"
	case Permission:
		f.Needs = "policy-repair"
	default:
		f.Needs = "review"
	}
	e.LastFailure = f
	e.Attempt = nil
	return decision{Note: fmt.Sprintf("%s failure (%s): %s (E9)", c, f.Needs, msg)}
}

// remove starts the forward removal (E11): the route detaches first; a
// worker still holding a provisioning attempt is fenced off by a new lease
// generation, so it can never commit (I13).
func (m Machine) remove(e *Env, reason string, now time.Time) decision {
	if e.Desired == "removed" {
		return decision{Note: "already being removed"}
	}
	e.Desired, e.RemovalReason = "removed", reason
	// A removal is itself one of the three outcomes (E15): drift still
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

func (m Machine) openDrift(e *Env) int {
	for i, d := range e.Drift {
		if d.Outcome == "" {
			return i
		}
	}
	return -1
}

// atRest judges the reconciler's observation of an environment at rest
// (E14, E15). Observation first; it never restarts work blindly. Drift is
// named by what was observed (P13): an application that does not answer
// as itself is the application's drift, whatever the check that saw it;
// a route is drifted only when its content is not what warden wrote.
func (m Machine) atRest(e *Env, r AtRest, now time.Time) decision {
	if e.Attempt != nil || e.State != Ready || e.Desired != "ready" {
		return decision{Note: "not at rest; the attempt is reconciled by its worker"}
	}
	if r.Seq != e.AttemptSeq {
		return decision{Note: fmt.Sprintf("%s observed before attempt %d: stale, the next round looks again (P14)", r.Capability, e.AttemptSeq)}
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
	if o.Exists && o.Owner == e.ID && o.Matches {
		return decision{Note: string(r.Capability) + " as desired"}
	}
	d := Drift{Capability: r.Capability, Identity: e.Identity(r.Capability), DetectedAt: now, Desired: "present, owned, matching",
		Observed: fmt.Sprintf("exists=%t owner=%q matches=%t", o.Exists, o.Owner, o.Matches)}
	if m.driftOpenFor(e, d.Identity) {
		return decision{Note: d.Identity + ": drift already recorded, waiting for an operator (E15)"}
	}
	e.Drift = append(e.Drift, d)
	return decision{Note: string(r.Capability) + " drifted; recorded for an operator: repair, adopt or continue removal (E15)"}
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
// from a ready, unexpired environment is restored automatically (E15);
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
// through full readiness, never "marked running" (E15, P13), unless
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

// atRestSmoke is the end-to-end observation repeated at rest (P13): a
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
	if e.Tombstone == nil && e.Desired == "ready" {
		out = append(out, "abandon")
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
	}
	return decision{Err: fmt.Errorf("%w: unknown action %s", errs.Invalid, a.Name)}
}

// ActionNames are the manual actions an operator may take (E16); which of
// them an environment offers now is Actions.
var ActionNames = []string{"resume", "repair", "adopt", "continue-removal", "abandon", "rollback-route"}

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
			// A failed delivery never changes readiness (E10).
			return decision{Note: "notification " + d.Key + " not delivered; the sender retries"}
		}
	}
	return decision{Note: "unknown notification"}
}
