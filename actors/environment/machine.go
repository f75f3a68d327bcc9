package environment

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// Sleeps: the platform's route driver can send a host to warden's
	// waker and its application driver can stop an application: previews
	// may sleep (E19).
	Sleeps bool
	// RetryBackoff is the first wait after a transient failure, doubling;
	// MaxRetries transient failures of one transition end in review:
	// nothing retries forever.
	RetryBackoff time.Duration
	MaxRetries   int
	// LeaseFor is how long a worker holds a transition before another may
	// take it over.
	LeaseFor time.Duration
	// PreviewURL is the template of a preview's public URL, sent with its
	// readiness notification: {id}, {branch} and {generation}
	// are replaced. Empty: the URL the route driver observed, if any.
	PreviewURL string
	// Worker names the lease owner of the attempts this machine begins on
	// its own, where one transition ends and the next begins in one step
	// (a created environment's first, a repair's): the process that runs
	// it.
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

// URLOf is a preview's public URL: the configured template with its
// placeholders filled, or else what the route driver observed.
func (m Machine) URLOf(e Env) string {
	if m.Config.PreviewURL == "" {
		return e.URL
	}
	return strings.NewReplacer("{id}", e.ID, "{branch}", e.Branch, "{generation}", strconv.FormatUint(e.Generation, 10)).Replace(m.Config.PreviewURL)
}

// Machine applies the environment rules under one Config.
type Machine struct{ Config Config }

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
	case c.DataFrom != "" && !ValidSeed(c.DataFrom):
		return fmt.Errorf("%w: data_from %q must match [a-z0-9][a-z0-9-]{0,57}", errs.Invalid, c.DataFrom)
	case c.SleepAfter != 0 && (c.SleepAfter < MinSleepAfter || c.SleepAfter > MaxSleepAfter):
		return fmt.Errorf("%w: sleep_after must be between %s and %s (or none)", errs.Invalid, MinSleepAfter, MaxSleepAfter)
	}
	return nil
}

// New records a requested environment with its declared identities.
func (m Machine) New(c Create, now time.Time) (Env, error) {
	if err := c.Validate(); err != nil {
		return Env{}, err
	}
	if c.SleepAfter > 0 && !m.Config.Sleeps {
		return Env{}, fmt.Errorf("%w: sleep_after needs a platform whose previews can sleep, with a waker; this one has none", errs.Invalid)
	}
	if c.Data == "" {
		c.Data = Disposable
	}
	e := Env{ID: c.ID, Branch: c.Branch, Revision: c.Revision, Data: c.Data, DataFrom: c.DataFrom, Desired: "ready", State: Requested,
		Generation: c.Generation, SleepAfter: c.SleepAfter, CreatedAt: now, UpdatedAt: now}
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
		// which input does what.
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
	case Traffic:
		return m.traffic(e, ev, now)
	case Visited:
		return m.visited(e, ev, now)
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
		e.Data == o.Data && e.DataFrom == o.DataFrom && e.Desired == o.Desired && e.State == o.State && e.Generation == o.Generation &&
		e.SleepAfter == o.SleepAfter && e.ActiveAt == o.ActiveAt && e.AsleepSince == o.AsleepSince &&
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
// is taken over then), a sleep falling due, or TTL. Zero means nothing is
// due.
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
	} else if _, next := m.nextFrom(&e); next {
		if _, ok := m.eligible(&e, e.UpdatedAt); ok {
			earliest(e.UpdatedAt)
		}
	}
	earliest(e.sleepDue())
	if e.Desired != "removed" {
		earliest(e.ExpiresAt)
	}
	return at
}
