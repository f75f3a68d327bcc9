// Package marquee is the pure state machine of one marquee: a Docker host
// whose VM is provisioned out of band by a Terraform workflow that calls back
// (rules M1-M23 and invariants I1-I6 in docs/rules/marquee.md).
//
// Machine.Step(state, event, now) returns the new state and an Outcome
// (actors/entity): the result to answer and its encoded reply, the history
// entries to persist with the new state, the effects for the shell to
// start after it has, and the earliest deadline. The
// machine does no I/O, reads no clock, starts no goroutine and draws no
// random number; timers are deadlines derived from the state (Deadlines),
// and the shell turns each one that falls due into an event.
package marquee

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/wardenhq/warden/actors/entity"

	"github.com/wardenhq/warden/actors/errs"
)

// Origin is where a marquee's host comes from: handed over by its owner
// (byo) or built by warden's workflow (tutorial).
type Origin string

const (
	BYO      Origin = "byo"
	Tutorial Origin = "tutorial"
)

// Serving is the first state axis: can the host take traffic.
type Serving string

const (
	Disabled Serving = "disabled"
	Active   Serving = "active"
	Errored  Serving = "errored"
)

// Lifecycle is the second axis: where the VM is in its arc. Empty for
// byo marquees, which have none.
type Lifecycle string

const (
	Provisioning Lifecycle = "provisioning"
	Provisioned  Lifecycle = "provisioned"
	Destroying   Lifecycle = "destroying"
	Destroyed    Lifecycle = "destroyed"
	Failed       Lifecycle = "failed"
)

// Settled lifecycles hold no admission slot and clear the retry counter.
func (l Lifecycle) Settled() bool { return l == Provisioned || l == Destroyed || l == Failed }

// Progress is the UI's coarse step counter, ordered.
type Progress int

const (
	Queued Progress = iota
	VMStarting
	SSHConfiguring
	TLSProvisioning
	AppDeploying
)

var progressNames = [...]string{"queued", "vm_starting", "ssh_configuring", "tls_provisioning", "app_deploying"}

func (p Progress) String() string {
	if p < 0 || int(p) >= len(progressNames) {
		return fmt.Sprintf("progress(%d)", int(p))
	}
	return progressNames[p]
}

// ParseProgress turns a wire name into a Progress.
func ParseProgress(s string) (Progress, error) {
	for i, n := range progressNames {
		if n == s {
			return Progress(i), nil
		}
	}
	return 0, fmt.Errorf("unknown step %q (want one of queued, vm_starting, ssh_configuring, tls_provisioning, app_deploying)", s)
}

func (p Progress) MarshalText() ([]byte, error) { return p.AppendText(nil) }

// AppendText appends the wire name (a record's encoding writes it without
// an allocation).
func (p Progress) AppendText(b []byte) ([]byte, error) {
	if p < 0 || int(p) >= len(progressNames) {
		return b, fmt.Errorf("invalid progress %d", int(p))
	}
	return append(b, progressNames[p]...), nil
}

func (p *Progress) UnmarshalText(b []byte) error {
	v, err := ParseProgress(string(b))
	*p = v
	return err
}

// Verb of a Terraform callback.
type Verb string

const (
	VerbStep      Verb = "step"
	VerbDeployed  Verb = "deployed"
	VerbDestroyed Verb = "destroyed"
	VerbFailed    Verb = "failed"
	VerbNull      Verb = "null"
	VerbRebooted  Verb = "rebooted"
)

// Verbs lists every callback verb, in the seed's order.
var Verbs = []Verb{VerbStep, VerbDeployed, VerbDestroyed, VerbFailed, VerbNull, VerbRebooted}

// Action is what a workflow dispatch asks the workflow to do.
type Action string

const (
	ActionApply    Action = "apply"
	ActionRedeploy Action = "redeploy"
	ActionDestroy  Action = "destroy"
)

// Answer is the answer word of a callback (docs/rules/http-api.md).
type Answer string

