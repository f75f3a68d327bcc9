package environment

// The environment machine's inputs and outputs: the events it steps,
// the effects it asks for, and the verdict it answers.

import (
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Event is anything that can happen to an environment.
type Event interface{ isEvent() }

// Create records a new environment and begins its first transition
// in the same step. Generation is the branch's route generation for this
// environment, given out in order per branch by the branch's own counter
// (StepBranch): a newer preview of a branch always has a higher one, which
// is what the route's compare-and-set protects. Zero: the record
// asks its branch for one (AskGeneration) and begins once it is given.
type Create struct {
	ID, Branch, Revision string
	Data                 DataPolicy
	// DataFrom names the seed the database is copied from ("": empty).
	DataFrom string
	TTL      time.Duration
	// SleepAfter puts the preview to sleep once no request reached it for
	// this long (0: never; E19).
	SleepAfter time.Duration
	Generation uint64
	// By names the operator who asked, audited when set.
	By string
}

// Advance asks a worker (Owner) to take the next eligible transition: the
// intent is recorded before the effect. A worker finding an attempt
// whose lease has expired takes it over and observes first.
// BranchNewest is the newest route generation given out for the branch: a
// preview with a newer sibling never activates the route, not even over an
// absent one, since the newer one may have held it already.
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
	// URL is where a route driver says the route serves the preview.
	URL string
	// Replace: it exists but can never become ready as it is (exited,
	// or started with a configuration that is no longer current): it is
	// applied again rather than waited for.
	Replace bool
	// AtWaker: the route sends its host to warden's waker, not to the
	// application. Stopped: the application exists and is stopped, as a
	// sleep leaves it (E19).
	AtWaker bool
	Stopped bool
	// LastRequest is the last request the proxy served under the route's
	// host name, as far as it keeps (zero: none seen).
	LastRequest time.Time
	Detail      string
}

// DriverAnswer is a driver's answer for one attempt, under one lease generation.
// BranchNewest, as in Advance, is the branch's newest route generation
// when the answer came back: the result may end a transition and begin
// the route's activation in the same step.
type DriverAnswer struct {
	AttemptID       string
	LeaseGeneration uint64
	BranchNewest    uint64
	// OK is the effect's own answer (ignored for verification).
	OK bool
	// Timeout: no answer; the decision is unknown.
	Timeout  bool
	Category Category
	Message  string
	// Observation is set for an observe's answer.
	Observation *Observation
	// Input and Output are the driver call's request and answer, verbatim
	// (JSON), kept in the receipt.
	Input, Output string
}

// RenewLease extends a worker's lease during long work.
type RenewLease struct {
	AttemptID       string
	LeaseGeneration uint64
}

// RemoveEnv starts the forward removal. By names the operator who
// asked, audited when set.
type RemoveEnv struct{ Reason, By string }

// Expire is the TTL deadline: removal with reason ttl.
type Expire struct{}

// AtRest is the reconciler's observation of a resource of an environment
// with no transition in flight. Seq is the record's AttemptSeq
// when the observation was asked for: one taken before a later attempt
// says nothing about the world that attempt made.
type AtRest struct {
	Capability   Capability
	Observation  Observation
	Seq          uint64
	BranchNewest uint64 // as in DriverAnswer: a repair may begin with the route
}

// Action is an audited manual intervention; BranchNewest as in
// DriverAnswer.
type Action struct {
	Name, Actor, Reason string
	BranchNewest        uint64
}

// Traffic is the proxy's word on a ready preview's host, asked for when
// its sleep falls due: the last request it served there (E19).
type Traffic struct{ LastRequest time.Time }

// Visited is a request to a sleeping preview's host, as warden's waker
// received it: the preview is woken (E20). A request the proxy answered
// with the waker is the only kind; a HEAD or a health check never is one.
type Visited struct{ At time.Time }

// GenerationGiven is the branch's answer to a created environment's
// AskGeneration: its route generation. Told at least once; a second
// telling changes nothing.
type GenerationGiven struct{ Generation uint64 }

// OwnerGone says a lease owner is known to be dead: a process that
// restarted on a store only one process can open knows that every other
// owner named in it was an earlier incarnation of itself. Its
// lease ends now instead of at its expiry; the next worker still takes
// the attempt over by observing first.
type OwnerGone struct{ Owner string }

// Delivered is the notification sender's report.
type Delivered struct {
	Key string
	OK  bool
	// Error says why a delivery failed, without secrets.
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
func (Traffic) isEvent()      {}
func (Visited) isEvent()      {}

func (GenerationGiven) isEvent() {}

// Effect is work for the shell after the record is persisted.
type Effect interface{ isEffect() }

// Do calls a driver. Every call carries the attempt and lease generation;
// drivers reject obsolete generations where the target allows. A
// route apply is a compare-and-set on ExpectedRoute.
type Do struct {
	AttemptID       string
	LeaseGeneration uint64
	Capability      Capability
	Op              Op
	Identity        string
	Generation      uint64
	ExpectedRoute   uint64
	// DataFrom is the seed a database's apply copies ("": none).
	DataFrom string
}

// Send delivers an outbox notification.
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
	if d.DataFrom != "" {
		s += " from=seed-" + d.DataFrom
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
	// Rejected: a stale worker's commit was refused.
	Rejected bool
	// Through are the states the step entered, in order, the last the
	// record's: a step that ends a transition and the next one too (the
	// last removal state) passes more than one boundary.
	Through []Phase
}

func (v Verdict) String() string {
	if v.Rejected {
		return "REJECTED " + v.Note
	}
	return v.Note
}