const (
	Applied             Answer = "applied"
	Stale               Answer = "stale"
	Duplicate           Answer = "duplicate"
	Ignored             Answer = "ignored"
	PendingConfirmation Answer = "pending_confirmation"
	Checking            Answer = "checking"
	Vetoed              Answer = "vetoed"
	Locked              Answer = "locked"
)

// Connection is what a deployed callback reports. The SSH key and the
// acme-dns credentials are secrets: they are stored (bootstrap needs them)
// and never shown, logged or put in history.
type Connection struct {
	Host          string  `json:"host"`
	Port          int     `json:"port"`
	User          string  `json:"user"`
	SSHPrivateKey string  `json:"ssh_private_key"`
	FreeDomain    string  `json:"free_domain"`
	ACMEDNS       ACMEDNS `json:"acme_dns"`
}

// ACMEDNS holds the acme-dns account used to warm the wildcard certificate.
type ACMEDNS struct {
	ServerURL  string `json:"server_url"`
	Username   string `json:"username"`
	Password   string `json:"password"`
	Subdomain  string `json:"subdomain"`
	FullDomain string `json:"full_domain"`
}

// sameLocked compares the fields that can never change under a running
// environment: host, port, user and key.
func (c Connection) sameLocked(o Connection) bool {
	return c.Host == o.Host && c.Port == o.Port && c.User == o.User && c.SSHPrivateKey == o.SSHPrivateKey
}

// Dispatch tells where the current attempt's workflow dispatch stands.
type Dispatch string

const (
	// DispatchWaiting: the attempt waits for an admission slot; nothing sent.
	DispatchWaiting Dispatch = "waiting"
	// DispatchPending: intent recorded, outcome unknown until the driver
	// answers. A crash leaves it pending; recovery supersedes it.
	DispatchPending Dispatch = "pending"
	DispatchSent    Dispatch = "sent"
	DispatchFailed  Dispatch = "failed"
)

// Attempt is the current workflow attempt.
type Attempt struct {
	Generation     uint64    `json:"generation"`
	Action         Action    `json:"action"`
	Dispatch       Dispatch  `json:"dispatch"`
	DispatchedAt   time.Time `json:"dispatched_at,omitzero"`
	LastCallbackAt time.Time `json:"last_callback_at,omitzero"`
	// RunID and RunURL are the workflow run of this attempt, where the
	// dispatch API returned them; T4 binds OIDC callbacks to RunID.
	RunID  uint64 `json:"run_id,omitempty"`
	RunURL string `json:"run_url,omitempty"`
}

// Run is a workflow run warden dispatched: its id and the generation it
// was dispatched under.
type Run struct {
	ID         uint64 `json:"id"`
	Generation uint64 `json:"generation"`
}

// MaxRuns bounds the runs a marquee remembers: enough for every attempt of
// a day of stuck retries (M21 makes at most seven), so that a late
// callback of a superseded run is recognised as warden's and answered
// stale, not refused.
const MaxRuns = 16

// AdmissionStatus is the marquee's view of its admission.
type AdmissionStatus string

const (
	// AdmissionAsking: the question is sent to the pool, its answer not yet in.
	AdmissionAsking   AdmissionStatus = "asking"
	AdmissionQueued   AdmissionStatus = "queued"
	AdmissionReserved AdmissionStatus = "reserved"
)

// Admission is the marquee's copy of its place in a pool.
type Admission struct {
	Pool     string          `json:"pool"`
	Status   AdmissionStatus `json:"status"`
	Sequence uint64          `json:"sequence,omitempty"`
}

// Bootstrap tracks the post-deploy job for one generation.
type Bootstrap struct {
	Generation uint64    `json:"generation"`
	Failures   int       `json:"failures"`
	Running    bool      `json:"running"`
	RetryAt    time.Time `json:"retry_at,omitzero"`
}

// Downgrade is a confirmed null or a failed waiting for the control plane's
// answer about live chats.
type Downgrade struct {
	Verb       Verb      `json:"verb"`
	Generation uint64    `json:"generation"`
	Reason     string    `json:"reason,omitempty"`
	Asking     bool      `json:"asking"`
	RecheckAt  time.Time `json:"recheck_at,omitzero"`
	Unanswered int       `json:"unanswered"`
}

// Failure says why a marquee failed: what happened, under which
// rule, when and for which generation. Kept until a new attempt starts.
type Failure struct {
	Reason     string    `json:"reason"`
	Rule       string    `json:"rule"`
	At         time.Time `json:"at"`
	Generation uint64    `json:"generation"`
}

// Veto is the last downgrade the control plane's live chats held off:
// shown until the next attempt, so an operator sees why a null or
// failed did not tear the host down.
type Veto struct {
	Verb Verb      `json:"verb"`
	Live int       `json:"live"`
	At   time.Time `json:"at"`
}

// Tombstone is what remains of a reaped marquee.
type Tombstone struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// State is everything durable about one marquee.
type State struct {
	ID        string    `json:"id"`
	Kind      Origin    `json:"kind"`
	Pool      string    `json:"pool,omitempty"`
	Serving   Serving   `json:"serving"`
	Lifecycle Lifecycle `json:"lifecycle,omitempty"`
	Progress  Progress  `json:"progress"`
	// Generation is bumped before every dispatch and never decreases.
	Generation uint64 `json:"generation"`
	// DispatchedGeneration is the last generation a dispatch used; the next
	// dispatch takes a fresh one.
	DispatchedGeneration uint64      `json:"dispatched_generation"`
	Connection           *Connection `json:"connection,omitempty"`
	// ConnectionGeneration is the generation whose callback reported the
	// connection.
	ConnectionGeneration uint64     `json:"connection_generation,omitempty"`
	NullPendingUntil     time.Time  `json:"null_pending_until,omitzero"`
	RetryCount           int        `json:"retry_count"`
	Attempt              *Attempt   `json:"attempt,omitempty"`
	Admission            *Admission `json:"admission,omitempty"`
	Bootstrap            *Bootstrap `json:"bootstrap,omitempty"`
	Downgrade            *Downgrade `json:"downgrade,omitempty"`
	// Runs are the recent workflow runs (newest last, at most MaxRuns)
	// whose ids the dispatch API returned.
	Runs            []Run      `json:"runs,omitempty"`
	ReapOnDestroyed bool       `json:"reap_on_destroyed,omitempty"`
	Failure         *Failure   `json:"failure,omitempty"`
	LastVeto        *Veto      `json:"last_veto,omitempty"`
	Tombstone       *Tombstone `json:"tombstone,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// NullPending reports whether a first null waits for its confirmation.
// An expired flag counts as none.
func (s State) NullPending(now time.Time) bool {
	return !s.NullPendingUntil.IsZero() && now.Before(s.NullPendingUntil)
}

// equal reports whether s and o hold the same record: what a step's
// change check asks, field by field, since reflect.DeepEqual was a tenth
// of the durable path. A nil and an empty Runs differ, as they encode
// differently. TestEqualSeesEveryField fails on a field added here and not
// compared.
func (s State) equal(o State) bool {
	return s.ID == o.ID && s.Kind == o.Kind && s.Pool == o.Pool && s.Serving == o.Serving &&
		s.Lifecycle == o.Lifecycle && s.Progress == o.Progress && s.Generation == o.Generation &&
		s.DispatchedGeneration == o.DispatchedGeneration && samePtr(s.Connection, o.Connection) &&
		s.ConnectionGeneration == o.ConnectionGeneration && s.NullPendingUntil == o.NullPendingUntil &&
		s.RetryCount == o.RetryCount && samePtr(s.Attempt, o.Attempt) && samePtr(s.Admission, o.Admission) &&
		samePtr(s.Bootstrap, o.Bootstrap) && samePtr(s.Downgrade, o.Downgrade) &&
		(s.Runs == nil) == (o.Runs == nil) && slices.Equal(s.Runs, o.Runs) &&
		s.ReapOnDestroyed == o.ReapOnDestroyed && samePtr(s.Failure, o.Failure) &&
		samePtr(s.LastVeto, o.LastVeto) && samePtr(s.Tombstone, o.Tombstone) &&
		s.CreatedAt == o.CreatedAt && s.UpdatedAt == o.UpdatedAt
}

// samePtr reports whether a and b are both nil or point to equal values.
func samePtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// Clone returns a deep copy, so that Step never mutates its input: a failed
// persist must leave the previous state intact in the shell.
func (s State) Clone() State {
	if s.Connection != nil {
		c := *s.Connection
		s.Connection = &c
	}
	if s.Attempt != nil {
		a := *s.Attempt
		s.Attempt = &a
	}
	if s.Admission != nil {
		a := *s.Admission
		s.Admission = &a
	}
	if s.Bootstrap != nil {
		b := *s.Bootstrap
		s.Bootstrap = &b
	}
	if s.Downgrade != nil {
		d := *s.Downgrade
		s.Downgrade = &d
	}
	if s.Failure != nil {
		f := *s.Failure
		s.Failure = &f
	}
	if s.LastVeto != nil {
		v := *s.LastVeto
		s.LastVeto = &v
	}
	if s.Tombstone != nil {
		t := *s.Tombstone
		s.Tombstone = &t
	}
	s.Runs = append([]Run(nil), s.Runs...)
	return s
}

// AuthorizeRun checks an OIDC callback's run id against the runs warden
// dispatched for this marquee: a recorded run speaks only for the
// generation it was dispatched under; a run not recorded speaks only if a
// scoped credential vouched for the marquee as well (the dispatch API did
// not return run details). It never changes the state.
func AuthorizeRun(s State, runID, generation uint64, scopedVouched bool) error {
	for _, r := range s.Runs {
		if r.ID != runID {
			continue
		}
		if r.Generation != generation {
			return fmt.Errorf("%w: workflow run %d was dispatched for generation %d of marquee %s, not %d", errs.Forbidden, runID, r.Generation, s.ID, generation)
		}
		return nil
	}
	if scopedVouched {
		return nil
	}
	if s.Attempt != nil && s.Attempt.RunID != 0 {
		return fmt.Errorf("%w: workflow run %d is not a run warden dispatched for marquee %s", errs.Forbidden, runID, s.ID)
	}
	return fmt.Errorf("%w: warden has no run id for marquee %s (the dispatch returned no run details): send its scoped credential as well (T4)", errs.Forbidden, s.ID)
}

func conflictf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errs.Conflict, fmt.Sprintf(format, args...))
}

// ValidID accepts [a-z0-9][a-z0-9-]{0,62}.
func ValidID(id string) bool { return entity.ValidID(id) }

// CheckInvariants checks what must hold of every state the machine can
// reach, on top of Validate: I1 (an active marquee serves only the
// connection its current generation reported) and I9 (a settled marquee
// holds no admission). Golden fixtures that build a state by hand are
// checked with it, so they cannot describe an impossible one.
func (s State) CheckInvariants() error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Kind == Tutorial && s.Serving == Active && s.Connection != nil && s.ConnectionGeneration != s.Generation {
		return fmt.Errorf("I1: active with the connection of generation %d at generation %d", s.ConnectionGeneration, s.Generation)
	}
	if s.Kind == Tutorial && s.Serving == Active && s.Lifecycle != Provisioned {
		return fmt.Errorf("I1: active while %s", s.Lifecycle)
	}
	if s.Lifecycle.Settled() && s.Admission != nil {
		return fmt.Errorf("I9: %s and still holding admission %s", s.Lifecycle, s.Admission.Status)
	}
	return nil
}

// Validate checks a decoded snapshot before it is used: a record that
// fails is reported, never acted on.
func (s State) Validate() error {
	if !ValidID(s.ID) {
		return fmt.Errorf("id %q is not valid", s.ID)
	}
	switch s.Kind {
	case BYO:
		if s.Lifecycle != "" {
			return fmt.Errorf("byo marquee has lifecycle %q", s.Lifecycle)
		}
	case Tutorial:
		switch s.Lifecycle {
		case Provisioning, Provisioned, Destroying, Destroyed, Failed:
		default:
			return fmt.Errorf("tutorial marquee has lifecycle %q", s.Lifecycle)
		}
	default:
		return fmt.Errorf("kind %q is neither byo nor tutorial", s.Kind)
	}
	switch s.Serving {
	case Disabled, Active, Errored:
	default:
		return fmt.Errorf("serving %q is not a serving status", s.Serving)
	}
	if s.DispatchedGeneration > s.Generation {
		return fmt.Errorf("dispatched generation %d is ahead of generation %d", s.DispatchedGeneration, s.Generation)
	}
	return nil
}

// Change is one traced field a step changed, from what to what.
type Change = entity.Change

// The traced fields: where a marquee is, as its history must be able to
// say.
const (
	fieldServing = iota
	fieldLifecycle
	fieldGeneration
	fieldProgress
	tracedFields
)

var tracedNames = [tracedFields]string{"serving", "lifecycle", "generation", "progress"}

// traced is a state's traced fields as a history entry writes them.
func traced(s State) [tracedFields]string {
	return [tracedFields]string{string(s.Serving), string(s.Lifecycle), strconv.FormatUint(s.Generation, 10), s.Progress.String()}
}

// Changes is what a step from before to after changed of the traced
// fields, in their order; nil when it changed none.
func Changes(before, after State) []Change {
	b, a := traced(before), traced(after)
	var out []Change
	for i := range b {
		if b[i] != a[i] {
			out = append(out, Change{Field: tracedNames[i], From: b[i], To: a[i]})
		}
	}
	return out
}

// Replay follows a marquee's stored history, entry by entry in sequence
// order, and says where it stops being a true account (S14): a sequence
// that is not the next one, a change from a value the entries before it
// did not leave, or an end that is not the record's state. From the first
// entry (sequence 1) the fields start at a new marquee's zero values; from
// a trimmed window, each at the first value an entry names.
//
// An environment needs none: its audit and receipts live in its record,
// written in the same key as its state, so they cannot part.
type Replay struct {
	values  [tracedFields]string
	known   [tracedFields]bool
	last    uint64
	started bool
	// Broken is the first break found, with the sequence it is at.
	Broken *HistoryBreak
}

// HistoryBreak is where a history stops replaying to its record.
type HistoryBreak struct {
	Seq    uint64
	Reason string
}

func (b *HistoryBreak) Error() string { return fmt.Sprintf("history entry %d: %s", b.Seq, b.Reason) }

// Entry takes the entry stored at seq.
func (r *Replay) Entry(seq uint64, e Entry) {
	if r.Broken != nil {
		return
	}
	switch {
	case !r.started && seq == 1 && e.Changed != nil:
		// The create's entry: from a new marquee's zero values. (An
		// entry of a build before S14 names no change; the replay then
		// knows each field from the first entry that names it.)
		r.values, r.known = traced(State{}), [tracedFields]bool{true, true, true, true}
	case r.started && seq != r.last+1:
		r.breakAt(seq, "follows entry %d: entries between them are missing", r.last)
		return
	}
	r.started, r.last = true, seq
	for _, c := range e.Changed {
		i := fieldIndex(c.Field)
		switch {
		case i < 0:
			r.breakAt(seq, "changes a field history does not trace: %q", c.Field)
			return
		case r.known[i] && r.values[i] != c.From:
			r.breakAt(seq, "%s %s %s changes %s from %q, but the entries before it left %q", e.Source, e.Verb, e.Result, c.Field, c.From, r.values[i])
			return
		}
		r.values[i], r.known[i] = c.To, true
	}
}

// End checks the replayed fields against the record's state (whether the
// history reaches the record's newest sequence is its caller's to check,
// beside the record).
func (r *Replay) End(s State) *HistoryBreak {
	if r.Broken != nil {
		return r.Broken
	}
	now := traced(s)
	for i := range now {
		if r.known[i] && r.values[i] != now[i] {
			r.breakAt(r.last, "the history replays to %s %q; the record says %q", tracedNames[i], r.values[i], now[i])
			return r.Broken
		}
	}
	return nil
}

func (r *Replay) breakAt(seq uint64, format string, args ...any) {
	r.Broken = &HistoryBreak{Seq: seq, Reason: fmt.Sprintf(format, args...)}
}

func fieldIndex(name string) int {
	for i, n := range tracedNames {
		if n == name {
			return i
		}
	}
	return -1
}
